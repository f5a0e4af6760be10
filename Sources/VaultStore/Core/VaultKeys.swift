import Foundation
import GRDB
import VaultCrypto

/// From a credential to the vault key: the header's unlock record, key derivation, the key
/// check and the unwrap. The one place a ``VaultCredential`` becomes a key (create, open,
/// unlock, credential change and key rotation all come here).
enum VaultKeys {
    /// The stored values needed to unlock the vault.
    struct UnlockRecord: Sendable {
        var vaultID: [UInt8]
        var deviceID: String
        var kekKind: String
        var salt: [UInt8]?
        var cost: KDFParameters?
        var keyCheck: [UInt8]
        var vaultKeyID: UInt32
        var wrappedVaultKey: [UInt8]
        var pendingVaultKeyID: UInt32?
        var pendingWrappedVaultKey: [UInt8]?
        var isFresh: Bool

        /// How the vault is unlocked, as ``Vault/inspect(at:options:)`` reports it.
        var unlockMethod: VaultUnlockMethod {
            if kekKind == "keyfile" { return .keyFile }
            return .passphrase(cost ?? KDFParameters(opsLimit: 0, memLimitBytes: 0))
        }

        /// The header row; `.damaged` when a column holds a value of the wrong type (a hand-edited file).
        static func fetch(_ db: Database, path: String? = nil) throws -> UnlockRecord? {
            guard try db.tableExists("vault_meta"),
                let row = try Row.fetchOne(db, sql: "SELECT * FROM vault_meta WHERE singleton = 1")
            else { return nil }
            func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
                try row.stored(column, table: "vault_meta", row: "1", path: path)
            }
            func optional<T: DatabaseValueConvertible>(_ column: String) throws -> T? {
                row.hasColumn(column) ? try row.storedIfPresent(column, table: "vault_meta", row: "1", path: path) : nil
            }
            let ops: Int64? = try optional("kdf_opslimit")
            let mem: Int64? = try optional("kdf_memlimit")
            let accounts = try Int.fetchOne(db, sql: "SELECT count(*) FROM accounts") ?? 0
            let vaultID: Data = try value("vault_id")
            let salt: Data? = try optional("kdf_salt")
            let keyCheck: Data = try value("key_check")
            let vaultKeyID: Int64 = try value("vault_key_id")
            let wrappedVaultKey: Data = try value("wrapped_vault_key")
            let pendingVaultKeyID: Int64? = try optional("pending_vault_key_id")
            let pendingWrappedVaultKey: Data? = try optional("pending_wrapped_vault_key")
            return UnlockRecord(
                vaultID: [UInt8](vaultID),
                deviceID: try value("device_id"),
                kekKind: try value("kek_kind"),
                salt: salt.map { [UInt8]($0) },
                cost: ops.flatMap { ops in mem.map { KDFParameters(opsLimit: UInt64(clamping: ops), memLimitBytes: UInt64(clamping: $0)) } },
                keyCheck: [UInt8](keyCheck),
                vaultKeyID: UInt32(truncatingIfNeeded: vaultKeyID),
                wrappedVaultKey: [UInt8](wrappedVaultKey),
                pendingVaultKeyID: pendingVaultKeyID.map { UInt32(truncatingIfNeeded: $0) },
                pendingWrappedVaultKey: pendingWrappedVaultKey.map { [UInt8]($0) },
                isFresh: accounts == 0)
        }
    }

    /// The commitments' root key (schema 12), as sealed by the vault key `sealedBy` into the header.
    static func commitmentKeyContext(vaultID: [UInt8], sealedBy keyID: UInt32) -> SealContext {
        SealContext(vaultID: vaultID, table: "vault_meta", column: "commitment_key", row: "1", version: "\(keyID)")
    }

    /// The id the commitments' root key goes by (a label: it is never stored beside a value).
    static let commitmentRootKeyID = UInt32.max

    static func vaultKeyContext(vaultID: [UInt8], keyID: UInt32) -> SealContext {
        SealContext(vaultID: vaultID, table: "vault_meta", column: "wrapped_vault_key", row: "1", version: "\(keyID)")
    }

    static func derive(passphrase: SecureBytes, salt: [UInt8], cost: KDFParameters, path: String) throws -> KeyEncryptionKey {
        do {
            return try KeyEncryptionKey.derive(passphrase: passphrase, salt: salt, cost: cost)
        } catch let error as CryptoError {
            throw VaultError(.storage, "key derivation failed: \(error.message)", path: path)
        }
    }

    /// The key-encryption key of a new credential (a new vault's, or a changed one's): a
    /// passphrase stretched at `cost` with a fresh salt (returned, to be stored), or a key
    /// file's key. Refuses an empty passphrase and a cost below the floor.
    static func newKeyEncryptionKey(_ credential: VaultCredential, cost: KDFParameters, path: String) throws -> (KeyEncryptionKey, salt: [UInt8]?) {
        switch credential {
        case .passphraseBytes(let passphrase):
            guard passphrase.count > 0 else {
                throw VaultError(.invalidCredential, "an empty passphrase cannot protect a vault", path: path)
            }
            do { try cost.validate() } catch { throw VaultError(.invalidArgument, error.message, path: path) }
            let salt = try KeyEncryptionKey.newSalt()
            return (try derive(passphrase: passphrase, salt: salt, cost: cost, path: path), salt)
        case .keyFile, .key:
            guard let (contents, owned) = try credential.keyBytes() else { throw VaultError(.invalidCredential, "no key", path: path) }
            defer { if owned { contents.wipe() } }
            return (try KeyEncryptionKey.fromKeyFile(contents), nil)
        }
    }

    /// One key derivation, then the key check, then the unwrap.
    static func unlockVaultKey(_ meta: UnlockRecord, credential: VaultCredential, path: String) throws -> SymmetricKey {
        let keys = try unlockVaultKeys(meta, credential: credential, path: path)
        keys.pending?.wipe()
        return keys.current
    }

    /// The current vault key and, while a key rotation is under way, the next one.
    static func unlockVaultKeys(_ meta: UnlockRecord, credential: VaultCredential, path: String) throws -> (current: SymmetricKey, pending: SymmetricKey?) {
        let kek = try keyEncryptionKey(meta, credential: credential, path: path)
        defer { kek.wipe() }
        do {
            let current = try kek.unwrap(meta.wrappedVaultKey, id: meta.vaultKeyID, context: vaultKeyContext(vaultID: meta.vaultID, keyID: meta.vaultKeyID))
            guard let pendingID = meta.pendingVaultKeyID, let pendingWrapped = meta.pendingWrappedVaultKey else { return (current, nil) }
            let pending = try kek.unwrap(pendingWrapped, id: pendingID, context: vaultKeyContext(vaultID: meta.vaultID, keyID: pendingID))
            return (current, pending)
        } catch {
            throw VaultError(.damaged, "the credential is right but the vault key of \(path) does not open: the vault is damaged", path: path)
        }
    }

    /// Derives (or reads) the key-encryption key and proves it with the stored key check:
    /// exactly one key derivation. Throws `.wrongCredential` for a wrong passphrase or key file.
    static func keyEncryptionKey(_ meta: UnlockRecord, credential: VaultCredential, path: String) throws -> KeyEncryptionKey {
        let kek: KeyEncryptionKey
        switch (credential, meta.kekKind) {
        case (.passphraseBytes(let passphrase), "argon2id13"):
            guard let salt = meta.salt, let cost = meta.cost else {
                throw VaultError(.damaged, "\(path) has an incomplete key-derivation record", path: path)
            }
            kek = try derive(passphrase: passphrase, salt: salt, cost: cost, path: path)
        case (.keyFile, "keyfile"), (.key, "keyfile"):
            guard let (contents, owned) = try credential.keyBytes() else { throw VaultError(.invalidCredential, "no key", path: path) }
            defer { if owned { contents.wipe() } }
            kek = try KeyEncryptionKey.fromKeyFile(contents)
        case (.passphraseBytes, "keyfile"):
            throw VaultError(.wrongCredential, "\(path) is unlocked with a key file, not a passphrase", path: path)
        case (.keyFile, "argon2id13"), (.key, "argon2id13"):
            throw VaultError(.wrongCredential, "\(path) is unlocked with a passphrase, not a key file", path: path)
        default:
            throw VaultError(.damaged, "\(path) names an unknown key-encryption method", path: path)
        }
        guard try kek.matches(keyCheck: meta.keyCheck) else {
            kek.wipe()
            let what =
                switch credential {
                case .keyFile(let url): "wrong key file (\(url.path))"
                case .key(_, let source): "wrong key (from \(source))"
                case .passphraseBytes: "wrong passphrase"
                }
            throw VaultError(.wrongCredential, "\(what) for \(path)", path: path)
        }
        return kek
    }
}
