import Foundation

/// The notification area's state: each subject's notifications with the actions they offer,
/// and who answered what. The first answer wins; every later one is told who answered.
///
/// Pure value logic: the ``DevGateway`` actor owns the only instance.
struct NotificationLedger: Sendable {
    enum Status: String, Sendable {
        case pending, answered, expired, dismissed
    }

    struct Action: Sendable, Codable, Hashable {
        let label: String
        let action: String
        let authLevel: String?

        enum CodingKeys: String, CodingKey {
            case label, action
            case authLevel = "auth_level"
        }
    }

    struct Notice: Sendable {
        let uuid: String
        let subject: String
        let title: String
        let message: String
        let actions: [Action]
        let createdAt: Date
        let expiresAt: Date?
        var status: Status
        var actionPerformed: String?
        var answeredAt: Date?
        var answeredByDevice: String?
        /// Set for a new-device approval request: the registration an "approve" activates.
        let approvesRegistration: String?
        /// Insertion order, to break ties between notifications created in the same millisecond.
        let seq: Int
    }

    private(set) var notices: [String: Notice] = [:]
    private var nextSeq = 1
    /// Each subject's uuids, oldest first by (created, seq): a page is a slice, not a sort of the
    /// whole history (a sync of 100,000 notifications asks for 1,000 pages).
    private var order: [String: [String]] = [:]
    /// Pending notifications that have an expiry: all that ``overdue(now:)`` needs to look at
    /// (it runs before every device request).
    private var expiring: Set<String> = []

    // MARK: - Creating

    mutating func post(
        subject: String, title: String, message: String, actions: [Action], now: Date,
        expiresAt: Date?, approvesRegistration: String? = nil
    ) -> Notice {
        let notice = Notice(
            uuid: UUID().uuidString.lowercased(), subject: subject, title: title, message: message, actions: actions,
            createdAt: now, expiresAt: expiresAt, status: .pending, approvesRegistration: approvesRegistration, seq: nextSeq)
        nextSeq += 1
        notices[notice.uuid] = notice
        if expiresAt != nil { expiring.insert(notice.uuid) }
        var uuids = order[subject] ?? []
        order[subject] = nil
        // Usually the newest: appended. A clock set back inserts it in its place.
        var index = uuids.count
        while index > 0, let previous = notices[uuids[index - 1]], (previous.createdAt, previous.seq) > (notice.createdAt, notice.seq) {
            index -= 1
        }
        uuids.insert(notice.uuid, at: index)
        order[subject] = uuids
        return notice
    }

    // MARK: - Reading

    func notice(_ uuid: String) -> Notice? { notices[uuid] }

    /// `count` (nil: all) of the subject's notifications created in `[start, end)`, newest first,
    /// after skipping the newest `skipping`; and how many there are in all.
    func page(of subject: String, start: Date?, end: Date?, skipping: Int, count: Int?) -> (total: Int, notices: [Notice]) {
        let uuids = order[subject] ?? []
        if start == nil, end == nil {
            let lower = max(0, uuids.count - skipping - (count ?? uuids.count))
            let upper = max(0, uuids.count - skipping)
            return (uuids.count, uuids[lower..<upper].reversed().compactMap { notices[$0] })
        }
        let all = uuids.reversed().compactMap { notices[$0] }.filter { notice in
            start.map { notice.createdAt >= $0 } ?? true && end.map { notice.createdAt < $0 } ?? true
        }
        return (all.count, Array(all.dropFirst(skipping).prefix(count ?? all.count)))
    }

    /// Pending notifications whose expiry passed (their uuid and approval registration).
    func overdue(now: Date) -> [Notice] {
        expiring.compactMap { notices[$0] }.filter { $0.status == .pending && ($0.expiresAt.map { $0 <= now } ?? false) }
    }

    // MARK: - Changing

    mutating func setStatus(_ uuid: String, _ status: Status) {
        notices[uuid]?.status = status
        if status != .pending { expiring.remove(uuid) }
    }

    enum AnswerOutcome: Sendable {
        case answered(Notice)
        case alreadyAnswered(Notice)
        case expired(Notice)
        case dismissed(Notice)
        case actionNotOffered(Notice)
        case notFound
    }

    /// Records `action` by `deviceID` if the notification is still pending and offers it.
    mutating func answer(_ uuid: String, subject: String, action: String, deviceID: String, now: Date) -> AnswerOutcome {
        guard var notice = notices[uuid], notice.subject == subject else { return .notFound }
        switch notice.status {
        case .answered: return .alreadyAnswered(notice)
        case .expired: return .expired(notice)
        case .dismissed: return .dismissed(notice)
        case .pending: break
        }
        if let expiry = notice.expiresAt, expiry <= now {
            notice.status = .expired
            notices[uuid] = notice
            expiring.remove(uuid)
            return .expired(notice)
        }
        guard notice.actions.contains(where: { $0.action == action }) else { return .actionNotOffered(notice) }
        notice.status = .answered
        notice.actionPerformed = action
        notice.answeredAt = now
        notice.answeredByDevice = deviceID
        notices[uuid] = notice
        expiring.remove(uuid)
        return .answered(notice)
    }
}
