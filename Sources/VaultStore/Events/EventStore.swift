import Foundation
import GRDB

/// One entry of the vault's session event log (schema 4): what a process did to a session,
/// in the order it was recorded. Every process using the vault appends to it and tails it,
/// so a subscriber in one process sees what another caused.
public struct StoredEvent: Sendable, Hashable {
    /// The entry's place in the log; later entries have larger numbers.
    public var seq: Int64
    public var at: Date
    /// The account concerned; nil for events of the whole vault.
    public var account: AccountID?
    /// What happened, as the session layer names it (`token_refreshed`, `locked`…).
    public var kind: String
    /// The plain description of the event (reasons, times, generations): never personal.
    public var data: [String: String]
    /// The server's words, opened; nil when there were none, the vault is locked, or the
    /// account is gone (its key with it).
    public var detail: String?
    /// Who recorded it: the recording session service's name in this vault (`pid1234-…`).
    public var origin: String
    /// False for an entry that fails its row MAC (written or changed without the key): its
    /// `kind` and `data` are what the file says, untrusted, and nothing must act on it.
    public var authentic: Bool

    public init(
        seq: Int64, at: Date, account: AccountID?, kind: String, data: [String: String] = [:],
        detail: String? = nil, origin: String, authentic: Bool = true
    ) {
        self.seq = seq
        self.at = at
        self.account = account
        self.kind = kind
        self.data = data
        self.detail = detail
        self.origin = origin
        self.authentic = authentic
    }
}

/// How long the event log keeps its entries: at most `count`, none older than `age`.
public struct EventRetention: Sendable, Hashable {
    public var count: Int
    public var age: Duration

    public init(count: Int = 10_000, age: Duration = .seconds(30 * 86_400)) {
        self.count = max(count, 1)
        self.age = age
    }
}

// MARK: - Events written with their change

/// A session event as the log stores it: what the session layer names it, the account, its
/// plain description and the server's words (sealed when written).
package struct EventRecord: Sendable, Hashable {
    package var kind: String
    package var account: AccountID?
    package var data: [String: String]
    package var detail: String?

    package init(kind: String, account: AccountID?, data: [String: String] = [:], detail: String? = nil) {
        self.kind = kind
        self.account = account
        self.data = data
        self.detail = detail
    }
}

/// Who writes session events (a session service's name in this vault) and how long the log
/// keeps them.
package struct EventJournal: Sendable, Hashable {
    package var origin: String
    package var retention: EventRetention

    package init(origin: String, retention: EventRetention) {
        self.origin = origin
        self.retention = retention
    }
}

/// The events that describe a change, made from its outcome and written in its transaction:
/// a crash can lose both or neither, never the record alone.
package struct EventRecording<Outcome>: Sendable {
    package var journal: EventJournal
    package var events: @Sendable (Outcome) -> [EventRecord]

    package init(_ journal: EventJournal, _ events: @escaping @Sendable (Outcome) -> [EventRecord]) {
        self.journal = journal
        self.events = events
    }
}

// MARK: - The event log

/// The event log every process sees: each change of an account's session, tokens, devices and
/// notifications, written in the transaction that made the change, authenticated, and kept
/// within its journal's retention.
///
/// ```swift
/// for event in try vault.events.list(after: lastSeen) { print(event.seq, event.kind) }
/// ```
public struct EventStore: VaultArea {
    let core: VaultCore

    /// Appends `events` in order in the caller's transaction, then applies the journal's
    /// retention. A detail is sealed with the account's data key; it is dropped when there is
    /// no account, the account is gone, or the vault is locked. Returns the last `seq`.
    @discardableResult
    func append(_ events: [EventRecord], to journal: EventJournal, _ db: Database) throws -> Int64? {
        guard !events.isEmpty else { return nil }
        let now = clock.now()
        var last: Int64?
        for event in events {
            let exists =
                try event.account.map {
                    try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM accounts WHERE account_id = ?"), arguments: [$0.rawValue]) ?? false
                } ?? false
            let accountID = exists ? event.account : nil
            let seq = try insert(kind: event.kind, account: accountID, json: Self.eventJSON(event.data), origin: journal.origin, at: now, db) {
                seq in
                guard let accountID, !keyring.isWiped, let detail = event.detail else { return }
                let sealed = try self.seal(detail, table: "events", column: "detail", account: accountID, row: String(seq), db)
                try db.execute(sql: "UPDATE events SET detail = ? WHERE seq = ?", arguments: [sealed, seq])
            }
            last = seq
        }
        if let last {
            // Bounded by count, then by age (seq grows with time, so the oldest are first).
            try integrity.delete(from: .events, where: "seq <= ?", [last - Int64(journal.retention.count)], db)
            let cutoff = now.addingTimeInterval(-journal.retention.age.timeInterval).millisecondsSince1970
            try integrity.delete(from: .events, where: "seq IN (SELECT seq FROM events WHERE at < ? ORDER BY seq LIMIT 100)", [cutoff], db)
        }
        return last
    }

