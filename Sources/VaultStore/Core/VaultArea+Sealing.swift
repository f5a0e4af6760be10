import Foundation
import GRDB
import VaultCrypto

// MARK: - Sealing

/// Sealing and opening column values with the accounts' data keys, for every store: the
/// associated data binds each value to this vault, its table, column, account and row.
extension VaultArea {
    func accountNotFound(_ id: AccountID) -> VaultError {
        VaultError(.recordNotFound, "no account \(id) in the vault", path: path)
    }

    func allocateKeyID(_ db: Database) throws -> UInt32 {
        guard let row = try Row.fetchOne(db, sql: "SELECT next_key_id FROM vault_meta WHERE singleton = 1") else {
            throw VaultError(.damaged, "the vault header row is missing", path: path)
        }
        let next = try row.stored("next_key_id", table: "vault_meta", row: "1", path: path, as: Int64.self)
        try integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
            try db.execute(sql: "UPDATE vault_meta SET next_key_id = next_key_id + 1 WHERE singleton = 1")
        }
        return UInt32(truncatingIfNeeded: next)
    }

    func dataKeyContext(account: AccountID, keyID: UInt32) -> SealContext {
        SealContext(
            vaultID: keyring.vaultID, table: "accounts", column: "wrapped_data_key",
            account: account.rawValue, row: account.rawValue, version: "\(keyID)")
    }

    /// The key new values of the account are sealed with: during a key rotation the account's
    /// next data key, otherwise its current one. Read in the caller's transaction, so a
    /// rotation finished by another process is never missed.
    func dataKey(for account: AccountID, _ db: Database) throws -> SymmetricKey {
        let statement = try db.cachedStatement(sql: "SELECT data_key_id, pending_data_key_id FROM accounts WHERE account_id = ?")
        guard let row = try StoredRow.fetchOne(statement, arguments: [account.rawValue]) else {
            throw accountNotFound(account)
        }
        let keyID =
            try row.storedIfPresent(at: 1, "pending_data_key_id", table: "accounts", row: account.rawValue, path: path, as: Int64.self)
            ?? row.stored(at: 0, "data_key_id", table: "accounts", row: account.rawValue, path: path)
        do {
            return try dataKey(id: UInt32(truncatingIfNeeded: keyID), account: account, db)
        } catch let error as CryptoError {
            throw VaultError.sealed(error, table: "accounts", column: "wrapped_data_key", row: account.rawValue, path: path)
        }
    }

    /// The account's data key with `id` (current or, during a rotation, next): from the
    /// keyring, or unwrapped with the vault key that wrapped it and remembered.
    func dataKey(id keyID: UInt32, account: AccountID, _ db: Database) throws -> SymmetricKey {
        if let key = keyring.dataKey(id: keyID) { return key }
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT data_key_id, wrapped_data_key, pending_data_key_id, pending_wrapped_data_key
                    FROM accounts WHERE account_id = ?
                    """,
                arguments: [account.rawValue])
        else {
            throw accountNotFound(account)
        }
        let key = account.rawValue
        let wrapped: Data
        if try row.stored("data_key_id", table: "accounts", row: key, path: path, as: Int64.self) == Int64(keyID) {
            wrapped = try row.stored("wrapped_data_key", table: "accounts", row: key, path: path)
        } else if try row.storedIfPresent("pending_data_key_id", table: "accounts", row: key, path: path, as: Int64.self) == Int64(keyID),
            let pending = try row.storedIfPresent("pending_wrapped_data_key", table: "accounts", row: key, path: path, as: Data.self)
        {
            wrapped = pending
        } else {
            throw CryptoError(.keyMismatch, "the value names key \(keyID), which account \(account) does not have")
        }
        let bytes = [UInt8](wrapped)
        do {
            let wrapper = try keyring.vaultKey(id: SealedBlob(parsing: bytes).keyID)
            let key = try wrapper.openKey(bytes, id: keyID, context: dataKeyContext(account: account, keyID: keyID))
            keyring.remember(key, for: account.rawValue)
            return key
        } catch let error as CryptoError {
            throw VaultError.sealed(error, table: "accounts", column: "wrapped_data_key", row: account.rawValue, path: path)
        }
    }

    func seal(
        _ value: String, with key: SymmetricKey, table: String, column: String,
        account: AccountID, row: String, version: String = ""
    ) throws -> Data {
        let context = SealContext(
            vaultID: keyring.vaultID, table: table, column: column,
            account: account.rawValue, row: row, version: version)
        return Data(try key.seal(text: value, context: context))
    }

    func seal(
        _ value: String?, table: String, column: String, account: AccountID, row: String,
        version: String = "", _ db: Database
    ) throws -> Data? {
        guard let value else { return nil }
        return try seal(value, with: dataKey(for: account, db), table: table, column: column, account: account, row: row, version: version)
    }

    /// Opens a sealed column value; nil stays nil. A value that does not open is `.damaged`,
    /// naming the table, row and column.
    func open(
        _ blob: Data?, table: String, column: String, account: AccountID, row: String,
        version: String = "", _ db: Database
    ) throws -> String? {
        guard let blob else { return nil }
        // Read in place: a page of notifications opens 150 values.
        return try blob.withUnsafeBytes { bytes in
            let key: SymmetricKey
            do {
                key = try dataKey(id: SealedBlob.keyID(of: bytes), account: account, db)
            } catch let error as CryptoError {
                // A blob that cannot be parsed, or names a key its account does not have.
                throw VaultError.sealed(error, table: table, column: column, row: row, path: path)
            }
            let context = SealContext(
                vaultID: keyring.vaultID, table: table, column: column,
                account: account.rawValue, row: row, version: version)
            do {
                // The plaintext bytes are zeroed once the String is made.
                guard let text = try key.openText(bytes, context: context) else {
                    throw VaultError(.damaged, "sealed value \(table).\(column) of row \(row) is not text", path: path)
                }
                return text
            } catch let error as CryptoError {
                throw VaultError.sealed(error, table: table, column: column, row: row, path: path)
            }
        }
    }

    /// ``open(_:table:column:account:row:version:_:)`` for many rows of one table: `shared` is
    /// the table, column and account of the associated data encoded once, and `keys` keeps the
    /// data keys the rows' values named so far. The same checks, the same errors.
    func open(
        _ blob: Data?, sharing shared: SharedSealContext, table: String, column: String, account: AccountID, row: String,
        keys: inout FoundDataKeys, _ db: Database
    ) throws -> String? {
        guard let blob else { return nil }
        return try blob.withUnsafeBytes { bytes in
            let key: SymmetricKey
            do {
                let id = try SealedBlob.keyID(of: bytes)
                if let known = keys.key(id) {
                    key = known
                } else {
                    key = try dataKey(id: id, account: account, db)
                    keys.remember(key, id: id)
                }
            } catch let error as CryptoError {
                throw VaultError.sealed(error, table: table, column: column, row: row, path: path)
            }
            do {
                guard let text = try key.openText(bytes, sharing: shared, row: row) else {
                    throw VaultError(.damaged, "sealed value \(table).\(column) of row \(row) is not text", path: path)
                }
                return text
            } catch let error as CryptoError {
                throw VaultError.sealed(error, table: table, column: column, row: row, path: path)
            }
        }
    }
}

/// The data keys a read of many sealed values found so far, by key id (ids are unique in a
/// vault, as in the keyring). The last one found is compared first: a page's values nearly
/// always name one key, and hashing the id for every value was half a percent of a page.
struct FoundDataKeys {
    private var lastID: UInt32?
    private var last: SymmetricKey?
    private var all: [UInt32: SymmetricKey] = [:]

    mutating func key(_ id: UInt32) -> SymmetricKey? {
        if id == lastID, let last { return last }
        guard let found = all[id] else { return nil }
        lastID = id
        last = found
        return found
    }

    mutating func remember(_ key: SymmetricKey, id: UInt32) {
        all[id] = key
        lastID = id
        last = key
    }
}
