import Foundation
import GRDB

// MARK: - Sessions

/// The accounts' sessions and session policies: when each session started, its deadlines, its
/// state and why it ended, and the timeouts its account's policy sets.
///
/// ```swift
/// if let session = try vault.sessions.current(for: account), session.state == .active { print(session.startedAt) }
/// ```
public struct SessionStore: VaultArea {
    let core: VaultCore

    /// Starts a new active session for the account and returns it. A session of the account
    /// still active or locked ends as replaced, in the same transaction: only the newest session
    /// is ever open, so deleting a newer row from the file can never bring an older one back.
    @discardableResult
    package func start(for account: AccountID, idleDeadline: Date?, absoluteDeadline: Date?) throws -> SessionRecord {
        let now = Date(millisecondsSince1970: clock.now().millisecondsSince1970)
        return try write("starting a session") { db in
            try self.endOpen(of: account, reason: "replaced", at: now, db)
            try db.execute(
                sql: """
                    INSERT INTO sessions (account_id, state, started_at, last_activity_at, idle_deadline, absolute_deadline)
                    VALUES (?, 'active', ?, ?, ?, ?)
                    """,
                arguments: [
                    account.rawValue, now.millisecondsSince1970, now.millisecondsSince1970,
                    idleDeadline?.millisecondsSince1970, absoluteDeadline?.millisecondsSince1970,
                ])
            try self.integrity.authenticate(.sessions, where: "session_id = ?", [db.lastInsertedRowID], db)
            return SessionRecord(
                id: db.lastInsertedRowID, account: account, state: .active, startedAt: now, lastActivityAt: now,
                idleDeadline: idleDeadline.map { Date(millisecondsSince1970: $0.millisecondsSince1970) },
                absoluteDeadline: absoluteDeadline.map { Date(millisecondsSince1970: $0.millisecondsSince1970) })
        }
    }

    /// Ends the account's open (active or locked) session as `signed_out` with `reason`, moving
    /// its version on and clearing an extension marker; whether there was one.
    @discardableResult
    func endOpen(of account: AccountID, reason: String, at now: Date, _ db: Database) throws -> Bool {
        var ended = false
        try integrity.rewrite(.sessions, where: "account_id = ? AND state IN ('active', 'locked')", [account.rawValue], db) {
            try db.execute(
                sql: """
                    UPDATE sessions SET state = 'signed_out', end_reason = ?, ended_at = ?, version = coalesce(version, 0) + 1,
                        extension_holder = NULL, extension_deadline = NULL
                    WHERE account_id = ? AND state IN ('active', 'locked')
                    """,
                arguments: [reason, now.millisecondsSince1970, account.rawValue])
            ended = db.changesCount > 0
        }
        return ended
    }

    /// The account's most recent session, whatever its state.
    public func current(for account: AccountID) throws -> SessionRecord? {
        try read("reading a session") { db in try self.current(for: account, db) }
    }

    /// A session row, checked against its MAC.
    func session(from row: Row, _ db: Database) throws -> SessionRecord {
        let record = StoredRecord(row, table: .sessions, path: path)
        try integrity.check(record, db)
        return try Self.session(from: record)
    }

    /// Every session of the account (or of all accounts), newest first.
    public func all(for account: AccountID? = nil) throws -> [SessionRecord] {
        try read("listing sessions") { db in
            if let account {
                return try Row.fetchAll(
                    db, sql: "SELECT * FROM sessions WHERE account_id = ? ORDER BY session_id DESC",
                    arguments: [account.rawValue]
                ).map { try self.session(from: $0, db) }
            }
            return try Row.fetchAll(db, sql: "SELECT * FROM sessions ORDER BY session_id DESC").map { try self.session(from: $0, db) }
        }
    }

    /// Writes every field of `session` back to its row, as a compare-and-swap: only when the
    /// row is still at `session.version` (nothing else wrote it since it was read), and the
    /// row's version moves on by one. Returns the session as written; throws
    /// ``VaultError/Code/staleGeneration`` when the row moved on (read it again and decide again).
    @discardableResult
    package func update(_ session: SessionRecord) throws -> SessionRecord {
        try write("updating a session") { db in
            guard let current = try self.session(id: session.id, account: session.account, db) else {
                throw VaultError(.recordNotFound, "no session \(session.id) for account \(session.account)", path: self.path)
            }
            guard current.version == session.version else {
                throw VaultError(
                    .staleGeneration, "session \(session.id) changed since it was read (version \(current.version), not \(session.version))",
                    path: self.path)
            }
            return try self.write(session, over: current, db)
        }
    }