    /// Appends an event and applies `retention`, in one transaction. `detail` (the server's
    /// words) is sealed with the account's data key; it is dropped when there is no account
    /// or the account is gone. Returns the new entry's `seq`.
    @discardableResult
    package func append(
        kind: String, account: AccountID?, data: [String: String], detail: String?,
        origin: String, retention: EventRetention
    ) throws -> Int64 {
        let event = EventRecord(kind: kind, account: account, data: data, detail: detail)
        return try write("recording a session event") { db in
            try self.append([event], to: EventJournal(origin: origin, retention: retention), db) ?? 0
        }
    }

    /// Appends an event inside the caller's transaction (one that also made the change it
    /// records), authenticated; `account` must exist. Retention is left to the next ``append(kind:account:data:detail:origin:retention:)``.
    @discardableResult
    func insert(kind: String, account: AccountID?, data: [String: String], origin: String, at now: Date, _ db: Database) throws -> Int64 {
        try insert(kind: kind, account: account, json: Self.eventJSON(data), origin: origin, at: now, db) { _ in }
    }

    private func insert(
        kind: String, account: AccountID?, json: String, origin: String, at now: Date, _ db: Database,
        before authenticating: (Int64) throws -> Void
    ) throws -> Int64 {
        try db.execute(
            sql: "INSERT INTO events (at, account_id, kind, data, origin) VALUES (?, ?, ?, ?, ?)",
            arguments: [now.millisecondsSince1970, account?.rawValue, kind, json, origin])
        let seq = db.lastInsertedRowID
        try authenticating(seq)
        try integrity.authenticate(.events, where: "seq = ?", [seq], db)
        return seq
    }

    /// Up to `limit` entries after `seq`, oldest first (of one account when given). An entry
    /// that fails its check is returned with ``StoredEvent/authentic`` false and no detail.
    public func list(after seq: Int64 = 0, account: AccountID? = nil, limit: Int = 1000) throws -> [StoredEvent] {
        try read("reading session events") { db in
            let rows: [Row]
            if let account {
                rows = try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT * FROM events WHERE account_id = ? AND seq > ? ORDER BY seq LIMIT ?"),
                    arguments: [account.rawValue, seq, limit])
            } else {
                rows = try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?"),
                    arguments: [seq, limit])
            }
            return try rows.map { try self.event(from: $0, db) }
        }
    }

    /// The newest entries (up to `limit`), oldest first: where `vault events` starts.
    public func latest(account: AccountID? = nil, limit: Int) throws -> [StoredEvent] {
        let last = try lastSeq()
        guard account == nil else {
            return try read("reading session events") { db in
                try Row.fetchAll(
                    db, sql: "SELECT * FROM (SELECT * FROM events WHERE account_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                    arguments: [account?.rawValue, limit]
                ).map { try self.event(from: $0, db) }
            }
        }
        return try list(after: max(0, last - Int64(limit)), limit: limit)
    }

    /// The `seq` of the newest entry; 0 when the log is empty. A tail starts after it.
    public func lastSeq() throws -> Int64 {
        try read("reading session events") { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT coalesce(max(seq), 0) FROM events")) ?? 0
        }
    }

    private func event(from row: Row, _ db: Database) throws -> StoredEvent {
        let key = row.storedKey("seq")
        let seq: Int64 = try row.stored("seq", table: "events", row: key, path: path)
        let account: AccountID? = try row.storedIfPresent("account_id", table: "events", row: key, path: path).map(AccountID.init(rawValue:))
        let json: String = try row.stored("data", table: "events", row: key, path: path)
        var event = StoredEvent(
            seq: seq, at: try row.storedDate("at", table: "events", row: key, path: path), account: account,
            kind: try row.stored("kind", table: "events", row: key, path: path),
            data: Self.eventData(json), origin: try row.stored("origin", table: "events", row: key, path: path))
        guard try integrity.verdict(row, in: .events, db) == .authentic else {
            event.authentic = false
            return event
        }
        if let account, !keyring.isWiped {
            event.detail = try? open(
                row.storedIfPresent("detail", table: "events", row: key, path: path),
                table: "events", column: "detail", account: account, row: key, db)
        }
        return event
    }

    static func eventJSON(_ data: [String: String]) -> String {
        guard let encoded = try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys]) else { return "{}" }
        return String(decoding: encoded, as: UTF8.self)
    }

    static func eventData(_ json: String) -> [String: String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return [:] }
        return object.compactMapValues { $0 as? String }
    }
}

extension VaultCore {
    /// This vault's events (see ``EventStore``).
    var events: EventStore { EventStore(core: self) }
}
