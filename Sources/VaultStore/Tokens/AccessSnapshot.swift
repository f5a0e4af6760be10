import Foundation
import GRDB

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
    /// The account's access token; nil when it holds no tokens.
    public var token: StoredAccessToken?
}

extension TokenStore {
    /// Reads what a token request needs in one read transaction (see ``AccessSnapshot``).
    /// Returns nil when `account` is nil and no account is active.
    ///
    /// This is the path every API call takes when its process's cache is stale, so it reads
    /// through prepared statements kept by the connection and opens one sealed value.
    public func accessSnapshot(for account: AccountID?) throws -> AccessSnapshot? {
        try read("reading the session and access token") { db in
            let active = try core.accounts.activeID(db)
            guard let id = account ?? active else { return nil }
            return AccessSnapshot(
                activeAccount: active, account: id, session: try core.sessions.current(for: id, db),
                policy: try core.sessions.policy(for: id, db), token: try accessToken(for: id, db))
        }
    }

    /// The account's access token and what describes it, opening no other sealed value.
    func accessToken(for account: AccountID, _ db: Database) throws -> StoredAccessToken? {
        guard
            let record = try StoredRecord.fetchOne(
                db, "SELECT * FROM tokens WHERE account_id = ?", [account.rawValue], table: .tokens, path: path)
        else {
            return nil
        }
        try integrity.check(record, remembering: true, db)
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
