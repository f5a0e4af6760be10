import Foundation
import GRDB
import Logging

/// The shared refresh bookkeeping of an account: lease, back-off, last failure.
public struct RefreshState: Sendable, Hashable {
    public var leaseHolder: String?
    public var leaseGeneration: Int64?
    public var leaseExpiresAt: Date?
    /// Transient failures in a row since the last success.
    public var failures: Int
    /// No process refreshes before this time (shared back-off).
    public var nextAttemptAt: Date?
    /// The vault's own classification of the last failure ("server error (HTTP 503)"): never
    /// the server's words, which may echo what was sent.
    public var lastFailure: String?
    public var lastFailureAt: Date?
    /// Refreshes whose process died while holding the lease (a rotation may have been lost).
    public var interruptedRefreshes: Int
    /// The server's own account of the last failure (its `error_description`, redacted), kept
    /// sealed; nil when there was none or the vault is locked.
    public var lastFailureDetail: String?
    /// Consecutive refusals whose meaning the vault does not know (an unknown 4xx error code, a
    /// 400/401 without JSON) since the last success; past a bound the account is `refused`.
    public var refusals: Int = 0

    public init(
        leaseHolder: String? = nil, leaseGeneration: Int64? = nil, leaseExpiresAt: Date? = nil, failures: Int,
        nextAttemptAt: Date? = nil, lastFailure: String? = nil, lastFailureAt: Date? = nil,
        interruptedRefreshes: Int, lastFailureDetail: String? = nil
    ) {
        self.leaseHolder = leaseHolder
        self.leaseGeneration = leaseGeneration
        self.leaseExpiresAt = leaseExpiresAt
        self.failures = failures
        self.nextAttemptAt = nextAttemptAt
        self.lastFailure = lastFailure
        self.lastFailureAt = lastFailureAt
        self.interruptedRefreshes = interruptedRefreshes
        self.lastFailureDetail = lastFailureDetail
    }

    public static let none = RefreshState(failures: 0, interruptedRefreshes: 0)
}

/// What `LeaseStore.begin(for:holder:seenGeneration:leaseDuration:)` decided.
package enum RefreshLeaseOutcome: Sendable {
    /// The caller holds the lease and must refresh from these tokens, then call
    /// `LeaseStore.complete(for:holder:tokens:)` or `LeaseStore.fail(for:holder:failure:nextAttemptAt:)`.
    /// `interrupted` is true when it took over a lease left by a process that died mid-refresh.
    case acquired(StoredTokens, interrupted: Bool)
    /// The tokens changed since the caller looked (another caller refreshed): use these.
    case changed(StoredTokens)
    /// Another caller holds the lease until the given time: wait for its result.
    case busy(until: Date)
    /// Refreshing is paused after transient failures until the given time.
    case backingOff(until: Date, tokens: StoredTokens)
    /// The account has no tokens (signed out, revoked, or never signed in).
    case noTokens
}

// MARK: - Refresh coordination

/// The refresh leases: which process refreshes an account's tokens right now (one for all
/// callers in all processes), how far its lease runs, and the failures and back-off that decide
/// when the next attempt may start.
///
/// ```swift
/// let state = try vault.leases.state(for: account)
/// if let next = state.nextAttemptAt { print("backing off until \(next)") }
/// ```
public struct LeaseStore: VaultArea {
    let core: VaultCore