    /// A session transition, decided on the row as it is, inside one immediate transaction:
    /// reads the account's current session and its policy, lets `change` decide (it may change
    /// the session, throw, or leave it be), and writes the result back as a compare-and-swap on
    /// the row's version. No other process can write in between, so nothing decided here rests
    /// on a stale read; `change` must not wait on anything (it runs inside the write lock).
    ///
    /// Returns nil when the account has no session; otherwise the session as it now stands
    /// (unchanged when `change` changed nothing) and what `change` returned.
    package func transition<T>(
        for account: AccountID, _ action: String = "changing a session",
        recording: EventRecording<(session: SessionRecord, result: T)?>? = nil,
        _ change: (inout SessionRecord, SessionPolicy) throws -> T
    ) throws -> (session: SessionRecord, result: T)? {
        try write(action, recording: recording) { db in
            guard let current = try self.current(for: account, db) else { return nil }
            let policy = try self.policy(for: account, db)
            var next = current
            let result = try change(&next, policy)
            next.id = current.id
            next.account = current.account
            next.version = current.version
            guard next != current else { return (current, result) }
            return (try self.write(next, over: current, db), result)
        }
    }

    /// Writes `session` over `current` (read in this transaction), moving the version on.
    func write(_ session: SessionRecord, over current: SessionRecord, _ db: Database) throws -> SessionRecord {
        var written = session
        written.version = current.version + 1
        try integrity.rewrite(.sessions, matching: ["session_id": session.id], db) {
            try db.execute(
                sql: """
                    UPDATE sessions SET state = ?, end_reason = ?, last_activity_at = ?, idle_deadline = ?,
                        absolute_deadline = ?, extensions_used = ?, background_entered_at = ?, ended_at = ?,
                        version = ?, extension_holder = ?, extension_deadline = ?
                    WHERE session_id = ? AND account_id = ? AND coalesce(version, 0) = ?
                    """,
                arguments: [
                    written.state.rawValue, written.endReason, written.lastActivityAt.millisecondsSince1970,
                    written.idleDeadline?.millisecondsSince1970, written.absoluteDeadline?.millisecondsSince1970,
                    written.extensionsUsed, written.backgroundEnteredAt?.millisecondsSince1970,
                    written.endedAt?.millisecondsSince1970, written.version, written.extensionInFlight?.holder,
                    written.extensionInFlight?.deadline.millisecondsSince1970,
                    session.id, session.account.rawValue, current.version,
                ])
            guard db.changesCount == 1 else {
                throw VaultError(.staleGeneration, "session \(session.id) changed while it was written", path: self.path)
            }
        }
        // Stored in whole milliseconds: return what a read gives back.
        return try self.session(id: session.id, account: session.account, db) ?? written
    }

    /// One session of the account by id, checked against its MAC.
    func session(id: Int64, account: AccountID, _ db: Database) throws -> SessionRecord? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM sessions WHERE session_id = ? AND account_id = ?"),
            arguments: [id, account.rawValue]
        ).map { try self.session(from: $0, db) }
    }

    static func session(from row: Row, path: String?) throws -> SessionRecord {
        try session(from: StoredRecord(row, table: .sessions, path: path))
    }

    static func session(from record: StoredRecord) throws -> SessionRecord {
        let state: String = try record.value("state")
        func extensionMarker() throws -> SessionRecord.ExtensionMarker? {
            guard let holder: String = try record.optional("extension_holder"),
                let deadline = try record.optionalDate("extension_deadline")
            else { return nil }
            return SessionRecord.ExtensionMarker(holder: holder, deadline: deadline)
        }
        return SessionRecord(
            id: try record.value("session_id"),
            account: AccountID(rawValue: try record.value("account_id")),
            state: SessionState(rawValue: state) ?? .expired,
            endReason: try record.optional("end_reason"),
            startedAt: try record.date("started_at"),
            lastActivityAt: try record.date("last_activity_at"),
            idleDeadline: try record.optionalDate("idle_deadline"),
            absoluteDeadline: try record.optionalDate("absolute_deadline"),
            extensionsUsed: try record.value("extensions_used"),
            backgroundEnteredAt: try record.optionalDate("background_entered_at"),
            endedAt: try record.optionalDate("ended_at"),
            // NULL in rows written before schema 4.
            version: try record.optional("version") ?? 0,
            extensionInFlight: try extensionMarker(),
            // NULL in rows written before schema 5.
            authTime: try record.optionalDate("auth_time"))
    }
}

extension SessionStore {
    /// The account's most recent session, checked against its MAC.
    func current(for account: AccountID, _ db: Database) throws -> SessionRecord? {
        // On every token request that misses the cache: read in place, and the row's check
        // remembered (``VerifiedRows``).
        guard
            let record = try StoredRecord.fetchOne(
                db, "SELECT * FROM sessions WHERE account_id = ? ORDER BY session_id DESC LIMIT 1", [account.rawValue],
                table: .sessions, path: path)
        else {
            try integrity.checkCurrent(nil, .session, account: account.rawValue, db)
            return nil
        }
        try integrity.check(record, remembering: true, db)
        try integrity.checkCurrent(record, .session, account: account.rawValue, db)
        return try Self.session(from: record)
    }
}

extension VaultCore {
    /// This vault's sessions (see ``SessionStore``).
    var sessions: SessionStore { SessionStore(core: self) }
}
