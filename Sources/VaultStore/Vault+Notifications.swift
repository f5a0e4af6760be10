import Foundation
import GRDB

// MARK: - Notifications

extension Vault {
    /// Inserts the notification, or updates the stored one with the same account and uuid.
    /// Idempotent: storing the same notification twice leaves one row. Returns true when inserted.
    @discardableResult
    public func upsertNotification(_ notification: NotificationRecord) throws -> Bool {
        try write("storing a notification") { db in try self.upsertNotification(notification, db) }
    }

    /// Stores a batch in one transaction (a synced page). Returns how many were new.
    @discardableResult
    public func upsertNotifications(_ notifications: [NotificationRecord]) throws -> Int {
        try write("storing notifications") { db in
            try notifications.reduce(0) { count, notification in count + (try self.upsertNotification(notification, db) ? 1 : 0) }
        }
    }

    func upsertNotification(_ n: NotificationRecord, _ db: Database) throws -> Bool {
        let seal = { (column: String, value: String?) throws -> Data? in
            try self.seal(value, table: "notifications", column: column, account: n.account, row: n.uuid, db)
        }
        let actionsJSON = String(decoding: try JSONEncoder().encode(n.actions), as: UTF8.self)
        let existed =
            try Bool.fetchOne(
                db, sql: "SELECT 1 FROM notifications WHERE account_id = ? AND uuid = ?",
                arguments: [n.account.rawValue, n.uuid]) ?? false
        try integrity.rewrite(.notifications, where: "account_id = ? AND uuid = ?", [n.account.rawValue, n.uuid], db) {
            try db.execute(
                sql: """
                    INSERT INTO notifications (account_id, uuid, subject, message, actions, created_at, expires_at, status,
                        action_taken, answered_at, answered_by_device, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (account_id, uuid) DO UPDATE SET
                        subject = excluded.subject, message = excluded.message, actions = excluded.actions,
                        created_at = excluded.created_at, expires_at = excluded.expires_at, status = excluded.status,
                        action_taken = excluded.action_taken, answered_at = excluded.answered_at,
                        answered_by_device = excluded.answered_by_device, updated_at = excluded.updated_at
                    """,
                arguments: [
                    n.account.rawValue, n.uuid, try seal("subject", n.subject), try seal("message", n.message),
                    try seal("actions", actionsJSON), n.createdAt.millisecondsSince1970, n.expiresAt?.millisecondsSince1970,
                    n.status.rawValue, try seal("action_taken", n.actionTaken), n.answeredAt?.millisecondsSince1970,
                    n.answeredByDevice, clock.now().millisecondsSince1970,
                ])
        }
        return !existed
    }