    /// Takes the account's refresh lease in one immediate transaction, unless the tokens
    /// changed since `seenGeneration`, another holder's lease is live, or the shared back-off
    /// says to wait.
    ///
    /// Another holder's lease is taken over only when that holder is gone (its process ended:
    /// see ``LeaseProcess``) or its lease lapsed without being renewed. A lease or back-off
    /// reaching further ahead than it ever can (`leaseDuration`, `maximumBackoff`) is stale,
    /// whatever wrote it, and ignored: no stored time can block refreshing for longer.
    package func begin(
        for account: AccountID, holder: String, seenGeneration: Int64,
        leaseDuration: Duration, maximumBackoff: Duration = .seconds(3600)
    ) throws -> RefreshLeaseOutcome {
        let now = clock.now()
        // A second of slack for clocks that step between processes.
        let latestLease = now.addingTimeInterval(leaseDuration.timeInterval + 1)
        let latestRetry = now.addingTimeInterval(maximumBackoff.timeInterval + 1)
        return try write("taking the refresh lease") { db in
            guard let tokens = try core.tokens.current(for: account, db) else { return .noTokens }
            if tokens.generation != seenGeneration { return .changed(tokens) }
            let state = try self.state(for: account, db)
            let holderGone = try self.leaseProcess(for: account, db).flatMap(LeaseProcess.init)?.isGone ?? false
            if let other = state.leaseHolder, other != holder, let until = state.leaseExpiresAt, until > now,
                until <= latestLease, !holderGone
            {
                return .busy(until: until)
            }
            if let next = state.nextAttemptAt, next > now, next <= latestRetry {
                return .backingOff(until: next, tokens: tokens)
            }
            let interrupted = state.leaseHolder != nil && state.leaseHolder != holder
            try self.writeLease(
                for: account, holder: holder, generation: tokens.generation, now: now,
                leaseDuration: leaseDuration, interrupted: interrupted, db)
            if interrupted {
                self.logger.warning(
                    "took over a refresh lease left by a process that stopped mid-refresh",
                    metadata: ["account": "\(account)"])
            }
            return .acquired(tokens, interrupted: interrupted)
        }
    }

    /// Extends the caller's lease to `leaseDuration` from now, while its request is in flight.
    /// Returns false when the caller no longer holds it (nothing is written then).
    @discardableResult
    package func renew(for account: AccountID, holder: String, leaseDuration: Duration) throws -> Bool {
        let until = clock.now().addingTimeInterval(leaseDuration.timeInterval).millisecondsSince1970
        return try write("renewing the refresh lease") { db in
            try self.integrity.rewrite(.refreshState, matching: ["account_id": account.rawValue, "lease_holder": holder], db) {
                try db.execute(
                    sql: "UPDATE refresh_state SET lease_expires_at = ? WHERE account_id = ? AND lease_holder = ?",
                    arguments: [until, account.rawValue, holder])
                return db.changesCount == 1
            }
        }
    }

    /// Gives the account's refresh lease to `holder` (this process) until `leaseDuration` from now.
    func writeLease(
        for account: AccountID, holder: String, generation: Int64, now: Date, leaseDuration: Duration,
        interrupted: Bool, _ db: Database
    ) throws {
        try integrity.rewrite(.refreshState, matching: ["account_id": account.rawValue], db) {
            try db.execute(
                sql: """
                    INSERT INTO refresh_state (account_id, lease_holder, lease_generation, lease_acquired_at, lease_expires_at,
                        lease_process, interrupted_refreshes) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (account_id) DO UPDATE SET lease_holder = excluded.lease_holder,
                        lease_generation = excluded.lease_generation, lease_acquired_at = excluded.lease_acquired_at,
                        lease_expires_at = excluded.lease_expires_at, lease_process = excluded.lease_process,
                        interrupted_refreshes = refresh_state.interrupted_refreshes + excluded.interrupted_refreshes
                    """,
                arguments: [
                    account.rawValue, holder, generation, now.millisecondsSince1970,
                    now.addingTimeInterval(leaseDuration.timeInterval).millisecondsSince1970,
                    LeaseProcess.current?.description, interrupted ? 1 : 0,
                ])
        }
    }

    /// The stored lease holder's process, as text (checked with the row by ``state(for:_:)``).
    func leaseProcess(for account: AccountID, _ db: Database) throws -> String? {
        try db.storedValue(
            "SELECT lease_process FROM refresh_state WHERE account_id = ?", arguments: [account.rawValue],
            table: "refresh_state", column: "lease_process", row: account.rawValue, path: path, as: String.self)
    }

    /// Stores the refreshed tokens and releases the caller's lease, atomically, if the account's
    /// tokens are still generation `generation`, the ones the caller refreshed from. A refresh
    /// token absent from `tokens` is replaced by the one already stored (the server did not rotate).
    ///
    /// The result is stored even when the caller's lease was lost meanwhile (it lapsed while the
    /// server held its answer, and another caller took it): the server has already rotated the
    /// refresh token presented, and dropping its answer would leave the vault holding a dead one.
    /// The generation alone keeps that safe: whoever holds the lease now finds the tokens moved
    /// on, and its own result is discarded. The lease is released only when the caller holds it
    /// (or nobody does: a success also ends a back-off another caller set).
    ///
    /// Returns the stored tokens, or nil when the result was discarded: the account was
    /// removed, or its tokens changed since `generation`.
    package func complete(
        for account: AccountID, holder: String, from generation: Int64, tokens: TokenSet,
        recording: EventRecording<StoredTokens?>? = nil
    ) throws -> StoredTokens? {
        try write("storing refreshed tokens", recording: recording) { db in
            guard let current = try core.tokens.current(for: account, db), current.generation == generation else { return nil }
            var merged = tokens
            if merged.refreshToken == nil { merged.refreshToken = current.tokens.refreshToken }
            if merged.idToken == nil { merged.idToken = current.tokens.idToken }
            let next = try core.tokens.store(merged, for: account, replacing: generation, db)
            try releaseLease(for: account, holder: holder, succeeded: true, db)
            return StoredTokens(
                account: account, generation: next, tokens: merged,
                updatedAt: Date(millisecondsSince1970: self.clock.now().millisecondsSince1970))
        }
    }

