import Foundation
import VaultStore

/// The result of ``NotificationInbox/answer(_:action:account:)``.
public enum AnswerOutcome: Sendable, Hashable {
    /// The server confirmed the answer; the record holds the action, its time and this device.
    case answered(NotificationRecord)
    /// Not answered, and why (refused locally without a request, or by the server).
    case refused(AnswerRefusal)
}

/// Why a notification was not answered.
public enum AnswerRefusal: Sendable, Hashable, CustomStringConvertible {
    /// Its expiry passed.
    case expired(at: Date?)
    /// Already answered, by this or another device.
    case alreadyAnswered(action: String?, byDevice: String?, at: Date?)
    /// The notification does not offer that action.
    case actionNotOffered(String, offered: [String])
    /// An answer to this notification is in flight from this process.
    case answerInFlight
    /// The server withdrew it.
    case dismissed
    /// The vault has no such notification for the account: sync first.
    case unknownNotification(String)

    public var description: String {
        switch self {
        case .expired(let at):
            "the notification expired\(at.map { " at \($0.messageText)" } ?? ""): it can no longer be answered"
        case .alreadyAnswered(let action, let device, _):
            "the notification was already answered\(action.map { " (\($0))" } ?? "")\(device.map { " by device \($0)" } ?? "")"
        case .actionNotOffered(let action, let offered):
            "\"\(action)\" is not an action this notification offers (it offers: \(offered.joined(separator: ", ")))"
        case .answerInFlight:
            "an answer to this notification is already being sent: wait for it"
        case .dismissed:
            "the notification was withdrawn by the server"
        case .unknownNotification(let uuid):
            "no notification \(uuid) in the vault for this account: sync notifications first"
        }
    }
}

/// What a sync stored.
public struct NotificationSyncResult: Sendable, Hashable {
    /// Notifications the server sent.
    public var received: Int
    /// Of those, how many were new to the vault (the rest updated stored ones).
    public var inserted: Int
    /// How many notifications match the request's date range at the server.
    public var totalCount: Int
    /// The start index of the next page, nil after the last one.
    public var nextStartIndex: Int?
    /// Why notifications the server sent were not stored (see ``ServerInput``); each was also
    /// logged as a warning.
    public var skipped: [String]

    public init(received: Int, inserted: Int, totalCount: Int, nextStartIndex: Int?, skipped: [String] = []) {
        self.received = received
        self.inserted = inserted
        self.totalCount = totalCount
        self.nextStartIndex = nextStartIndex
        self.skipped = skipped
    }
}
