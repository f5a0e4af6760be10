import Foundation
import GRDB
import VaultCrypto

// MARK: - Notifications

/// The accounts' notification history: each notification's sealed content, its actions, whether
/// and how it was answered, kept within the account's retention.
///
/// ```swift
/// let page = try vault.notifications.page(NotificationQuery(account: account, limit: 20))
/// for notification in page.items { print(notification.uuid, notification.status) }
/// ```
public struct NotificationStore: VaultArea {
    let core: VaultCore

    /// Inserts the notification, or updates the stored one with the same account and uuid.
    /// Idempotent: storing the same notification twice leaves one row. Returns true when inserted.
    @discardableResult
    public func upsert(_ notification: NotificationRecord) throws -> Bool {
        try write("storing a notification") { db in try self.upsert(notification, db) }
    }

    /// Stores a batch in one transaction (a synced page). Returns how many were new.
    @discardableResult
    public func upsert(_ notifications: [NotificationRecord]) throws -> Int {
        try write("storing notifications") { db in
            try notifications.reduce(0) { count, notification in count + (try self.upsert(notification, db) ? 1 : 0) }
        }
    }

    func upsert(_ n: NotificationRecord, _ db: Database) throws -> Bool {
        let seal = { (column: String, value: String?) throws -> Data? in
            try self.seal(value, table: "notifications", column: column, account: n.account, row: n.uuid, db)
        }
        let actionsJSON = String(decoding: try JSONEncoder().encode(n.actions), as: UTF8.self)
        let existed =
            try Bool.fetchOne(
                db, sql: "SELECT 1 FROM notifications WHERE account_id = ? AND uuid = ?",
                arguments: [n.account.rawValue, n.uuid]) ?? false
        try integrity.rewrite(.notifications, matching: ["account_id": n.account.rawValue, "uuid": n.uuid], db) {
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
    public func find(_ uuid: String, account: AccountID) throws -> NotificationRecord? {
        try read("reading a notification") { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM notifications WHERE account_id = ? AND uuid = ?",
                arguments: [account.rawValue, uuid]
            ).map { row in
                try self.integrity.lookedUp(row, in: .notifications, by: ["account_id": account.rawValue, "uuid": uuid])
                return try self.record(from: row, db)
            }
        }
    }

    /// A page of the history, newest first, with keyset pagination: a deep page costs what the
    /// first one costs. Rows inserted while paging never make a row appear twice or out of order.
    public func page(_ query: NotificationQuery = NotificationQuery()) throws -> NotificationPage {
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
        // BEGIN and COMMIT kept prepared too (GRDB's `read` prepares both on every call: ~50k
        // instructions of a ~3M page); the same deferred read transaction.
        return try core.readPrepared("listing notifications") { db in
            // One prepared statement per filter shape, kept by the connection; rows are decoded as
            // they are stepped (no copy of the page), with column positions found once per page.
            let statement = try db.cachedStatement(sql: sql)
            let rows = try Row.fetchCursor(statement, arguments: arguments)
            var items: [NotificationRecord] = []
            items.reserveCapacity(min(query.limit, 256))
            var reader: NotificationRowReader?
            var last: NotificationCursor?
            while let stepped = try rows.next() {
                guard items.count < query.limit else {
                    return NotificationPage(items: items, next: last)
                }
                let known = reader ?? NotificationRowReader(stepped, store: self)
                reader = known
                let (record, cursor) = try known.record(from: stepped, StoredRow(current: statement), db)
                items.append(record)
                last = cursor
            }
            return NotificationPage(items: items, next: nil)
        }
    }

    /// Records an answer if, and only if, the notification is still pending: of two devices
    /// answering at once exactly one wins. Returns false when it was no longer pending.
    public func recordAnswer(to uuid: String, account: AccountID, action: String, byDevice device: String, at time: Date) throws -> Bool {
        try write("recording an answer") { db in
            let sealed = try self.seal(action, table: "notifications", column: "action_taken", account: account, row: uuid, db)
            return try self.integrity.rewrite(.notifications, matching: ["account_id": account.rawValue, "uuid": uuid], db) {
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
    public func prune(olderThan: Date? = nil, keepNewest: Int? = nil, account: AccountID? = nil) throws -> Int {
        if let keepNewest, keepNewest < 0 { throw VaultError(.invalidArgument, "keepNewest must not be negative", path: path) }
        return try write("pruning notifications") { db in
            var removed = 0
            let accountFilter = account == nil ? "" : " AND account_id = ?"
            let accountArgument: [(any DatabaseValueConvertible)?] = account.map { [$0.rawValue] } ?? []
            if let olderThan {
                try self.integrity.delete(
                    from: .notifications, where: "created_at < ?" + accountFilter,
                    StatementArguments([olderThan.millisecondsSince1970] + accountArgument), db)
                removed += db.changesCount
            }
            if let keepNewest {
                try self.integrity.delete(
                    from: .notifications,
                    where: """
                        seq IN (
                            SELECT seq FROM (
                                SELECT seq, row_number() OVER (PARTITION BY account_id ORDER BY created_at DESC, seq DESC) AS rank
                                FROM notifications WHERE 1 = 1\(accountFilter))
                            WHERE rank > ?)
                        """,
                    StatementArguments(accountArgument + [keepNewest]), db)
                removed += db.changesCount
            }
            return removed
        }
    }

    /// How many notifications the vault holds (optionally for one account).
    public func count(account: AccountID? = nil) throws -> Int {
        try read("counting notifications") { db in
            if let account {
                return try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE account_id = ?", arguments: [account.rawValue]) ?? 0
            }
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications") ?? 0
        }
    }

    private func record(from row: Row, _ db: Database) throws -> NotificationRecord {
        try NotificationRowReader(row, store: self).record(from: row, StoredRow(row), db).record
    }
}

/// Decodes `SELECT * FROM notifications` rows of one statement: the column positions and the
/// row-MAC layout are found from the first row and reused for the others. Every row is still
/// checked against its own MAC, and every sealed value opened with its own associated data
/// (table, column, account, row).
struct NotificationRowReader {
    fileprivate static let table = "notifications"
    private static let columns = [
        "account_id", "uuid", "subject", "message", "actions", "created_at", "expires_at", "status",
        "action_taken", "answered_at", "answered_by_device", "seq",
    ]

    private let store: NotificationStore
    private let layout: RowIntegrity.RowLayout
    private let positions: [Int?]
    private let sealing = PageSealing()

    init(_ first: Row, store: NotificationStore) {
        self.store = store
        self.layout = RowIntegrity.layout(of: first, in: .notifications)
        self.positions = first.storedPositions(Self.columns)
    }

    /// What the page's sealed values share: each sealed column's part of the associated data,
    /// per account, and the data keys found so far. Lives as long as one read. The account is
    /// compared with the previous row's once per row, and the other accounts' parts looked up
    /// only when it changes (hashing the account on every value cost more than the encoding it
    /// saved; comparing it on every value, a fiftieth of the page).
    /// `keys` is by key id alone, as the keyring is: ids are unique in a vault, and a key used
    /// for another account's value fails that value's associated data anyway.
    private final class PageSealing {
        /// The four sealed columns' shared parts for one account.
        struct Columns {
            let subject: SharedSealContext
            let message: SharedSealContext
            let actions: SharedSealContext
            let actionTaken: SharedSealContext

            init(vaultID: [UInt8], account: AccountID) {
                let shared = { (column: String) in
                    SharedSealContext(vaultID: vaultID, table: NotificationRowReader.table, column: column, account: account.rawValue)
                }
                subject = shared("subject")
                message = shared("message")
                actions = shared("actions")
                actionTaken = shared("action_taken")
            }
        }

        private var account: AccountID?
        private var columns: Columns?
        private var otherAccounts: [AccountID: Columns] = [:]
        var keys = FoundDataKeys()

        func columns(store: NotificationStore, account: AccountID) -> Columns {
            if account == self.account, let columns { return columns }
            if let previous = self.account, let columns { otherAccounts[previous] = columns }
            let made = otherAccounts[account] ?? Columns(vaultID: store.keyring.vaultID, account: account)
            self.account = account
            columns = made
            return made
        }
    }

    /// The record, and the cursor that lists what comes after it. `values` are `row`'s, each column read from SQLite once, for the row MAC and for the record.
    func record(from row: Row, _ values: StoredRow, _ db: Database) throws -> (record: NotificationRecord, cursor: NotificationCursor) {
        let path = store.path
        try store.integrity.check(values, in: .notifications, layout: layout, db)
        let p = positions
        let storedUUID = try? values.storedIfPresent(at: p[1], "uuid", table: Self.table, row: "?", path: path, as: String.self)
        let key = storedUUID ?? "?"
        func value<T: DatabaseValueConvertible>(_ position: Int, _ column: String) throws -> T {
            try values.stored(at: p[position], column, table: Self.table, row: key, path: path)
        }
        func optional<T: DatabaseValueConvertible>(_ position: Int, _ column: String) throws -> T? {
            try values.storedIfPresent(at: p[position], column, table: Self.table, row: key, path: path)
        }
        let account = AccountID(rawValue: try value(0, "account_id"))
        // Read once; when it is missing or unreadable, `value` throws the error that names it.
        let uuid: String = try storedUUID ?? value(1, "uuid")
        let sealing = self.sealing
        let columns = sealing.columns(store: store, account: account)
        let open = { (position: Int, shared: SharedSealContext, column: String) throws -> String? in
            try store.open(
                optional(position, column), sharing: shared, table: Self.table, column: column, account: account, row: uuid,
                keys: &sealing.keys, db)
        }
        guard let subject = try open(2, columns.subject, "subject"), let message = try open(3, columns.message, "message"),
            let actionsJSON = try open(4, columns.actions, "actions")
        else {
            throw VaultError(.damaged, "notification \(uuid) is missing a sealed field", path: path)
        }
        guard let actions = NotificationAction.list(fromJSON: actionsJSON) else {
            throw VaultError(.damaged, "notification \(uuid) has unreadable actions", path: path)
        }
        let createdAt: Int64 = try value(5, "created_at")
        let status: String = try value(7, "status")
        let record = NotificationRecord(
            uuid: uuid, account: account, subject: subject, message: message, actions: actions,
            createdAt: Date(millisecondsSince1970: createdAt),
            expiresAt: try optional(6, "expires_at").map { (ms: Int64) in Date(millisecondsSince1970: ms) },
            status: NotificationStatus(rawValue: status) ?? .dismissed,
            actionTaken: try open(8, columns.actionTaken, "action_taken"),
            answeredAt: try optional(9, "answered_at").map { (ms: Int64) in Date(millisecondsSince1970: ms) },
            answeredByDevice: try optional(10, "answered_by_device"))
        return (record, NotificationCursor(createdAt: createdAt, seq: try value(11, "seq")))
    }
}

extension VaultCore {
    /// This vault's notifications (see ``NotificationStore``).
    var notifications: NotificationStore { NotificationStore(core: self) }
}
