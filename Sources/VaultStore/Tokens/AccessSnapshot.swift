import Foundation
import GRDB
import VaultCrypto

// MARK: - The read behind a token request

/// Everything a request for an account's access token depends on, read in one transaction:
/// which account is active, the account's current session and policy, and its access token
/// (opened; the refresh and ID tokens stay sealed).
///
/// ```swift
/// guard let snapshot = try vault.accessSnapshot(for: nil) else { throw NoActiveAccount() }
/// if snapshot.session?.state == .active, let token = snapshot.token { use(token.accessToken) }
/// ```
public struct AccessSnapshot: Sendable {
    /// The active account when the snapshot was read.
    public var activeAccount: AccountID?
    /// The account asked for, or the active one.
    public var account: AccountID
    /// The account's newest session; nil when it never signed in (or was removed).
    public var session: SessionRecord?
    /// The account's session policy (the defaults when none is stored).
    public var policy: SessionPolicy
    /// The account's access token for the target asked for; nil when it holds none.
    public var token: StoredAccessToken?
    /// The generation of the account's own tokens (its refresh token); nil when it holds none.
    public var grantGeneration: Int64?
    /// Which writes of the rows above the snapshot was read from (see ``AccessRevision``).
    public var revision: AccessRevision
}

/// The writes an ``AccessSnapshot`` was read from, as the vault's state row records them: the
/// header's (which account is active) and those of the account's newest session, its policy
/// and its tokens, each by the write counter it was written at.
///
/// While ``TokenStore/accessRevision(for:)`` returns an equal value, a snapshot read again
/// would hold the same rows: a process that cached one need not read it again after a commit
/// that wrote something else (another account's activity, a notification, an event). The
/// state row is checked against its MAC and against the highest counter this process has seen
/// (a state put back from an older copy while the vault was open is refused), so an equal
/// revision is the vault's own word that those rows are the current ones.
public struct AccessRevision: Equatable, Sendable {
    let header: UInt64
    let sessionID: Int64
    let session: UInt64
    let policy: UInt64
    let tokens: UInt64
    /// For a snapshot of a target's token: the account's `resource_tokens` rows as the state
    /// commits to them (their count and multiset hash, which any write of one of them moves);
    /// nil for the account's own token, which does not depend on them.
    let targets: MultisetDigest?

    init(_ commitment: RowIntegrity.Commitment, account: String, targets: Bool = false) {
        let entry = commitment.manifest.accounts[account] ?? VaultManifest.Account()
        header = commitment.metaCounter
        sessionID = entry.sessionID
        session = entry.session
        policy = entry.policy
        tokens = entry.tokens
        self.targets =
            targets
            ? commitment.commitments.digests[VaultCommitments.Key(table: AuthenticatedTable.resourceTokens.name, account: account)]
                ?? MultisetDigest() : nil
    }
}

extension AccessRevision {
    /// Whether the two differ in the tokens' write alone (the same header, session and policy).
    func differsOnlyInTokens(from other: AccessRevision) -> Bool {
        targets == nil && other.targets == nil && header == other.header && sessionID == other.sessionID && session == other.session && policy == other.policy
            && tokens != other.tokens
    }
}

/// What ``TokenStore/recheckAccess(for:since:)`` found after a commit.
public enum AccessRecheck: Sendable {
    /// None of the rows the revision names was written: an answer read from them stands.
    case unchanged
    /// Only the account's tokens were written: its access token as the vault now holds it,
    /// and the revision it was read at (the header, session and policy as before).
    case token(StoredAccessToken, AccessRevision)
    /// The header, the session or the policy was written, or the tokens were removed: read
    /// everything again (``TokenStore/accessSnapshot(for:target:)``).
    case changed
}

extension TokenStore {
    /// Reads what a token request needs in one read transaction (see ``AccessSnapshot``).
    /// Returns nil when `account` is nil and no account is active.
    ///
    /// This is the path every API call takes when its process's cache is stale, so it reads
    /// through prepared statements kept by the connection and opens one sealed value.
    ///
    /// With a `target` other than the account's own, ``AccessSnapshot/token`` is the account's
    /// token for that target (every row of the account's targets checked, as
    /// ``token(for:target:)`` does) and the account's own token stays sealed.
    public func accessSnapshot(for account: AccountID?, target: TokenTarget = .account) throws -> AccessSnapshot? {
        try core.readPrepared("reading the session and access token") { db in
            let floor = keyring.counterFloor  // before the snapshot's first read
            // One statement for the rows (each checked against its MAC as when read alone): the
            // header, the state, the account's newest session, policy and tokens.
            guard
                let rows = try StoredRecord.fetchJoined(
                    db, Self.snapshotSQL, [account?.rawValue], tables: [.vaultMeta, .vaultState, .sessions, .sessionPolicies, .tokens],
                    path: path),
                rows.count == 5, let header = rows[0]
            else {
                throw VaultError(.damaged, "\(path) has no vault header row", path: path)
            }
            try integrity.check(header, remembering: true, db)
            let active = try header.optional("active_account_id", as: String.self).map(AccountID.init(rawValue:))
            guard let id = account ?? active else { return nil }
            // Each row against its MAC, then against the state (none deleted or put back): the
            // header against the counter the state records for it, the rows against the manifest.
            guard let state = rows[1] else {
                throw VaultError(.damaged, "the vault's state row is missing: \(path) is damaged or was tampered with", path: path)
            }
            try integrity.check(state, remembering: true, db)
            let commitment = try integrity.commitment(of: state, floor: floor)
            try integrity.checkHeader(header, against: commitment)
            for (record, slot) in zip(rows[2...4], [VaultManifest.Slot.session, .policy, .tokens]) {
                if let record { try integrity.check(record, remembering: true, db) }
                try integrity.checkCurrent(record, slot, account: id.rawValue, db, commitment: commitment)
            }
            let session = try rows[2].map(SessionStore.session(from:))
            let policy = try rows[3].map(SessionStore.policy(from:)) ?? SessionPolicy()
            let grant: Int64? = try rows[4].map { try $0.value("generation") }
            let token =
                target.isAccount
                ? try rows[4].map { try accessToken(from: $0, account: id, db) }
                : try self.token(for: id, target: target, db)
            return AccessSnapshot(
                activeAccount: active, account: id, session: session, policy: policy, token: token, grantGeneration: grant,
                revision: AccessRevision(commitment, account: id.rawValue, targets: !target.isAccount))
        }
    }

