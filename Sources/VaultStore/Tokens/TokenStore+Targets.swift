import Foundation
import GRDB

// MARK: - Tokens for other targets (schema 13)

/// What is known about an account's token for one target without opening it.
public struct TargetTokenMetadata: Sendable, Hashable {
    public var account: AccountID
    public var target: TokenTarget
    public var generation: Int64
    public var tokenType: String
    public var expiresAt: Date?
    /// The scopes the server granted (the response's `scope`, else those asked for).
    public var grantedScopes: [String]
    public var updatedAt: Date
}

extension TokenStore {
    /// The account's access token for `target` (``TokenTarget/account``: its own), opened; nil
    /// when it holds none.
    ///
    /// Every row of the account's targets is checked against its MAC and all of them together
    /// against the vault's state (their count and multiset hash), so a token deleted or put back
    /// from an older copy of the file is refused here (``VaultError/Code/damaged``).
    ///
    /// ```swift
    /// let files = try TokenTarget(resources: ["https://files.example.com/"])
    /// if let token = try vault.tokens.token(for: account, target: files) { print(token.expiresAt ?? "no expiry") }
    /// ```
    public func token(for account: AccountID, target: TokenTarget) throws -> StoredAccessToken? {
        try read("reading a token") { db in
            if target.isAccount { return try self.current(for: account, db).map(StoredAccessToken.init) }
            return try self.token(for: account, target: target, db)
        }
    }

    func token(for account: AccountID, target: TokenTarget, _ db: Database) throws -> StoredAccessToken? {
        try checkedTargetRows(for: account, db).first { (try? Self.target(of: $0)) == target }.map { try targetToken(from: $0, account: account, db) }
    }

    /// What the account holds for each target other than its own, without opening a token.
    public func targetTokens(for account: AccountID) throws -> [TargetTokenMetadata] {
        try read("reading token metadata") { db in
            try checkedTargetRows(for: account, db).map { record in
                TargetTokenMetadata(
                    account: account, target: try Self.target(of: record), generation: try record.value("generation"),
                    tokenType: try record.value("token_type"), expiresAt: try record.optionalDate("access_expires_at"),
                    grantedScopes: Self.words(try record.value("granted_scopes")), updatedAt: try record.date("updated_at"))
            }
        }
    }

    /// Every `resource_tokens` row of the account, each checked against its MAC, and all of them
    /// against the state's commitment for the account.
    func checkedTargetRows(for account: AccountID, _ db: Database) throws -> [StoredRecord] {
        let statement = try db.cachedStatement(sql: "SELECT * FROM resource_tokens WHERE account_id = ? ORDER BY token_id")
        let layout = RowIntegrity.layout(of: statement, in: .resourceTokens)
        var records: [StoredRecord] = []
        let cursor = try DatabaseValue.fetchCursor(statement, arguments: [account.rawValue])
        while try cursor.next() != nil {
            records.append(StoredRecord(values: StoredRow(current: statement), layout: layout, table: .resourceTokens, path: path))
        }
        for record in records { try integrity.check(record, remembering: true, db) }
        try integrity.checkCollection(records, .resourceTokens, account: account.rawValue, db)
        return records
    }

    /// Stores `tokens`' access token for `target`, replacing the one held for it, without the
    /// session layer (no lease, no refresh token used): for test fixtures, benchmarks and tools.
    /// Accounts obtain tokens for targets through `SessionService`.
    @_spi(RawWrites)
    @discardableResult
    public func store(_ tokens: TokenSet, for account: AccountID, target: TokenTarget) throws -> StoredAccessToken {
        try write("storing a token for a target") { db in try self.store(tokens, for: account, target: target, db) }
    }

    /// Stores the token the server issued for `target` (not the account's own), replacing the
    /// one held for it, in the caller's transaction. Returns it as stored.
    func store(_ tokens: TokenSet, for account: AccountID, target: TokenTarget, _ db: Database) throws -> StoredAccessToken {
        guard !target.isAccount else {
            throw VaultError(.invalidArgument, "the account's own token is stored with its refresh token, not as a target's", path: path)
        }
        let existing = try checkedTargetRows(for: account, db).first { (try? Self.target(of: $0)) == target }
        let now = clock.now().millisecondsSince1970
        let granted = (tokens.scopes.isEmpty ? target.scopes : tokens.scopes).joined(separator: " ")
        let id: Int64
        let generation: Int64
        if let existing {
            id = try existing.value("token_id")
            generation = try existing.value("generation", as: Int64.self) + 1
        } else {
            // The row's id is in the sealed value's associated data: the row comes first.
            try db.execute(
                sql: """
                    INSERT INTO resource_tokens (account_id, resources, scopes, generation, access_token, token_type, updated_at)
                    VALUES (?, ?, ?, 1, x'', '', ?)
                    """,
                arguments: [account.rawValue, target.storedResources, target.storedScopes, now])
            id = db.lastInsertedRowID
            generation = 1
        }
        let sealed = try seal(
            tokens.accessToken, with: try dataKey(for: account, db), table: "resource_tokens", column: "access_token",
            account: account, row: String(id), version: String(generation))
        try db.execute(
            sql: """
                UPDATE resource_tokens SET generation = ?, access_token = ?, token_type = ?, access_expires_at = ?,
                    granted_scopes = ?, updated_at = ? WHERE token_id = ?
                """,
            arguments: [generation, sealed, tokens.tokenType, tokens.accessTokenExpiresAt?.millisecondsSince1970, granted, now, id])
        // Checked above (or inserted here): authenticated as written, and committed to in place
        // of the MAC it carried.
        try integrity.authenticate(.resourceTokens, where: "token_id = ?", [id], db)
        return StoredAccessToken(
            account: account, generation: generation, accessToken: tokens.accessToken, tokenType: tokens.tokenType,
            expiresAt: tokens.accessTokenExpiresAt, scopes: Self.words(granted), target: target)
    }

    /// Deletes the account's tokens, those of every target with them, in the caller's
    /// transaction: the grant they came from ended or was replaced.
    func wipe(for account: AccountID, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM tokens WHERE account_id = ?", arguments: [account.rawValue])
        try integrity.removed(.tokens, account: account.rawValue, db)
        try integrity.delete(from: .resourceTokens, where: "account_id = ?", [account.rawValue], db)
    }

    /// The target a checked row is for; `.damaged` when its columns are not in the stored form.
    static func target(of record: StoredRecord) throws -> TokenTarget {
        guard let target = TokenTarget(storedResources: try record.value("resources"), storedScopes: try record.value("scopes")) else {
            throw VaultError(.damaged, "resource_tokens row \(record.name) names no valid target", path: record.path)
        }
        return target
    }

    /// A `resource_tokens` row's access token (its MAC checked by the caller), opened.
    private func targetToken(from record: StoredRecord, account: AccountID, _ db: Database) throws -> StoredAccessToken {
        let id: Int64 = try record.value("token_id")
        let generation: Int64 = try record.value("generation")
        guard
            let access = try open(
                record.optional("access_token"), table: "resource_tokens", column: "access_token", account: account, row: String(id),
                version: String(generation), db)
        else {
            throw VaultError(.damaged, "resource_tokens row \(id) of account \(account) has no access token", path: path)
        }
        return StoredAccessToken(
            account: account, generation: generation, accessToken: access, tokenType: try record.value("token_type"),
            expiresAt: try record.optionalDate("access_expires_at"), scopes: Self.words(try record.value("granted_scopes")),
            target: try Self.target(of: record))
    }

    private static func words(_ text: String) -> [String] { text.split(separator: " ").map(String.init) }
}
