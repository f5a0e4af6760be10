import Foundation
import GRDB

// MARK: - Tokens

/// An account's tokens: the access, refresh and ID tokens, sealed with the account's data key,
/// and the read behind every token request.
///
/// ```swift
/// if let held = try vault.tokens.current(for: account) { print(held.tokens.accessTokenExpiresAt ?? "no expiry") }
/// ```
public struct TokenStore: VaultArea {
    let core: VaultCore

    /// Stores `tokens` for `account` as one atomic compare-and-swap on the generation, without
    /// the session layer (no session, no event): for test fixtures, benchmarks and repair tools.
    /// Accounts sign in and refresh through `SessionService`.
    ///
    /// Pass the generation the new tokens replace (from ``current(for:)``), or nil when the
    /// account has none yet. If another writer stored tokens in between, nothing is written
    /// and ``VaultError/Code/staleGeneration`` is thrown: a result computed from stale tokens
    /// never overwrites newer ones. Returns the new generation.
    ///
    /// Every token value is sealed with the account's key and bound to its account, column
    /// and generation, so an older sealed value replayed into the row does not open.
    @_spi(RawWrites)
    @discardableResult
    public func store(_ tokens: TokenSet, for account: AccountID, replacing generation: Int64?) throws -> Int64 {
        try write("storing tokens") { db in
            try self.store(tokens, for: account, replacing: generation, db)
        }
    }

