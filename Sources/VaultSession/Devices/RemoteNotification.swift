import Foundation
import VaultStore

/// A notification as the identity service describes it (the codelab's notification item).
public struct RemoteNotification: Sendable, Hashable {
    public var uuid: String
    public var subject: String
    public var message: String
    public var actions: [NotificationAction]
    public var createdAt: Date
    public var expiresAt: Date?
    public var status: NotificationStatus
    /// The action taken (the codelab's `action_performed`), once answered.
    public var actionPerformed: String?
    public var answeredAt: Date?
    /// The device that answered.
    public var answeredByDevice: String?

    public init(
        uuid: String, subject: String, message: String, actions: [NotificationAction], createdAt: Date,
        expiresAt: Date? = nil, status: NotificationStatus, actionPerformed: String? = nil,
        answeredAt: Date? = nil, answeredByDevice: String? = nil
    ) {
        self.uuid = uuid
        self.subject = subject
        self.message = message
        self.actions = actions
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.status = status
        self.actionPerformed = actionPerformed
        self.answeredAt = answeredAt
        self.answeredByDevice = answeredByDevice
    }

    /// The vault's history record of it, for `account`.
    public func record(for account: AccountID) -> NotificationRecord {
        NotificationRecord(
            uuid: uuid, account: account, subject: subject, message: message, actions: actions,
            createdAt: createdAt, expiresAt: expiresAt, status: status, actionTaken: actionPerformed,
            answeredAt: answeredAt, answeredByDevice: answeredByDevice)
    }
}

/// Which notifications to fetch, with the codelab's paging: record count, start index and date range.
///
/// ```swift
/// // The second page of 20, created during March.
/// let page = NotificationPageRequest(recordCount: 20, startIndex: 21, startDate: march1, endDate: april1)
/// ```
public struct NotificationPageRequest: Sendable, Hashable {
    /// How many to return; 0 returns every one from `startIndex` on.
    public var recordCount: Int
    /// The first to return, counting from 1 in the server's newest-first order.
    public var startIndex: Int
    /// Only notifications created at or after this time.
    public var startDate: Date?
    /// Only notifications created before this time.
    public var endDate: Date?

    public init(recordCount: Int = 0, startIndex: Int = 1, startDate: Date? = nil, endDate: Date? = nil) {
        self.recordCount = recordCount
        self.startIndex = startIndex
        self.startDate = startDate
        self.endDate = endDate
    }
}

/// One page of the server's notifications.
public struct RemoteNotificationPage: Sendable, Hashable {
    public var notifications: [RemoteNotification]
    /// How many notifications match the date range in all.
    public var totalCount: Int
    /// The index of the first notification of this page.
    public var startIndex: Int
    /// Why notifications of the page the client could not read were left out (a status it
    /// does not know, say); they still count for the next page's start index.
    public var skipped: [String]

    public init(notifications: [RemoteNotification], totalCount: Int, startIndex: Int, skipped: [String] = []) {
        self.notifications = notifications
        self.totalCount = totalCount
        self.startIndex = startIndex
        self.skipped = skipped
    }
}