    /// The ``AccessRevision`` of `account` as the vault's state row records it now: one row
    /// read, checked against its MAC (a state row seen before is not hashed again) and refused
    /// when it went back from a counter this process saw. Cheaper than ``accessSnapshot(for:target:)``
    /// by the four rows, their checks and the sealed value it does not read. With a `target`
    /// other than the account's own, the revision of a snapshot of that target's token (which
    /// also names the account's `resource_tokens` rows).
    ///
    /// It reads on the connection ``Vault/changeStamp()`` reads on (a read-only WAL reader that
    /// never waits for a writer), one page beside the one the stamp reads, so a caller may make
    /// it where it takes the stamp. Take the stamp first.
    public func accessRevision(for account: AccountID, target: TokenTarget = .account) throws -> AccessRevision {
        try core.readOnStamp("reading the vault's state") { db in
            AccessRevision(try checkedState(db), account: account.rawValue, targets: !target.isAccount)
        }
    }

    /// ``accessRevision(for:)`` compared with `revision` (an earlier snapshot's) and, when only
    /// the account's tokens were written since (another process stored a refreshed pair, or
    /// took the refresh lease), the account's access token read again in the same transaction:
    /// the `tokens` row, checked against its MAC and against the state's record of it, and its
    /// access token opened. What a new ``accessSnapshot(for:target:)`` would hold, without
    /// reading again the rows the revision shows unchanged.
    ///
    /// It reads on the stamp's connection as ``accessRevision(for:)`` does (a read-only WAL
    /// reader that never waits for a writer): the state row and the tokens row, and one sealed
    /// value opened. Take the stamp first. A target's revision is only ever found unchanged or
    /// changed: its token is in another table.
    public func recheckAccess(for account: AccountID, since revision: AccessRevision) throws -> AccessRecheck {
        try core.readOnStamp("reading the vault's state") { db in
            let commitment = try checkedState(db)
            let now = AccessRevision(commitment, account: account.rawValue, targets: revision.targets != nil)
            if now == revision { return .unchanged }
            guard now.differsOnlyInTokens(from: revision),
                let record = try StoredRecord.fetchOne(db, "SELECT * FROM tokens WHERE account_id = ?", [account.rawValue], table: .tokens, path: path)
            else { return .changed }
            try integrity.check(record, remembering: true, db)
            try integrity.checkCurrent(record, .tokens, account: account.rawValue, db, commitment: commitment)
            return .token(try accessToken(from: record, account: account, db), now)
        }
    }

    /// The state row read in `db`'s transaction (begun just now: the floor is taken first),
    /// checked against its MAC and against the highest counter this process has seen.
    private func checkedState(_ db: Database) throws -> RowIntegrity.Commitment {
        let floor = keyring.counterFloor  // before the read
        guard let state = try StoredRecord.fetchOne(db, RowIntegrity.stateSQL, table: .vaultState, path: path) else {
            throw VaultError(.damaged, "the vault's state row is missing: \(path) is damaged or was tampered with", path: path)
        }
        try integrity.check(state, remembering: true, db)
        return try integrity.commitment(of: state, floor: floor)
    }

    /// The header and the state, then the newest session, the policy and the tokens of the
    /// account asked for (?1) or else the active one; a table with no such row comes back as NULLs.
    static let snapshotSQL = """
        SELECT NULL AS "|vault_meta", m.*, NULL AS "|vault_state", v.*, NULL AS "|sessions", s.*, NULL AS "|session_policies", p.*, NULL AS "|tokens", t.*
        FROM vault_meta m
        LEFT JOIN vault_state v ON v.singleton = 1
        LEFT JOIN sessions s
            ON s.session_id = (SELECT max(session_id) FROM sessions WHERE account_id = coalesce(?1, m.active_account_id))
        LEFT JOIN session_policies p ON p.account_id = coalesce(?1, m.active_account_id)
        LEFT JOIN tokens t ON t.account_id = coalesce(?1, m.active_account_id)
        WHERE m.singleton = 1
        """

    /// The account's access token a `tokens` row holds (its MAC checked by the caller), opened:
    /// no other sealed value is.
    func accessToken(from record: StoredRecord, account: AccountID, _ db: Database) throws -> StoredAccessToken {
        let key = account.rawValue
        let generation: Int64 = try record.value("generation")
        guard
            let access = try open(
                record.optional("access_token"), table: "tokens", column: "access_token", account: account, row: key,
                version: String(generation), db)
        else {
            throw VaultError(.damaged, "tokens of account \(account) have no access token", path: path)
        }
        let scopes: String = try record.value("scopes")
        return StoredAccessToken(
            account: account, generation: generation, accessToken: access,
            tokenType: try record.value("token_type"),
            expiresAt: try record.optionalDate("access_expires_at"),
            scopes: scopes.split(separator: " ").map(String.init))
    }
}
