import Foundation
import GRDB

// MARK: - Sessions

extension Vault {
    /// Starts a new active session for the account and returns it. A session of the account
    /// still active or locked ends as replaced, in the same transaction: only the newest session
    /// is ever open, so deleting a newer row from the file can never bring an older one back.
    @discardableResult
    public func startSession(for account: AccountID, idleDeadline: Date?, absoluteDeadline: Date?) throws -> SessionRecord {
        let now = Date(millisecondsSince1970: clock.now().millisecondsSince1970)
        return try write("starting a session") { db in
            try self.integrity.rewrite(.sessions, where: "account_id = ? AND state IN ('active', 'locked')", [account.rawValue], db) {
                try db.execute(
                    sql: """
                        UPDATE sessions SET state = 'signed_out', end_reason = 'replaced', ended_at = ?
                        WHERE account_id = ? AND state IN ('active', 'locked')
                        """,
                    arguments: [now.millisecondsSince1970, account.rawValue])
            }
            try db.execute(
                sql: """
                    INSERT INTO sessions (account_id, state, started_at, last_activity_at, idle_deadline, absolute_deadline)
                    VALUES (?, 'active', ?, ?, ?, ?)
                    """,
                arguments: [account.rawValue, now.millisecondsSince1970, now.millisecondsSince1970,
                            idleDeadline?.millisecondsSince1970, absoluteDeadline?.millisecondsSince1970])
            try self.integrity.authenticate(.sessions, where: "session_id = ?", [db.lastInsertedRowID], db)
            return SessionRecord(
                id: db.lastInsertedRowID, account: account, state: .active, startedAt: now, lastActivityAt: now,
                idleDeadline: idleDeadline.map { Date(millisecondsSince1970: $0.millisecondsSince1970) },
                absoluteDeadline: absoluteDeadline.map { Date(millisecondsSince1970: $0.millisecondsSince1970) })
        }
    }

    /// The account's most recent session, whatever its state.
    public func currentSession(for account: AccountID) throws -> SessionRecord? {
        try read("reading a session") { db in try self.currentSession(for: account, db) }
    }

    /// The account's most recent session, checked against its MAC.
    func currentSession(for account: AccountID, _ db: Database) throws -> SessionRecord? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM sessions WHERE account_id = ? ORDER BY session_id DESC LIMIT 1"),
                         arguments: [account.rawValue]).map { try self.session(from: $0, db) }
    }

    /// A session row, checked against its MAC.
    func session(from row: Row, _ db: Database) throws -> SessionRecord {
        try integrity.check(row, in: .sessions, db)
        return try Self.session(from: row, path: path)
    }

    /// Every session of the account (or of all accounts), newest first.
    public func sessions(for account: AccountID? = nil) throws -> [SessionRecord] {
        try read("listing sessions") { db in
            if let account {
                return try Row.fetchAll(db, sql: "SELECT * FROM sessions WHERE account_id = ? ORDER BY session_id DESC",
                                        arguments: [account.rawValue]).map { try self.session(from: $0, db) }
            }
            return try Row.fetchAll(db, sql: "SELECT * FROM sessions ORDER BY session_id DESC").map { try self.session(from: $0, db) }
        }
    }

    /// Writes every field of `session` back to its row.
    public func updateSession(_ session: SessionRecord) throws {
        try write("updating a session") { db in
            try self.integrity.rewrite(.sessions, where: "session_id = ? AND account_id = ?", [session.id, session.account.rawValue], db) {
            try db.execute(
                sql: """
                    UPDATE sessions SET state = ?, end_reason = ?, last_activity_at = ?, idle_deadline = ?,
                        absolute_deadline = ?, extensions_used = ?, background_entered_at = ?, ended_at = ?
                    WHERE session_id = ? AND account_id = ?
                    """,
                arguments: [
                    session.state.rawValue, session.endReason, session.lastActivityAt.millisecondsSince1970,
                    session.idleDeadline?.millisecondsSince1970, session.absoluteDeadline?.millisecondsSince1970,
                    session.extensionsUsed, session.backgroundEnteredAt?.millisecondsSince1970,
                    session.endedAt?.millisecondsSince1970, session.id, session.account.rawValue,
                ])
            guard db.changesCount == 1 else {
                throw VaultError(.recordNotFound, "no session \(session.id) for account \(session.account)", path: self.path)
            }
            }
        }
    }

    static func session(from row: Row, path: String?) throws -> SessionRecord {
        let key = row.storedKey("session_id")
        func date(_ column: String) throws -> Date { try row.storedDate(column, table: "sessions", row: key, path: path) }
        func optionalDate(_ column: String) throws -> Date? {
            try row.storedDateIfPresent(column, table: "sessions", row: key, path: path)
        }
        let state: String = try row.stored("state", table: "sessions", row: key, path: path)
        return SessionRecord(
            id: try row.stored("session_id", table: "sessions", row: key, path: path),
            account: AccountID(rawValue: try row.stored("account_id", table: "sessions", row: key, path: path)),
            state: SessionState(rawValue: state) ?? .expired,
            endReason: try row.storedIfPresent("end_reason", table: "sessions", row: key, path: path),
            startedAt: try date("started_at"),
            lastActivityAt: try date("last_activity_at"),
            idleDeadline: try optionalDate("idle_deadline"),
            absoluteDeadline: try optionalDate("absolute_deadline"),
            extensionsUsed: try row.stored("extensions_used", table: "sessions", row: key, path: path),
            backgroundEnteredAt: try optionalDate("background_entered_at"),
            endedAt: try optionalDate("ended_at"))
    }
}
