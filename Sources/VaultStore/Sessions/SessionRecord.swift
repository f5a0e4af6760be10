import Foundation

/// Where a session stands.
public enum SessionState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Tokens may be served.
    case active
    /// Timed out or backgrounded too long: resumes only after an explicit unlock.
    case locked
    /// Over: the user must sign in again (hard timeout, absolute lifetime, revoked grant…).
    case expired
    /// Ended by the user.
    case signedOut = "signed_out"
}

/// One sign-in session of an account, with every deadline the session service judges.
/// Holds no secret: all of it is plain metadata.
public struct SessionRecord: Sendable, Hashable, Identifiable {
    public var id: Int64
    public var account: AccountID
    public var state: SessionState
    /// Why the session is locked or over (for example "idle", "absolute", "revoked").
    public var endReason: String?
    public var startedAt: Date
    public var lastActivityAt: Date
    public var idleDeadline: Date?
    public var absoluteDeadline: Date?
    public var extensionsUsed: Int
    public var backgroundEnteredAt: Date?
    public var endedAt: Date?
    /// The row's version: every transition is a compare-and-swap on it, so a write based on a
    /// stale read (in this or another process) changes nothing.
    public var version: Int64
    /// The extension request in flight at the server for this session, in any process: who
    /// asked and until when the marker holds. Nil when none is.
    public var extensionInFlight: ExtensionMarker?
    /// When the user last authenticated for this session, as the sign-in recorded it (the
    /// verified ID token's `auth_time`, else the sign-in time); nil for sessions stored before
    /// schema 5 — ``lastAuthentication`` then falls back to ``startedAt``.
    public var authTime: Date?

    /// When the user last authenticated: ``authTime``, else ``startedAt``.
    public var lastAuthentication: Date { authTime ?? startedAt }

    /// See ``SessionRecord/extensionInFlight``.
    public struct ExtensionMarker: Sendable, Hashable {
        public var holder: String
        public var deadline: Date
        public init(holder: String, deadline: Date) {
            self.holder = holder
            self.deadline = deadline
        }
    }

    public init(
        id: Int64, account: AccountID, state: SessionState, endReason: String? = nil,
        startedAt: Date, lastActivityAt: Date, idleDeadline: Date?, absoluteDeadline: Date?,
        extensionsUsed: Int = 0, backgroundEnteredAt: Date? = nil, endedAt: Date? = nil,
        version: Int64 = 0, extensionInFlight: ExtensionMarker? = nil, authTime: Date? = nil
    ) {
        self.id = id
        self.account = account
        self.state = state
        self.endReason = endReason
        self.startedAt = startedAt
        self.lastActivityAt = lastActivityAt
        self.idleDeadline = idleDeadline
        self.absoluteDeadline = absoluteDeadline
        self.extensionsUsed = extensionsUsed
        self.backgroundEnteredAt = backgroundEnteredAt
        self.endedAt = endedAt
        self.version = version
        self.extensionInFlight = extensionInFlight
        self.authTime = authTime
    }
}
