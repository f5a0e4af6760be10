import Foundation
import GRDB
import Synchronization

// MARK: - Session policies

extension Vault {
    /// Stores the account's session policy.
    public func setSessionPolicy(_ policy: SessionPolicy, for account: AccountID) throws {
        try policy.validate()
        try write("storing a session policy") { db in try self.setSessionPolicy(policy, for: account, db) }
    }

    func setSessionPolicy(_ policy: SessionPolicy, for account: AccountID, _ db: Database) throws {
            try db.execute(
                sql: """
                    INSERT INTO session_policies (account_id, idle_timeout_ms, warning_ms, max_extensions,
                        absolute_lifetime_ms, background_timeout_ms, idle_action) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (account_id) DO UPDATE SET idle_timeout_ms = excluded.idle_timeout_ms,
                        warning_ms = excluded.warning_ms, max_extensions = excluded.max_extensions,
                        absolute_lifetime_ms = excluded.absolute_lifetime_ms,
                        background_timeout_ms = excluded.background_timeout_ms, idle_action = excluded.idle_action
                    """,
                arguments: [
                    account.rawValue, policy.idleTimeout?.milliseconds, policy.warningBefore.milliseconds,
                    policy.maxExtensions, policy.absoluteLifetime.milliseconds, policy.backgroundTimeout?.milliseconds,
                    policy.idleAction.rawValue,
                ])
    }

    /// The account's session policy; the defaults when none was stored.
    public func sessionPolicy(for account: AccountID) throws -> SessionPolicy {
        try read("reading a session policy") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM session_policies WHERE account_id = ?", arguments: [account.rawValue]) else {
                return SessionPolicy()
            }
            return SessionPolicy(
                idleTimeout: (row["idle_timeout_ms"] as Int64?).map { .milliseconds($0) },
                warningBefore: .milliseconds(row["warning_ms"] as Int64),
                maxExtensions: row["max_extensions"],
                absoluteLifetime: .milliseconds(row["absolute_lifetime_ms"] as Int64),
                backgroundTimeout: (row["background_timeout_ms"] as Int64?).map { .milliseconds($0) },
                idleAction: SessionPolicy.IdleAction(rawValue: row["idle_action"]) ?? .lock)
        }
    }

    /// A number that changes whenever another connection (in this or another process)
    /// commits to the vault: SQLite's `PRAGMA data_version` on this vault's writer connection.
    /// Cheap enough to check on every call; compare two readings to know whether to reload.
    public func dataVersion() throws -> Int64 {
        do {
            return try pool.writeWithoutTransaction { db in try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
        } catch {
            throw VaultError.storage(error, while: "reading data_version", path: path)
        }
    }

    /// A value that changes whenever the vault's content may have changed: a commit by any
    /// other connection (this or another process; SQLite's `data_version`) or a write
    /// through this value. Take it *before* reading what you cache; while it stays equal,
    /// what you read is still what the file holds.
    public func changeStamp() throws -> VaultChangeStamp {
        // Counter first: a write finishing between the two readings makes the stamp older, never newer.
        let writes = localWrites.load(ordering: .acquiring)
        return VaultChangeStamp(dataVersion: try dataVersion(), localWrites: writes)
    }
}

/// See ``Vault/changeStamp()``.
public struct VaultChangeStamp: Hashable, Sendable {
    let dataVersion: Int64
    let localWrites: Int64
}
