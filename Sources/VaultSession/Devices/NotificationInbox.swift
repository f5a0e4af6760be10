import Foundation
import Logging
import VaultStore

/// The account's notifications: synced from the server into the vault's history, listed
/// from the vault without the server, answered once, and pruned.
///
/// ```swift
/// let inbox = NotificationInbox(session: session, api: api)
/// try await inbox.syncAll(account: account)
/// let page = try await inbox.list(NotificationQuery(account: account, pendingOnly: true))
/// if let request = page.items.first {
///     switch try await inbox.answer(request.uuid, action: "approve", account: account) {
///     case .answered(let record): print("answered by this device", record.answeredAt ?? Date())
///     case .refused(let why): print(why)   // expired, already answered (by whom), not offered…
///     }
/// }
/// try await inbox.prune(olderThanDays: 90, keepNewest: 500)
/// ```
///
/// An answer is refused locally, with no request sent, when the stored notification expired,
/// was already answered (by this or another device), does not offer the action, or has an
/// answer in flight from this inbox. Otherwise it counts only once the server confirms it;
/// of two devices answering at once the server takes the first, and the other is told who
/// answered.
public actor NotificationInbox {
    let session: SessionService
    let api: any DeviceNotificationAPI
    let wallClock: WallClock
    let logger: Logger
    /// Notifications with an answer in flight.
    private var answering: Set<String> = []

    public init(
        session: SessionService, api: any DeviceNotificationAPI, wallClock: WallClock = .system,
        logger: Logger = Logger(label: "credentialvault.notifications")
    ) {
        self.session = session
        self.api = api
        self.wallClock = wallClock
        self.logger = logger
    }

    // MARK: - Sync

    /// Fetches one page (record count, start index, date range) and stores it. Idempotent by
    /// uuid: fetching the same or an overlapping page again adds nothing and updates status.
    @discardableResult
    public func sync(account: AccountID? = nil, page request: NotificationPageRequest = NotificationPageRequest()) async throws
        -> NotificationSyncResult
    {
        let id = try await session.resolve(account)
        let result = try await syncPage(id, request)
        try await applyRetention(id)
        return result
    }

    /// One page stored, without the retention (``syncAll(account:pageSize:startDate:endDate:)`` applies it once, at the end).
    private func syncPage(_ id: AccountID, _ request: NotificationPageRequest) async throws -> NotificationSyncResult {
        let api = self.api
        let page = try await deviceCall(session, id) { try await api.notifications(request, account: id) }
        // Refused whole, nothing stored: a page that is not the one asked for (paging on it
        // could go round forever) or that names one notification twice (which one is true?).
        guard page.startIndex == request.startIndex else {
            throw DeviceAPIError.malformedResponse(
                "asked for the page from \(request.startIndex), the server sent the one from \(page.startIndex); nothing was stored")
        }
        var seen = Set<String>()
        for notification in page.notifications where !seen.insert(notification.uuid).inserted {
            throw DeviceAPIError.malformedResponse("the page lists notification \(ServerInput.shown(notification.uuid)) twice; nothing was stored")
        }
        var skipped = page.skipped
        var records: [NotificationRecord] = []
        for notification in page.notifications {
            if let problem = ServerInput.problem(with: notification) {
                skipped.append("notification \(ServerInput.shown(notification.uuid)): \(problem)")
            } else {
                records.append(notification.record(for: id))
            }
        }
        for reason in skipped {
            logger.warning("a notification from the server was skipped", metadata: ["account": "\(id)", "reason": "\(reason)"])
        }
        let inserted = try await storeCall { [session, records] in try session.vault.notifications.upsert(records) }
        let sent = page.notifications.count + page.skipped.count
        let end = page.startIndex + sent
        let next = sent == 0 || end > page.totalCount ? nil : end
        logger.debug("notifications synced", metadata: ["account": "\(id)", "received": "\(sent)", "new": "\(inserted)"])
        return NotificationSyncResult(received: sent, inserted: inserted, totalCount: page.totalCount, nextStartIndex: next, skipped: skipped)
    }

    /// Fetches every page of the date range, `pageSize` at a time.
    @discardableResult
    public func syncAll(account: AccountID? = nil, pageSize: Int = 50, startDate: Date? = nil, endDate: Date? = nil) async throws
        -> NotificationSyncResult
    {
        let id = try await session.resolve(account)
        var total = NotificationSyncResult(received: 0, inserted: 0, totalCount: 0, nextStartIndex: 1)
        while let start = total.nextStartIndex {
            let page = try await syncPage(
                id,
                NotificationPageRequest(
                    recordCount: max(1, pageSize), startIndex: start,
                    startDate: startDate, endDate: endDate))
            total = NotificationSyncResult(
                received: total.received + page.received, inserted: total.inserted + page.inserted,
                totalCount: page.totalCount, nextStartIndex: page.nextStartIndex,
                skipped: total.skipped + page.skipped)
        }
        try await applyRetention(id)
        return total
    }

    // MARK: - List

    /// A page of the stored history, newest first (keyset pagination: pass the page's `next`
    /// as `after`), filtered by account, pending-only and date range. No server call. Pending
    /// notifications whose expiry passed are recorded as expired first.
    public func list(_ query: NotificationQuery = NotificationQuery()) async throws -> NotificationPage {
        try await expireOverdue(account: query.account)
        return try await storeCall { [session] in try session.vault.notifications.page(query) }
    }

    // MARK: - Answer

    /// Answers with one of the actions the notification offers; see ``AnswerOutcome``.
    /// Throws only when the server could not be asked or answered unexpectedly.
    public func answer(_ uuid: String, action: String, account: AccountID? = nil) async throws -> AnswerOutcome {
        let id = try await session.resolve(account)
        let vault = session.vault
        guard let stored = try await storeCall({ try vault.notifications.find(uuid, account: id) }) else {
            return refuse(.unknownNotification(uuid), uuid)
        }
        if let refusal = localRefusal(stored, action: action) {
            if case .expired = refusal, stored.status == .pending {
                var expired = stored
                expired.status = .expired
                try await storeCall { [expired] in try vault.notifications.upsert(expired) }
            }
            return refuse(refusal, uuid)
        }
        // An action that names an authentication level (approving a sign-in, say) needs a
        // recent authentication, as a sensitive action does in the app: the step-up the
        // sign-in work provides (SessionError.authenticationTooOld; `vault login --max-age 0`).
        if let chosen = stored.actions.first(where: { $0.action == action }), chosen.authLevel != nil {
            _ = try await session.validAccessToken(for: id, maxAuthenticationAge: session.configuration.stepUpMaximumAge)
        }
        guard answering.insert(uuid).inserted else { return refuse(.answerInFlight, uuid) }
        defer { answering.remove(uuid) }

        let api = self.api
        do {
            let confirmed = try await deviceCall(session, id) { try await api.answer(uuid, action: action, account: id) }
            let answeredAt = confirmed.answeredAt ?? wallClock.now()
            let recorded = try await storeCall {
                try vault.notifications.recordAnswer(to: uuid, account: id, action: action, byDevice: vault.deviceID, at: answeredAt)
            }
            if !recorded {
                // A sync changed the stored copy meanwhile: the server's confirmation is the truth.
                var record = confirmed.record(for: id)
                record.answeredByDevice = record.answeredByDevice ?? vault.deviceID
                try await storeCall { [record] in try vault.notifications.upsert(record) }
            }
            logger.info("notification answered", metadata: ["account": "\(id)", "notification": "\(uuid)"])
            guard let record = try await storeCall({ try vault.notifications.find(uuid, account: id) }) else {
                return refuse(.unknownNotification(uuid), uuid)
            }
            return .answered(record)
        } catch let error as DeviceAPIError {
            return try await serverRefusal(error, stored: stored, action: action)
        }
    }

    /// Why the stored notification cannot take `action` now, if it cannot.
    private func localRefusal(_ stored: NotificationRecord, action: String) -> AnswerRefusal? {
        switch stored.status {
        case .answered: return .alreadyAnswered(action: stored.actionTaken, byDevice: stored.answeredByDevice, at: stored.answeredAt)
        case .expired: return .expired(at: stored.expiresAt)
        case .dismissed: return .dismissed
        case .pending: break
        }
        if let expiry = stored.expiresAt, expiry <= wallClock.now() { return .expired(at: expiry) }
        guard stored.actions.contains(where: { $0.action == action }) else {
            return .actionNotOffered(action, offered: stored.actions.map(\.action))
        }
        return nil
    }

    /// Records what the server said of a refused answer and explains it.
    private func serverRefusal(_ error: DeviceAPIError, stored: NotificationRecord, action: String) async throws -> AnswerOutcome {
        var updated = stored
        let refusal: AnswerRefusal
        switch error {
        case .alreadyAnswered(let taken, let device, let at):
            updated.status = .answered
            updated.actionTaken = taken
            updated.answeredByDevice = device
            updated.answeredAt = at
            refusal = .alreadyAnswered(action: taken, byDevice: device, at: at)
        case .notificationExpired(let at):
            updated.status = .expired
            refusal = .expired(at: at ?? stored.expiresAt)
        case .notificationDismissed:
            updated.status = .dismissed
            refusal = .dismissed
        case .actionNotOffered(let offered):
            refusal = .actionNotOffered(action, offered: offered)
        default:
            throw error
        }
        if updated != stored { try await storeCall { [session, updated] in try session.vault.notifications.upsert(updated) } }
        return refuse(refusal, stored.uuid)
    }

    private func refuse(_ refusal: AnswerRefusal, _ uuid: String) -> AnswerOutcome {
        logger.info("notification answer refused", metadata: ["notification": "\(uuid)", "reason": "\(refusal)"])
        return .refused(refusal)
    }

    /// Records stored pending notifications whose expiry passed as expired.
    private func expireOverdue(account: AccountID?) async throws {
        let now = wallClock.now()
        let vault = session.vault
        var query = NotificationQuery(account: account, pendingOnly: true, limit: 200)
        var overdue: [NotificationRecord] = []
        while true {
            let page = try await storeCall { [query] in try vault.notifications.page(query) }
            overdue += page.items.filter { ($0.expiresAt.map { $0 <= now }) ?? false }
            guard let next = page.next else { break }
            query.after = next
        }
        guard !overdue.isEmpty else { return }
        let expired = overdue.map {
            var record = $0
            record.status = .expired
            return record
        }
        try await storeCall { _ = try vault.notifications.upsert(expired) }
    }

    // MARK: - Prune

    /// Applies the account's retention (``VaultStore/Account/notificationRetention``), if it has one.
    func applyRetention(_ id: AccountID) async throws {
        guard let retention = try await storeCall({ [session] in try session.vault.accounts.find(id) })?.notificationRetention else { return }
        try await prune(olderThanDays: retention.days, keepNewest: retention.count, account: id)
    }

    /// Deletes history older than `olderThanDays` and/or beyond the newest `keepNewest` per
    /// account (one account, or every one); returns how many notifications were removed.
    @discardableResult
    public func prune(olderThanDays: Int? = nil, keepNewest: Int? = nil, account: AccountID? = nil) async throws -> Int {
        let cutoff = olderThanDays.map { wallClock.now().addingTimeInterval(-Double($0) * 86_400) }
        let removed = try await storeCall { [session] in try session.vault.notifications.prune(olderThan: cutoff, keepNewest: keepNewest, account: account) }
        logger.info("notification history pruned", metadata: ["removed": "\(removed)"])
        return removed
    }
}
