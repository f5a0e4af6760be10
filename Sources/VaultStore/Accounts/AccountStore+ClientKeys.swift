import Foundation
import GRDB
import Logging

// MARK: - Client signing keys (schema 14)

extension AccountStore {
    /// Replaces the signing key of a `private_key_jwt` client (a key rollover: the provider
    /// already accepts the new key), sealed with the account's data key. `expecting` is the key
    /// the caller saw (PEM): when another process replaced it meanwhile, nothing changes and
    /// ``VaultError/Code/staleGeneration`` is thrown, so two rollovers never overwrite each other.
    public func replaceClientSigningKey(_ pem: String, expecting current: String, for id: AccountID) throws {
        try write("replacing a client signing key") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [id.rawValue]) else {
                throw self.accountNotFound(id)
            }
            try self.integrity.check(row, in: .accounts, db)
            let method: String? = try row.storedIfPresent("client_auth_method", table: "accounts", row: id.rawValue, path: self.path)
            guard method == ClientAuthentication.privateKeyJWT.rawValue else {
                throw VaultError(.invalidArgument, "account \(id) does not authenticate with a signing key (private_key_jwt)", path: self.path)
            }
            let stored = try self.open(
                row.storedIfPresent("client_signing_key", table: "accounts", row: id.rawValue, path: self.path), table: "accounts",
                column: "client_signing_key", account: id, row: id.rawValue, db)
            guard stored == current else {
                throw VaultError(.staleGeneration, "account \(id)'s signing key was replaced meanwhile; nothing was changed", path: self.path)
            }
            let sealed = try self.seal(pem, table: "accounts", column: "client_signing_key", account: id, row: id.rawValue, db)
            try self.integrity.rewrite(.accounts, matching: ["account_id": id.rawValue], db) {
                try db.execute(sql: "UPDATE accounts SET client_signing_key = ? WHERE account_id = ?", arguments: [sealed, id.rawValue])
            }
            self.logger.info("replaced a client signing key", metadata: ["account": "\(id)"])
        }
    }
}