    /// The same as ``store(_:for:replacing:)`` inside a transaction the caller holds.
    func store(_ tokens: TokenSet, for account: AccountID, replacing generation: Int64?, _ db: Database) throws -> Int64 {
        // The state row first, read and checked once for the whole write: the row below is then
        // judged against what the write began from (as every write does), not read again.
        _ = try integrity.writeCounter(db)
        let current = try currentGeneration(for: account, db)
        guard current == generation else {
            throw VaultError(
                .staleGeneration,
                "tokens of account \(account) are at generation \(current.map(String.init) ?? "none"), not \(generation.map(String.init) ?? "none"): another writer stored newer tokens",
                path: path)
        }
        let next = (generation ?? 0) + 1
        // One key lookup for the three values: they are sealed with the same key.
        let key = try dataKey(for: account, db)
        let seal = { (column: String, value: String?) throws -> Data? in
            try value.map { try self.seal($0, with: key, table: "tokens", column: column, account: account, row: account.rawValue, version: "\(next)") }
        }
        let (access, refresh, id) = (
            try seal("access_token", tokens.accessToken).databaseValue, try seal("refresh_token", tokens.refreshToken).databaseValue,
            try seal("id_token", tokens.idToken).databaseValue
        )
        let (expires, scopes, now) = (
            tokens.accessTokenExpiresAt?.millisecondsSince1970.databaseValue ?? .null, tokens.scopes.joined(separator: " ").databaseValue,
            clock.now().millisecondsSince1970.databaseValue
        )
        let (owner, type, nextValue) = (account.rawValue.databaseValue, tokens.tokenType.databaseValue, next.databaseValue)
        // The table as schema 3 made it (the statement `checkedRecord` keeps prepared): the row
        // and its MAC written in one statement, the MAC made from the values themselves.
        // (Arguments as literals: GRDB's initializer from an array of values costs far more.)
        let layout = RowIntegrity.layout(of: try db.cachedStatement(sql: Self.rowSQL), in: .tokens)
        // Kept prepared by the connection: a refresh stores tokens on every rotation.
        let statement = try db.cachedStatement(
            sql: generation == nil
                ? """
                INSERT INTO tokens (generation, access_token, refresh_token, id_token, token_type,
                    access_expires_at, scopes, updated_at, row_mac, account_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
                : """
                UPDATE tokens SET generation = ?, access_token = ?, refresh_token = ?, id_token = ?, token_type = ?,
                    access_expires_at = ?, scopes = ?, updated_at = ?, row_mac = ? WHERE account_id = ?
                """)
        if layout.names == Self.storedColumns {
            let row = [owner, nextValue, access, refresh, id, type, expires, scopes, now, .null]
            try integrity.writeWhole(.tokens, row, layout: layout, db) { mac in
                try statement.execute(arguments: [nextValue, access, refresh, id, type, expires, scopes, now, mac, owner])
            }
        } else {
            // Another layout (columns this build does not write): written without a MAC, then read
            // back and authenticated (the row was checked above, by the generation read).
            try statement.execute(arguments: [nextValue, access, refresh, id, type, expires, scopes, now, nil, owner])
            try integrity.authenticate(.tokens, where: "account_id = ?", [account.rawValue], db)
        }
        return next
    }

    /// The generation of the account's tokens (their row checked), nil when it has none.
    func currentGeneration(for account: AccountID, _ db: Database) throws -> Int64? {
        try checkedRecord(for: account, db).map { try $0.value("generation", as: Int64.self) }
    }

    /// The statement that reads an account's `tokens` row.
    static let rowSQL = "SELECT * FROM tokens WHERE account_id = ?"
    /// The columns of `tokens` in the order schema 3 made them (the last, `row_mac`).
    static let storedColumns = [
        "account_id", "generation", "access_token", "refresh_token", "id_token", "token_type", "access_expires_at", "scopes", "updated_at",
        RowMAC.column,
    ]

    /// The account's `tokens` row, checked against its MAC and the header's manifest; nil when
    /// it has none (and the vault wrote none). Read in place: every refresh stores through here.
    func checkedRecord(for account: AccountID, _ db: Database) throws -> StoredRecord? {
        let record = try StoredRecord.fetchOne(db, Self.rowSQL, [account.rawValue], table: .tokens, path: path)
        if let record { try integrity.check(record, remembering: true, db) }
        try integrity.checkCurrent(record, .tokens, account: account.rawValue, db)
        return record
    }

    /// The account's tokens, opened; nil when it has none.
    public func current(for account: AccountID) throws -> StoredTokens? {
        try read("reading tokens") { db in try self.current(for: account, db) }
    }

    func current(for account: AccountID, _ db: Database) throws -> StoredTokens? {
        guard let record = try checkedRecord(for: account, db) else { return nil }
        let key = account.rawValue
        let generation: Int64 = try record.value("generation")
        let open = { (column: String) throws -> String? in
            try self.open(record.optional(column), table: "tokens", column: column, account: account, row: key, version: "\(generation)", db)
        }
        guard let access = try open("access_token") else {
            throw VaultError(.damaged, "tokens of account \(account) have no access token", path: path)
        }
        let scopes: String = try record.value("scopes")
        return StoredTokens(
            account: account, generation: generation,
            tokens: TokenSet(
                accessToken: access, refreshToken: try open("refresh_token"), idToken: try open("id_token"),
                tokenType: try record.value("token_type"),
                accessTokenExpiresAt: try record.optionalDate("access_expires_at"),
                scopes: scopes.split(separator: " ").map(String.init)),
            updatedAt: try record.date("updated_at"))
    }

    /// Presence and expiry of the account's tokens, without opening any of them.
    public func metadata(for account: AccountID) throws -> TokenMetadata? {
        try read("reading token metadata") { db in
            try self.checkedRecord(for: account, db).map { record in
                let scopes: String = try record.value("scopes")
                return TokenMetadata(
                    account: account, generation: try record.value("generation"),
                    hasRefreshToken: record.holdsValue("refresh_token"),
                    hasIDToken: record.holdsValue("id_token"),
                    tokenType: try record.value("token_type"),
                    accessTokenExpiresAt: try record.optionalDate("access_expires_at"),
                    scopes: scopes.split(separator: " ").map(String.init),
                    updatedAt: try record.date("updated_at"))
            }
        }
    }

    /// Deletes the account's tokens (the account and its session stay), without the session
    /// layer: for test fixtures and tools. Returns whether there were any.
    @_spi(RawWrites)
    @discardableResult
    public func delete(for account: AccountID) throws -> Bool {
        try write("wiping tokens") { db in
            let had = try currentGeneration(for: account, db) != nil
            try wipe(for: account, db)
            return had
        }
    }
}

extension VaultCore {
    /// This vault's tokens (see ``TokenStore``).
    var tokens: TokenStore { TokenStore(core: self) }
}
