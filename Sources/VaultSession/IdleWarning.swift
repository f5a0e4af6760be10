import Foundation
import VaultStore

/// The idle deadline is near (the codelab's `onSessionTimeOutNotification`): what
/// ``SessionEvent/idleWarning(_:)`` carries, judged on one version of the session.
///
/// A warning can reach a receiver after the session moved on: another process extended it or
/// recorded activity between the judgement and the delivery. The service drops such a warning
/// before its subscribers see it when it can tell (another process's warning is checked against
/// the session as the vault holds it at delivery); a receiver that queues events before acting
/// on them filters with ``StaleWarningFilter``.
///
/// ```swift
/// var filter = StaleWarningFilter()
/// for await event in session.events() where filter.admits(event) {
///     if case .idleWarning(let warning) = event, warning.canExtend {
///         print("Signing out in \(warning.secondsLeft) s — press a key to stay")
///     }
/// }
/// ```
public struct IdleWarning: Sendable, Hashable {
    public var account: AccountID
    /// Whole seconds to `deadline`, rounded up, when the warning was judged.
    public var secondsLeft: Int
    /// The idle deadline the warning was judged on, at the vault's millisecond precision.
    public var deadline: Date
    /// Whether an extension would be granted now (limit, absolute lifetime, activity since the
    /// last extension; a server may still refuse).
    public var canExtend: Bool
    /// The session and its version the warning was judged on; nil in a log entry written by a
    /// build that did not record it.
    public var session: SessionStamp?

    public init(account: AccountID, secondsLeft: Int, deadline: Date, canExtend: Bool, session: SessionStamp? = nil) {
        self.account = account
        self.secondsLeft = secondsLeft
        self.deadline = Date(millisecondsSince1970: deadline.millisecondsSince1970)
        self.canExtend = canExtend
        self.session = session
    }
}

/// One version of one session: every change to a session row moves its version on, and a new
/// sign-in starts a session with a higher id, so stamps order what processes judged.
public struct SessionStamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var session: Int64
    public var version: Int64

    public init(session: Int64, version: Int64) {
        self.session = session
        self.version = version
    }

    public init(_ record: SessionRecord) {
        self.init(session: record.id, version: record.version)
    }

    public static func < (lhs: SessionStamp, rhs: SessionStamp) -> Bool {
        (lhs.session, lhs.version) < (rhs.session, rhs.version)
    }

    public var description: String { "session \(session) v\(version)" }
}

/// Drops idle warnings older than what a receiver already knows, per account:
///
/// - a warning judged on an earlier idle deadline than one already seen (a later warning, an
///   extension's ``ExtensionResult/extended(idleDeadline:remaining:)``, or activity's
///   ``SessionEvent/idleWarningWithdrawn(_:idleDeadline:)``);
/// - a warning judged on an older session version than a warning already seen;
/// - a warning that arrives after the session was seen to lock or end, until it is seen
///   active again.
///
/// Every other event is admitted, and teaches the filter. Feed it every event, in the order
/// received; it is a value, so each receiver keeps its own.
public struct StaleWarningFilter: Sendable {
    private struct Known: Sendable {
        var deadline: Int64?
        var stamp: SessionStamp?
        var over = false
    }

    private var known: [AccountID: Known] = [:]

    public init() {}

    /// Whether `event` is news; learns from it either way.
    public mutating func admits(_ event: SessionEvent) -> Bool {
        switch event {
        case .idleWarning(let warning):
            var entry = known[warning.account, default: Known()]
            // Another session (a new sign-in): what was known of the old one does not apply.
            if let stamp = warning.session, let latest = entry.stamp, stamp.session > latest.session { entry = Known() }
            let deadline = warning.deadline.millisecondsSince1970
            if entry.over { return false }
            if let latest = entry.deadline, deadline < latest { return false }
            if let stamp = warning.session, let latest = entry.stamp, stamp < latest { return false }
            entry.deadline = deadline
            if let stamp = warning.session { entry.stamp = max(stamp, entry.stamp ?? stamp) }
            known[warning.account] = entry
            return true
        case .extensionResult(let account, .extended(let deadline, _)), .idleWarningWithdrawn(let account, let deadline):
            learn(deadline, for: account)
        case .stateChanged(let account, let status):
            known[account, default: Known()].over = status != .active
        default:
            break
        }
        return true
    }

    /// Forgets what is known of `account`'s session: after a change that moves its idle deadline
    /// earlier (a policy with a shorter idle timeout), so the warnings for it are not taken as stale.
    public mutating func forget(_ account: AccountID) {
        known[account] = nil
    }

    /// Notes an idle deadline learnt elsewhere (an extension this receiver asked for itself):
    /// warnings judged on earlier ones are stale.
    public mutating func learn(_ deadline: Date, for account: AccountID) {
        let deadline = deadline.millisecondsSince1970
        var entry = known[account, default: Known()]
        entry.deadline = max(deadline, entry.deadline ?? deadline)
        known[account] = entry
    }
}