    /// Records a failed refresh, releases the lease and sets the shared back-off.
    ///
    /// `failure` is the vault's own classification, kept in a plain column (`vault status`
    /// shows it without the key); `detail`, the server's words, is sealed.
    /// `refusal`: the server refused for a reason the vault does not know, counted in
    /// ``RefreshState/refusals`` (any other failure sets that count back to zero).
    package func fail(
        for account: AccountID, holder: String, failure: String, detail: String? = nil,
        nextAttemptAt: Date?, refusal: Bool = false, recording: EventRecording<Void>? = nil
    ) throws {
        try write("recording a refresh failure", recording: recording) { db in
            let sealed = try self.seal(
                detail, table: "refresh_state", column: "last_failure_detail",
                account: account, row: account.rawValue, db)
            try self.integrity.rewrite(.refreshState, matching: ["account_id": account.rawValue, "lease_holder": holder], db) {
                try db.execute(
                    sql: """
                        UPDATE refresh_state SET lease_holder = NULL, lease_generation = NULL, lease_acquired_at = NULL,
                            lease_expires_at = NULL, lease_process = NULL, failures = failures + 1, next_attempt_at = ?,
                            last_failure = ?, last_failure_detail = ?, last_failure_at = ?,
                            refusals = CASE WHEN ? THEN coalesce(refusals, 0) + 1 ELSE NULL END
                        WHERE account_id = ? AND lease_holder = ?
                        """,
                    arguments: [
                        nextAttemptAt?.millisecondsSince1970, failure, sealed, self.clock.now().millisecondsSince1970,
                        refusal, account.rawValue, holder,
                    ])
            }
        }
    }