    /// One notification by account and uuid.
    public func notification(_ uuid: String, account: AccountID) throws -> NotificationRecord? {
        try read("reading a notification") { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM notifications WHERE account_id = ? AND uuid = ?",
                arguments: [account.rawValue, uuid]
            ).map { try self.notification(from: $0, db) }
        }
    }

    /// A page of the history, newest first, with keyset pagination: a deep page costs what the
    /// first one costs. Rows inserted while paging never make a row appear twice or out of order.
    public func notifications(_ query: NotificationQuery = NotificationQuery()) throws -> NotificationPage {
        guard query.limit > 0 else { throw VaultError(.invalidArgument, "a page holds at least one notification", path: path) }
        var conditions: [String] = []
        var arguments: StatementArguments = []
        if let account = query.account {
            conditions.append("account_id = ?")
            _ = arguments.append(contentsOf: [account.rawValue])
        }
        if query.pendingOnly { conditions.append("status = 'pending'") }
        if let since = query.since {
            conditions.append("created_at >= ?")
            _ = arguments.append(contentsOf: [since.millisecondsSince1970])
        }
        if let until = query.until {
            conditions.append("created_at < ?")
            _ = arguments.append(contentsOf: [until.millisecondsSince1970])
        }
        if let after = query.after {
            conditions.append("(created_at, seq) < (?, ?)")
            _ = arguments.append(contentsOf: [after.createdAt, after.seq])
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        _ = arguments.append(contentsOf: [query.limit + 1])
        let sql = "SELECT * FROM notifications \(filter) ORDER BY created_at DESC, seq DESC LIMIT ?"
        return try read("listing notifications") { db in
            let rows = try Row.fetchAll(db, sql: sql, arguments: arguments)
            let page = rows.prefix(query.limit)
            let next =
                rows.count > query.limit
                ? try page.last.map { last in
                    NotificationCursor(
                        createdAt: try last.stored("created_at", table: "notifications", row: last.storedKey("uuid"), path: self.path),
                        seq: try last.stored("seq", table: "notifications", row: last.storedKey("uuid"), path: self.path))
                } : nil
            return NotificationPage(items: try page.map { try self.notification(from: $0, db) }, next: next)
        }
    }

    /// Records an answer if, and only if, the notification is still pending: of two devices
    /// answering at once exactly one wins. Returns false when it was no longer pending.
    public func recordAnswer(to uuid: String, account: AccountID, action: String, byDevice device: String, at time: Date) throws -> Bool {
        try write("recording an answer") { db in
            let sealed = try self.seal(action, table: "notifications", column: "action_taken", account: account, row: uuid, db)
            return try self.integrity.rewrite(.notifications, where: "account_id = ? AND uuid = ?", [account.rawValue, uuid], db) {
                try db.execute(
                    sql: """
                        UPDATE notifications SET status = 'answered', action_taken = ?, answered_at = ?, answered_by_device = ?,
                            updated_at = ? WHERE account_id = ? AND uuid = ? AND status = 'pending'
                        """,
                    arguments: [
                        sealed, time.millisecondsSince1970, device, self.clock.now().millisecondsSince1970,
                        account.rawValue, uuid,
                    ])
                return db.changesCount == 1
            }
        }
    }

    /// Deletes history older than `olderThan` and/or beyond the newest `keepNewest` per account.
    /// Returns how many notifications were removed.
    @discardableResult
    public func pruneNotifications(olderThan: Date? = nil, keepNewest: Int? = nil, account: AccountID? = nil) throws -> Int {
        if let keepNewest, keepNewest < 0 { throw VaultError(.invalidArgument, "keepNewest must not be negative", path: path) }
        return try write("pruning notifications") { db in
            var removed = 0
            let accountFilter = account == nil ? "" : " AND account_id = ?"
            let accountArgument: [(any DatabaseValueConvertible)?] = account.map { [$0.rawValue] } ?? []
            if let olderThan {
                try db.execute(
                    sql: "DELETE FROM notifications WHERE created_at < ?" + accountFilter,
                    arguments: StatementArguments([olderThan.millisecondsSince1970] + accountArgument))
                removed += db.changesCount
            }
            if let keepNewest {
                try db.execute(
                    sql: """
                        DELETE FROM notifications WHERE seq IN (
                            SELECT seq FROM (
                                SELECT seq, row_number() OVER (PARTITION BY account_id ORDER BY created_at DESC, seq DESC) AS rank
                                FROM notifications WHERE 1 = 1\(accountFilter))
                            WHERE rank > ?)
                        """,
                    arguments: StatementArguments(accountArgument + [keepNewest]))
                removed += db.changesCount
            }
            return removed
        }
    }

    /// How many notifications the vault holds (optionally for one account).
    public func notificationCount(account: AccountID? = nil) throws -> Int {
        try read("counting notifications") { db in
            if let account {
                return try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE account_id = ?", arguments: [account.rawValue]) ?? 0
            }
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications") ?? 0
        }
    }

    private func notification(from row: Row, _ db: Database) throws -> NotificationRecord {
        try integrity.check(row, in: .notifications, db)
        let key = row.storedKey("uuid")
        func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
            try row.stored(column, table: "notifications", row: key, path: path)
        }
        func optional<T: DatabaseValueConvertible>(_ column: String) throws -> T? {
            try row.storedIfPresent(column, table: "notifications", row: key, path: path)
        }
        let account = AccountID(rawValue: try value("account_id"))
        let uuid: String = try value("uuid")
        let open = { (column: String) throws -> String? in
            try self.open(optional(column), table: "notifications", column: column, account: account, row: uuid, db)
        }
        guard let subject = try open("subject"), let message = try open("message"), let actionsJSON = try open("actions") else {
            throw VaultError(.damaged, "notification \(uuid) is missing a sealed field", path: path)
        }
        let actions: [NotificationAction]
        do {
            actions = try JSONDecoder().decode([NotificationAction].self, from: Data(actionsJSON.utf8))
        } catch {
            throw VaultError(.damaged, "notification \(uuid) has unreadable actions", path: path)
        }
        let status: String = try value("status")
        return NotificationRecord(
            uuid: uuid, account: account, subject: subject, message: message, actions: actions,
            createdAt: try row.storedDate("created_at", table: "notifications", row: key, path: path),
            expiresAt: try row.storedDateIfPresent("expires_at", table: "notifications", row: key, path: path),
            status: NotificationStatus(rawValue: status) ?? .dismissed,
            actionTaken: try open("action_taken"),
            answeredAt: try row.storedDateIfPresent("answered_at", table: "notifications", row: key, path: path),
            answeredByDevice: try optional("answered_by_device"))
    }
}
