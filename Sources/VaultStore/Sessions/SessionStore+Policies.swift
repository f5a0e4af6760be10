import Foundation
import GRDB
import Synchronization

// MARK: - Session policies

extension SessionStore {
    /// Stores the account's session policy.
    public func setPolicy(_ policy: SessionPolicy, for account: AccountID) throws {
        try policy.validate()
        try write("storing a session policy") { db in try self.setPolicy(policy, for: account, db) }
    }

    /// Changes an existing account's session policy and, in the same transaction, the deadlines
    /// of its open (active or locked) session to match: the absolute deadline becomes start +
    /// the new lifetime (none without one; under a sensitive-action cap, a later deadline that
    /// sensitive actions set stays, up to start + the cap), the idle deadline last activity + the new idle
    /// timeout (never past the absolute deadline). A deadline the new policy puts in the past
    /// takes effect at the next use, as any passed deadline does. Returns the open session as it
    /// now stands (nil when none is open).
    @discardableResult
    package func changePolicy(_ policy: SessionPolicy, for account: AccountID) throws -> SessionRecord? {
        try policy.validate()
        return try write("changing a session policy") { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM accounts WHERE account_id = ?", arguments: [account.rawValue]) ?? false else {
                throw self.accountNotFound(account)
            }
            try self.setPolicy(policy, for: account, db)
            guard let current = try self.current(for: account, db), current.state == .active || current.state == .locked else {
                return nil
            }
            var session = current
            session.absoluteDeadline = policy.absoluteLifetime.map { current.startedAt.addingTimeInterval($0.timeInterval) }
            // Sensitive actions may have moved it on: kept, within the new policy's cap.
            if let lifetime = session.absoluteDeadline, let cap = policy.sensitiveActionCap, let moved = current.absoluteDeadline {
                session.absoluteDeadline = max(lifetime, min(moved, current.startedAt.addingTimeInterval(cap.timeInterval)))
            }
            session.idleDeadline = policy.idleTimeout.map { idle in
                let deadline = current.lastActivityAt.addingTimeInterval(idle.timeInterval)
                return session.absoluteDeadline.map { min(deadline, $0) } ?? deadline
            }
            guard session != current else { return current }
            return try self.write(session, over: current, db)
        }
    }

    func setPolicy(_ policy: SessionPolicy, for account: AccountID, _ db: Database) throws {
        try integrity.rewrite(.sessionPolicies, matching: ["account_id": account.rawValue], db) {
            try db.execute(
                sql: """
                    INSERT INTO session_policies (account_id, idle_timeout_ms, warning_ms, max_extensions,
                        absolute_lifetime_ms, background_timeout_ms, idle_action, activity, sensitive_cap_ms,
                        refresh_lifetime_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (account_id) DO UPDATE SET idle_timeout_ms = excluded.idle_timeout_ms,
                        warning_ms = excluded.warning_ms, max_extensions = excluded.max_extensions,
                        absolute_lifetime_ms = excluded.absolute_lifetime_ms,
                        background_timeout_ms = excluded.background_timeout_ms, idle_action = excluded.idle_action,
                        activity = excluded.activity, sensitive_cap_ms = excluded.sensitive_cap_ms,
                        refresh_lifetime_ms = excluded.refresh_lifetime_ms
                    """,
                arguments: [
                    account.rawValue, policy.idleTimeout?.milliseconds, policy.warningBefore.milliseconds,
                    policy.maxExtensions, policy.absoluteLifetime?.milliseconds, policy.backgroundTimeout?.milliseconds,
                    policy.idleAction.rawValue, policy.activity == .any ? nil : policy.activity.rawValue,
                    policy.sensitiveActionCap?.milliseconds, policy.refreshTokenLifetime?.milliseconds,
                ])
        }
    }

    /// The account's session policy; the defaults when none was stored.
    public func policy(for account: AccountID) throws -> SessionPolicy {
        try read("reading a session policy") { db in try self.policy(for: account, db) }
    }

    /// The account's stored session policy, nil when none is stored; `.damaged` naming the
    /// column when one holds a value of the wrong type (a hand-edited file).
    /// With `integrity`, the row is checked against its MAC first (without, as `vault status`
    /// reads it with no key: shown, never acted on).
    static func storedPolicy(
        for account: AccountID, _ db: Database, path: String?,
        integrity: RowIntegrity? = nil
    ) throws -> SessionPolicy? {
        // Every token request that misses the cache reads it: read in place, its check remembered.
        guard
            let record = try StoredRecord.fetchOne(
                db, "SELECT * FROM session_policies WHERE account_id = ?", [account.rawValue], table: .sessionPolicies, path: path)
        else {
            // Deleting the row would loosen the policy to the defaults: not without the key.
            try integrity?.checkCurrent(nil, .policy, account: account.rawValue, db)
            return nil
        }
        try integrity?.check(record, remembering: true, db)
        try integrity?.checkCurrent(record, .policy, account: account.rawValue, db)
        return try policy(from: record)
    }

    /// The policy a `session_policies` row holds (its MAC checked by the caller).
    static func policy(from record: StoredRecord) throws -> SessionPolicy {
        func milliseconds(_ column: String) throws -> Duration {
            .milliseconds(try record.value(column, as: Int64.self))
        }
        func optionalMilliseconds(_ column: String) throws -> Duration? {
            try record.optional(column, as: Int64.self).map { .milliseconds($0) }
        }
        let idleAction: String = try record.value("idle_action")
        // NULL (every policy stored before schema 4, and the default since) is `any`.
        let activity: String? = try record.optional("activity")
        return SessionPolicy(
            idleTimeout: try optionalMilliseconds("idle_timeout_ms"),
            warningBefore: try milliseconds("warning_ms"),
            maxExtensions: try record.value("max_extensions"),
            absoluteLifetime: try optionalMilliseconds("absolute_lifetime_ms"),
            backgroundTimeout: try optionalMilliseconds("background_timeout_ms"),
            idleAction: SessionPolicy.IdleAction(rawValue: idleAction) ?? .lock,
            activity: activity.flatMap(SessionPolicy.Activity.init(rawValue:)) ?? .any,
            sensitiveActionCap: try optionalMilliseconds("sensitive_cap_ms"),
            refreshTokenLifetime: try optionalMilliseconds("refresh_lifetime_ms"))
    }
}

/// See ``Vault/changeStamp()``.
public struct VaultChangeStamp: Hashable, Sendable {
    let dataVersion: Int64
    let localWrites: Int64
}

extension SessionStore {
    /// The account's session policy, checked against its MAC; the defaults when none was stored.
    func policy(for account: AccountID, _ db: Database) throws -> SessionPolicy {
        try Self.storedPolicy(for: account, db, path: path, integrity: integrity) ?? SessionPolicy()
    }
}
