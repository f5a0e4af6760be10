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
        var createdAt: Int64 = 0
        /// The key slots (schema 16), as the file holds them: not authenticated until the vault
        /// key is known (see ``KeySlotStore``).
        var slots: [SlotRecord] = []

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
            var record = UnlockRecord(
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
            record.createdAt = try value("created_at")
            record.slots = try SlotRecord.fetchAll(db, path: path)
            return record
        }

        /// Slot 0 (the header's own credential) and every slot after it, unauthenticated.
        var keySlots: [KeySlot] {
            VaultKeys.keySlots(keyFile: kekKind == "keyfile", createdAt: Date(millisecondsSince1970: createdAt), slots: slots)
        }

        /// ", which also opens with slot 0 (passphrase), slot 2 (…)": the other ways in, for a
        /// message about a credential that did not open the vault ("" without slots).
        func otherRoutes(than used: Int64? = nil) -> String {
            guard !slots.isEmpty else { return "" }
            let others = keySlots.filter { $0.id != used }.map(\.description)
            return others.isEmpty ? "" : "; it opens with \(others.joined(separator: ", "))"
        }
    }

    /// One row of `key_slots` as the file holds it.
    struct SlotRecord: Sendable {
        var id: Int64
        var kind: KeySlot.Kind
        var keeper: String?
        var label: String
        var salt: [UInt8]?
        var cost: KDFParameters?
        var wrappedSecret: [UInt8]
        var createdAt: Int64

        var slot: KeySlot {
            KeySlot(id: id, kind: kind, keeper: keeper, label: label, createdAt: Date(millisecondsSince1970: createdAt))
        }

        /// Every row that reads as a slot. A row that does not (a column of the wrong type, an
        /// unknown kind: an edit, or damage) is left out here, so it never stands in the way of
        /// the other routes, slot 0 first; `KeySlotStore.check` reports it.
        static func fetchAll(_ db: Database, path: String?) throws -> [SlotRecord] {
            guard try db.tableExists("key_slots") else { return [] }
            return try Row.fetchAll(db, sql: "SELECT * FROM key_slots ORDER BY slot_id").compactMap { row in
                let key = row.storedKey("slot_id")
                func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
                    try row.stored(column, table: "key_slots", row: key, path: path)
                }
                func optional<T: DatabaseValueConvertible>(_ column: String) throws -> T? {
                    try row.storedIfPresent(column, table: "key_slots", row: key, path: path)
                }
                do {
                    guard let kind = KeySlot.Kind(rawValue: try value("kind") as String) else { return nil }
                    let ops: Int64? = try optional("kdf_opslimit")
                    let mem: Int64? = try optional("kdf_memlimit")
                    let salt: Data? = try optional("kdf_salt")
                    let wrapped: Data = try value("wrapped_secret")
                    return SlotRecord(
                        id: try value("slot_id"), kind: kind, keeper: try optional("keeper"), label: try value("label"),
                        salt: salt.map { [UInt8]($0) },
                        cost: ops.flatMap { ops in mem.map { KDFParameters(opsLimit: UInt64(clamping: ops), memLimitBytes: UInt64(clamping: $0)) } },
                        wrappedSecret: [UInt8](wrapped), createdAt: try value("created_at"))
                } catch let error as VaultError where error.code == .damaged {
                    return nil
                }
            }
        }

        /// This slot's own key-encryption key from `credential`: a passphrase stretched at the
        /// slot's salt and cost, or a key's bytes. Nil when the credential is of another kind.
        func key(from credential: VaultCredential, path: String) throws -> KeyEncryptionKey? {
            switch (kind, credential) {
            case (.passphrase, .passphraseBytes(let passphrase)):
                guard let salt, let cost else {
                    throw VaultError(.damaged, "key slot \(id) of \(path) has an incomplete key-derivation record", path: path)
                }
                return try VaultKeys.derive(passphrase: passphrase, salt: salt, cost: cost, path: path)
            case (.key, .keyFile), (.key, .key):
                guard let (contents, owned) = try credential.keyBytes() else { return nil }
                defer { if owned { contents.wipe() } }
                return try KeyEncryptionKey.fromKeyFile(contents)
            default:
                return nil
            }
        }
    }

    /// Slot 0 (the header's credential, a key file's or a passphrase) followed by `slots`.
    static func keySlots(keyFile: Bool, createdAt: Date, slots: [SlotRecord]) -> [KeySlot] {
        let header = KeySlot(
            id: 0, kind: keyFile ? .key : .passphrase, keeper: nil, label: keyFile ? "the vault's key file" : "the vault's passphrase",
            createdAt: createdAt)
        return [header] + slots.map(\.slot)
    }

    /// Where a slot's sealed secret belongs: the vault and the slot.
    static func slotContext(vaultID: [UInt8], slot: Int64) -> SealContext {
        SealContext(vaultID: vaultID, table: "key_slots", column: "wrapped_secret", row: "\(slot)", version: "1")
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

    /// The current vault key and, while a key rotation is under way, the next one; and the slot
    /// that opened them (0: the header's own credential).
    static func unlockVaultKeys(
        _ meta: UnlockRecord, credential: VaultCredential, path: String
    ) throws -> (current: SymmetricKey, pending: SymmetricKey?, slot: Int64) {
        let (kek, slot) = try keyEncryptionKey(meta, credential: credential, path: path)
        defer { kek.wipe() }
        do {
            let current = try kek.unwrap(meta.wrappedVaultKey, id: meta.vaultKeyID, context: vaultKeyContext(vaultID: meta.vaultID, keyID: meta.vaultKeyID))
            guard let pendingID = meta.pendingVaultKeyID, let pendingWrapped = meta.pendingWrappedVaultKey else { return (current, nil, slot) }
            let pending = try kek.unwrap(pendingWrapped, id: pendingID, context: vaultKeyContext(vaultID: meta.vaultID, keyID: pendingID))
            return (current, pending, slot)
        } catch {
            throw VaultError(.damaged, "the credential is right but the vault key of \(path) does not open: the vault is damaged", path: path)
        }
    }

    /// Derives (or reads) the key-encryption key and proves it with the stored key check:
    /// exactly one key derivation. The header's own credential is tried first, then the slots of
    /// the credential's kind (at most one passphrase route exists: a vault never costs two
    /// derivations). Returns the header's key-encryption key and the slot that gave it. Throws
    /// `.wrongCredential` for a credential no route takes, naming the routes there are.
    static func keyEncryptionKey(_ meta: UnlockRecord, credential: VaultCredential, path: String) throws -> (KeyEncryptionKey, slot: Int64) {
        let wrong: String =
            switch credential {
            case .keyFile(let url): "wrong key file (\(url.path))"
            case .key(_, let source): "wrong key (from \(source))"
            case .passphraseBytes: "wrong passphrase"
            }
        switch credential {
        case .passphraseBytes(let passphrase):
            if meta.kekKind == "argon2id13" {
                guard let salt = meta.salt, let cost = meta.cost else {
                    throw VaultError(.damaged, "\(path) has an incomplete key-derivation record", path: path)
                }
                let kek = try derive(passphrase: passphrase, salt: salt, cost: cost, path: path)
                guard (try? kek.matches(keyCheck: meta.keyCheck)) == true else {
                    kek.wipe()
                    throw VaultError(.wrongCredential, "\(wrong) for \(path)\(meta.otherRoutes())", path: path)
                }
                return (kek, 0)
            }
            guard meta.kekKind == "keyfile" else { throw VaultError(.damaged, "\(path) names an unknown key-encryption method", path: path) }
            guard let slot = meta.slots.first(where: { $0.kind == .passphrase }) else {
                throw VaultError(.wrongCredential, "\(path) is unlocked with a key file, not a passphrase\(meta.otherRoutes())", path: path)
            }
            guard let slotKey = try slot.key(from: credential, path: path) else {
                throw VaultError(.wrongCredential, "\(wrong) for \(path)\(meta.otherRoutes())", path: path)
            }
            defer { slotKey.wipe() }
            guard let kek = try open(slot, under: slotKey, meta, path: path) else {
                throw VaultError(.wrongCredential, "\(wrong) for \(path)\(meta.otherRoutes())", path: path)
            }
            return (kek, slot.id)
        case .keyFile, .key:
            guard let (contents, owned) = try credential.keyBytes() else { throw VaultError(.invalidCredential, "no key", path: path) }
            defer { if owned { contents.wipe() } }
            let candidate = try KeyEncryptionKey.fromKeyFile(contents)
            if meta.kekKind == "keyfile", (try? candidate.matches(keyCheck: meta.keyCheck)) == true { return (candidate, 0) }
            defer { candidate.wipe() }
            guard meta.kekKind == "keyfile" || meta.kekKind == "argon2id13" else {
                throw VaultError(.damaged, "\(path) names an unknown key-encryption method", path: path)
            }
            for slot in meta.slots where slot.kind == .key {
                if let kek = try open(slot, under: candidate, meta, path: path) { return (kek, slot.id) }
            }
            if meta.kekKind == "argon2id13", !meta.slots.contains(where: { $0.kind == .key }) {
                throw VaultError(.wrongCredential, "\(path) is unlocked with a passphrase, not a key file\(meta.otherRoutes())", path: path)
            }
            throw VaultError(.wrongCredential, "\(wrong) for \(path)\(meta.otherRoutes())", path: path)
        }
    }

    /// The header's key-encryption key from `slot`, opened with the slot's own key; nil when that
    /// key is not the slot's. A slot that opens but holds a secret the header's key check refuses
    /// was put back from an older state of the vault (or made by another vault): `.damaged`.
    private static func open(_ slot: SlotRecord, under slotKey: KeyEncryptionKey, _ meta: UnlockRecord, path: String) throws -> KeyEncryptionKey? {
        let kek: KeyEncryptionKey
        do {
            kek = try KeyEncryptionKey.openSecret(slot.wrappedSecret, under: slotKey, context: slotContext(vaultID: meta.vaultID, slot: slot.id))
        } catch {
            return nil
        }
        guard (try? kek.matches(keyCheck: meta.keyCheck)) == true else {
            kek.wipe()
            throw VaultError(
                .damaged,
                "key slot \(slot.id) of \(path) opens with this key but holds a secret the vault header does not know (the slot was put back from an older copy, or the header was): unlock with another route\(meta.otherRoutes(than: slot.id)), or restore the vault from a backup",
                path: path)
        }
        return kek
    }
}
