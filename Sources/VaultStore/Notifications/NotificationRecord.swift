import Foundation

/// Where a notification stands.
public enum NotificationStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// Waiting for an answer.
    case pending
    /// Answered (on this or another device).
    case answered
    /// Its expiry passed without an answer.
    case expired
    /// Withdrawn by the server.
    case dismissed
}

/// One action a notification offers (the codelab's `actions[]`: label, action, auth level).
public struct NotificationAction: Sendable, Hashable, Codable {
    /// What a person sees ("Approve").
    public var label: String
    /// What is sent back to the server ("approve").
    public var action: String
    /// The authentication the server wants before this action is taken, if any.
    public var authLevel: String?

    public init(label: String, action: String, authLevel: String? = nil) {
        self.label = label
        self.action = action
        self.authLevel = authLevel
    }
}

/// A notification in the vault's history. Subject, message, offered actions and the action
/// taken are sealed at rest; times and status are plain.
public struct NotificationRecord: Sendable, Hashable, Identifiable {
    public var id: String { uuid }
    public var uuid: String
    public var account: AccountID
    public var subject: String
    public var message: String
    public var actions: [NotificationAction]
    public var createdAt: Date
    public var expiresAt: Date?
    public var status: NotificationStatus
    public var actionTaken: String?
    public var answeredAt: Date?
    public var answeredByDevice: String?

    public init(
        uuid: String, account: AccountID, subject: String, message: String, actions: [NotificationAction],
        createdAt: Date, expiresAt: Date? = nil, status: NotificationStatus = .pending,
        actionTaken: String? = nil, answeredAt: Date? = nil, answeredByDevice: String? = nil
    ) {
        self.uuid = uuid
        self.account = account
        self.subject = subject
        self.message = message
        self.actions = actions
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.status = status
        self.actionTaken = actionTaken
        self.answeredAt = answeredAt
        self.answeredByDevice = answeredByDevice
    }
}

/// A position in a newest-first notification listing. Opaque to callers; round-trips
/// through ``description`` and ``init(_:)`` so a command-line tool can print and accept it.
public struct NotificationCursor: Sendable, Hashable, CustomStringConvertible, LosslessStringConvertible {
    var createdAt: Int64
    var seq: Int64

    init(createdAt: Int64, seq: Int64) {
        self.createdAt = createdAt
        self.seq = seq
    }

    public init?(_ description: String) {
        let parts = description.split(separator: ".")
        guard parts.count == 3, parts[0] == "n1", let createdAt = Int64(parts[1]), let seq = Int64(parts[2]) else { return nil }
        self.init(createdAt: createdAt, seq: seq)
    }

    public var description: String { "n1.\(createdAt).\(seq)" }
}

/// Which notifications to list. Newest first; `since` is inclusive and `until` exclusive.
public struct NotificationQuery: Sendable, Hashable {
    public var account: AccountID?
    public var pendingOnly: Bool
    public var since: Date?
    public var until: Date?
    public var limit: Int
    public var after: NotificationCursor?

    public init(
        account: AccountID? = nil, pendingOnly: Bool = false, since: Date? = nil, until: Date? = nil,
        limit: Int = 50, after: NotificationCursor? = nil
    ) {
        self.account = account
        self.pendingOnly = pendingOnly
        self.since = since
        self.until = until
        self.limit = limit
        self.after = after
    }
}

/// One page of a listing, and the cursor of the next page (nil on the last page).
public struct NotificationPage: Sendable, Hashable {
    public var items: [NotificationRecord]
    public var next: NotificationCursor?
}
