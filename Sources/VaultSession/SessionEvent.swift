import Foundation
import VaultStore

/// Why a session is locked or over. Stored in the vault as its raw value.
public struct SessionEndReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// No activity for the policy's idle timeout.
    public static let idleTimeout = SessionEndReason(rawValue: "idle_timeout")
    /// The absolute lifetime since sign-in passed (never extendable).
    public static let absoluteTimeout = SessionEndReason(rawValue: "absolute_timeout")
    /// Away in the background longer than the policy allows.
    public static let backgroundTimeout = SessionEndReason(rawValue: "background_timeout")
    /// The server refused the refresh token with `invalid_grant`: revoked, reused, password changed…
    public static let revoked = SessionEndReason(rawValue: "revoked")
    /// The server kept refusing the refresh for a reason the vault does not know (an unknown
    /// error code, a 400/401 without JSON), ``SessionConfiguration/maximumRefusals`` times in a row.
    public static let refused = SessionEndReason(rawValue: "refused")
    /// The server reported this device revoked.
    public static let deviceRevoked = SessionEndReason(rawValue: "device_revoked")
    /// The access token expired and there is no refresh token to renew it.
    public static let tokenExpired = SessionEndReason(rawValue: "token_expired")
    /// Locked on request (``SessionService/lock()``).
    public static let lockedByUser = SessionEndReason(rawValue: "locked_by_user")
    /// Ended by an administrator or the user from the `vault` command.
    public static let endedByUser = SessionEndReason(rawValue: "ended_by_user")
    /// A new sign-in to the same account replaced it.
    public static let replaced = SessionEndReason(rawValue: "replaced")
    /// A guest session whose account a registered account took over (a sign-in while the guest
    /// was active, or `vault login --upgrade-guest`).
    public static let upgraded = SessionEndReason(rawValue: "upgraded")
    /// The session moved to another vault (`vault sessions export`, `SessionTransferMode.move`).
    public static let exported = SessionEndReason(rawValue: "exported")
}

/// Where an account's session stands, as the codelab and article name the states.
public enum SessionStatus: Sendable, Hashable {
    /// No session: never signed in, signed out, or removed.
    case signedOut
    /// Tokens are served.
    case active
    /// Resumes only after an explicit unlock with the passphrase or key file.
    case locked(SessionEndReason)
    /// Over: the user signs in again.
    case expired(SessionEndReason)
}

/// The answer to ``SessionService/extendSession(for:)``.
public enum ExtensionResult: Sendable, Hashable {
    /// Extended: the new idle deadline and how many extensions remain.
    case extended(idleDeadline: Date, remaining: Int)
    /// Refused, with the reason.
    case refused(ExtensionRefusal)
    /// The identity service refused (``SessionExtensionAPI``), with its error code and message.
    case refusedByServer(code: String?, message: String?)
    /// Another extension for this session was in flight; this request was ignored.
    case ignored
}

/// Why an extension was refused.
public enum ExtensionRefusal: String, Sendable, Hashable {
    /// The policy's extension limit is used up.
    case limitReached = "limit_reached"
    /// The idle deadline already sits at the absolute lifetime, which never extends.
    case absoluteLifetimeReached = "absolute_lifetime_reached"
    /// The session is locked, expired or signed out.
    case sessionOver = "session_over"
    /// The policy has no idle timeout: there is nothing to extend.
    case noIdleTimeout = "no_idle_timeout"
    /// The server did not confirm the extension.
    case serverRefused = "server_refused"
    /// Asked before the idle warning: extensions are for the warning window.
    case notInWarningWindow = "not_in_warning_window"
    /// The session was extended before and nothing happened since: a session that is completely
    /// idle is not extended again (an extension is not activity; the user's next action is).
    case noActivitySinceExtension = "no_activity_since_extension"
}

/// Everything a client tool may want to show, as typed values.
public enum SessionEvent: Sendable, Hashable {
    /// An account's session changed state (in this process or, seen through the vault, another).
    case stateChanged(AccountID, SessionStatus)
    /// The idle deadline is near (the codelab's `onSessionTimeOutNotification`): the seconds
    /// left, the deadline and the session version it was judged on, and whether an extension
    /// would be granted. A receiver that queues events drops stale ones with ``StaleWarningFilter``.
    case idleWarning(IdleWarning)
    /// Activity inside the warning window moved the idle deadline to `idleDeadline`: a warning
    /// for an earlier deadline no longer holds (dismiss its countdown). Recorded with the
    /// activity, so another process's receiver learns it too; activity outside the warning
    /// window is not announced.
    case idleWarningWithdrawn(AccountID, idleDeadline: Date)
    /// The answer to an extension request.
    case extensionResult(AccountID, ExtensionResult)
    /// A deadline passed and the session ended (locked or expired per policy).
    case hardTimeout(AccountID, SessionEndReason)
    /// New tokens were stored (`generation` is the new token generation).
    case tokenRefreshed(AccountID, generation: Int64)
    /// A refresh failed for a reason that may pass; nothing is retried before `retryAt`.
    case refreshFailed(AccountID, reason: String, retryAt: Date?)
    /// The server revoked the grant; the account's tokens were wiped.
    case revoked(AccountID, description: String?)
    /// The active account changed (in this process or another).
    case accountSwitched(from: AccountID?, to: AccountID?)
    /// The account's refresh token expires at `expiresAt`, within
    /// ``GrantWatch/refreshExpiryWarning``: the user signs in again before then, or the
    /// session ends with it. Told once per refresh token, by a process with a ``GrantWatch``.
    case refreshTokenExpiring(AccountID, expiresAt: Date)
}