    /// Ends the grant: wipes the account's tokens, ends its current session as expired with
    /// `reason`, records the verdict (`reason` in plain, `detail` — the server's error
    /// description, say — sealed) and releases any lease, in one transaction. Other processes
    /// then find no tokens and nothing to retry, and read the same verdict.
    ///
    /// With `condition`, only when it holds for the account's current session and policy as they
    /// are inside the transaction (a timeout judged on an earlier read is judged again, so
    /// activity recorded meanwhile by another process is never overruled). With `generation`,
    /// only while the account's tokens are still that generation: a server's refusal of a
    /// refresh token another caller has since replaced speaks for that token, not the grant.
    /// Returns whether the grant was ended, and the session it ended (nil when none was open).
    @discardableResult
    package func endGrant(
        for account: AccountID, reason: String, detail: String? = nil, ifTokensAt generation: Int64? = nil,
        onlyIf condition: ((SessionRecord, SessionPolicy) -> Bool)? = nil,
        recording: EventRecording<(ended: Bool, session: SessionRecord?)>? = nil
    ) throws -> (ended: Bool, session: SessionRecord?) {
        let now = clock.now().millisecondsSince1970
        return try write("ending a grant", recording: recording) { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM accounts WHERE account_id = ?", arguments: [account.rawValue]) ?? false else {
                return (false, nil)  // removed meanwhile: nothing left to end
            }
            if let generation, try core.tokens.currentGeneration(for: account, db) != generation { return (false, nil) }
            let current = try core.sessions.current(for: account, db)
            if let condition {
                guard let current, condition(current, try core.sessions.policy(for: account, db)) else { return (false, nil) }
            }
            let open = current.flatMap { $0.state == .active || $0.state == .locked ? $0 : nil }
            try core.tokens.wipe(for: account, db)
            try self.integrity.rewrite(.sessions, where: "account_id = ? AND state IN ('active', 'locked')", [account.rawValue], db) {
                try db.execute(
                    sql: """
                        UPDATE sessions SET state = 'expired', end_reason = ?, ended_at = ?, version = coalesce(version, 0) + 1,
                            extension_holder = NULL, extension_deadline = NULL
                        WHERE account_id = ? AND state IN ('active', 'locked')
                        """,
                    arguments: [reason, now, account.rawValue])
            }
            // Sealed only while the keys are here: a locked process ends a grant (a hard timeout)
            // with the plain verdict alone.
            let sealed =
                self.isLocked
                ? nil
                : try self.seal(
                    detail, table: "refresh_state", column: "last_failure_detail",
                    account: account, row: account.rawValue, db)
            try self.integrity.rewrite(.refreshState, matching: ["account_id": account.rawValue], db) {
                try db.execute(
                    sql: """
                        INSERT INTO refresh_state (account_id, last_failure, last_failure_detail, last_failure_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT (account_id) DO UPDATE SET lease_holder = NULL, lease_generation = NULL,
                            lease_acquired_at = NULL, lease_expires_at = NULL, lease_process = NULL, next_attempt_at = NULL,
                            refusals = NULL, last_failure = excluded.last_failure, last_failure_detail = excluded.last_failure_detail,
                            last_failure_at = excluded.last_failure_at
                        """,
                    arguments: [account.rawValue, reason, sealed, now])
            }
            return (true, try open.flatMap { try core.sessions.session(id: $0.id, account: account, db) })
        }
    }

    /// The account's refresh bookkeeping, with the server's last words opened when the vault is unlocked.
    public func state(for account: AccountID) throws -> RefreshState {
        try read("reading refresh state") { db in
            var state = try self.state(for: account, db)
            if !self.isLocked,
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT last_failure_detail FROM refresh_state WHERE account_id = ?"),
                    arguments: [account.rawValue])
            {
                state.lastFailureDetail = try self.open(
                    row.storedIfPresent("last_failure_detail", table: "refresh_state", row: account.rawValue, path: self.path),
                    table: "refresh_state", column: "last_failure_detail", account: account, row: account.rawValue, db)
            }
            return state
        }
    }

    func state(for account: AccountID, _ db: Database) throws -> RefreshState {
        try Self.storedState(for: account, db, path: path, integrity: integrity) ?? RefreshState.none
    }

    /// The account's stored refresh bookkeeping, nil when none is stored; `.damaged` naming the
    /// column when one holds a value of the wrong type (a hand-edited file). With `integrity`,
    /// the row is checked against its MAC first.
    static func storedState(
        for account: AccountID, _ db: Database, path: String?,
        integrity: RowIntegrity? = nil
    ) throws -> RefreshState? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM refresh_state WHERE account_id = ?"),
                arguments: [account.rawValue])
        else {
            // A deleted row would forget a lease or the failures that hold refreshes back.
            try integrity?.checkCurrent(nil, .refresh, account: account.rawValue, db)
            return nil
        }
        if let integrity {
            let record = StoredRecord(row, table: .refreshState, path: path)
            try integrity.check(record, db)
            try integrity.checkCurrent(record, .refresh, account: account.rawValue, db)
        }
        let key = account.rawValue
        func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
            try row.stored(column, table: "refresh_state", row: key, path: path)
        }
        func optional<T: DatabaseValueConvertible>(_ column: String) throws -> T? {
            try row.storedIfPresent(column, table: "refresh_state", row: key, path: path)
        }
        func date(_ column: String) throws -> Date? {
            try row.storedDateIfPresent(column, table: "refresh_state", row: key, path: path)
        }
        var state = RefreshState(
            leaseHolder: try optional("lease_holder"), leaseGeneration: try optional("lease_generation"),
            leaseExpiresAt: try date("lease_expires_at"), failures: try value("failures"),
            nextAttemptAt: try date("next_attempt_at"), lastFailure: try optional("last_failure"),
            lastFailureAt: try date("last_failure_at"), interruptedRefreshes: try value("interrupted_refreshes"))
        // NULL in rows written before schema 4 and after any other outcome.
        state.refusals = try optional("refusals") ?? 0
        return state
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's `TimeInterval`.
    public var timeInterval: TimeInterval {
        let parts = components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}

extension VaultCore {
    /// This vault's leases (see ``LeaseStore``).
    var leases: LeaseStore { LeaseStore(core: self) }
}
