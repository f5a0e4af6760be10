import Foundation
import GRDB
import Logging
import VaultCrypto

/// How far a key rotation has come.
public struct KeyRotationProgress: Sendable, Hashable {
    public enum Phase: String, Sendable, Hashable {
        /// New keys made (or found, when resuming).
        case prepared
        /// Sealed values re-sealed in bounded transactions.
        case resealing
        /// The new keys replaced the old ones.
        case finished
    }

    public var phase: Phase
    /// Rows looked at so far, and in all (every row of every table with sealed columns).
    public var rowsDone: Int
    public var rowsTotal: Int
}

/// What a finished key rotation did.
public struct KeyRotationReport: Sendable, Hashable {
    /// Whether it continued a rotation an earlier run had started.
    public var resumed: Bool
    /// How many sealed values were re-sealed by this run.
    public var valuesResealed: Int
    /// The id of the new vault key.
    public var vaultKeyID: UInt32
}

// MARK: - Key rotation

extension MaintenanceStore {
    /// Replaces the vault key and every account's data key, re-sealing every sealed value and
    /// authenticating every row again (its MAC key derives from the vault key) in transactions
    /// of at most `batchSize` rows. A row whose MAC does not match stops the rotation
    /// (``VaultError/Code/damaged``): re-authenticating it would make a tampered value look genuine.
    ///
    /// Resumable: the new keys are stored (wrapped) before any value is re-sealed, every
    /// value names the key that sealed it, and both keys open values until the rotation
    /// finishes. After a crash, run it again with the same credential and it carries on; at
    /// every point every value opens. Other processes that have the vault open must unlock
    /// again afterwards (their old vault key no longer unwraps the new data keys).
    ///
    /// ```swift
    /// let report = try vault.maintenance.rotateKeys(credential: .keyFile(keyURL)) { progress in
    ///     print("\(progress.rowsDone)/\(progress.rowsTotal)")
    /// }
    /// ```
    @discardableResult
    public func rotateKeys(
        credential: VaultCredential, batchSize: Int = 500,
        progress: (KeyRotationProgress) -> Void = { _ in }
    ) throws -> KeyRotationReport {
        try rotateKeys(credential: credential, batchSize: batchSize, stopAfterBatches: nil, progress: progress)
    }

    /// The same, stopping (as a crash would) after `stopAfterBatches` re-seal transactions. For tests.
    func rotateKeys(
        credential: VaultCredential, batchSize: Int, stopAfterBatches: Int?,
        progress: (KeyRotationProgress) -> Void
    ) throws -> KeyRotationReport {
        guard batchSize > 0 else { throw VaultError(.invalidArgument, "batch size must be positive", path: path) }
        let (newVaultKey, resumed) = try prepareRotation(credential: credential)
        let total = try read("counting values to re-seal") { db in
            try Self.rotatedTables.reduce(0) { count, table in
                count + (try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.name) t WHERE \(Self.stragglers(table))") ?? 0)
            }
        }
        progress(KeyRotationProgress(phase: .prepared, rowsDone: 0, rowsTotal: total))
        var resealed = 0
        var done = 0
        var batches = 0
        for table in Self.rotatedTables {
            var after: Int64 = .min
            while true {
                if let stopAfterBatches, batches >= stopAfterBatches {
                    throw VaultError(.storage, "key rotation stopped after \(batches) batches (test hook)", path: path)
                }
                let (count, last, changed) = try write("re-sealing \(table.name)") { db in
                    try self.resealBatch(table, after: after, limit: batchSize, db)
                }
                batches += 1
                guard let last else { break }
                after = last
                done += count
                resealed += changed
                progress(KeyRotationProgress(phase: .resealing, rowsDone: done, rowsTotal: total))
            }
        }
        try finishRotation(newVaultKey: newVaultKey)
        progress(KeyRotationProgress(phase: .finished, rowsDone: total, rowsTotal: total))
        logger.info("rotated vault keys", metadata: ["resealed": "\(resealed)", "resumed": "\(resumed)"])
        return KeyRotationReport(resumed: resumed, valuesResealed: resealed, vaultKeyID: newVaultKey.id)
    }

    /// Whether a key rotation was started and not finished.
    public func keyRotationPending() throws -> Bool {
        try read("reading rotation state") { db in
            try db.storedValue(
                "SELECT pending_vault_key_id FROM vault_meta WHERE singleton = 1",
                table: "vault_meta", column: "pending_vault_key_id", row: "1", path: self.path, as: Int64.self) != nil
        }
    }

    /// Makes (or, when resuming, reloads) the next vault key and each account's next data key.
    private func prepareRotation(credential: VaultCredential) throws -> (SymmetricKey, resumed: Bool) {
        let meta = try read("reading the key record") { db -> VaultKeys.UnlockRecord in
            guard let meta = try VaultKeys.UnlockRecord.fetch(db, path: self.path) else {
                throw VaultError(.damaged, "\(self.path) has no vault header row", path: self.path)
            }
            return meta
        }
        guard meta.vaultKeyID == (try keyring.vaultKey()).id else {
            throw VaultError.keyChanged(path: path)
        }
        let (kek, _) = try VaultKeys.keyEncryptionKey(meta, credential: credential, path: path)
        defer { kek.wipe() }
        if let pendingID = meta.pendingVaultKeyID, let wrapped = meta.pendingWrappedVaultKey {
            let key: SymmetricKey
            do {
                key = try kek.unwrap(wrapped, id: pendingID, context: VaultKeys.vaultKeyContext(vaultID: meta.vaultID, keyID: pendingID))
            } catch {
                throw VaultError(.damaged, "the next vault key of an interrupted rotation does not open: the vault is damaged", path: path)
            }
            keyring.setPendingVaultKey(key)
            try write("preparing account keys") { db in try self.prepareAccountKeys(under: key, db) }
            return (key, true)
        }
        let key = try write("preparing the key rotation") { db -> SymmetricKey in
            let key = try SymmetricKey.generate(id: self.allocateKeyID(db))
            let wrapped = try kek.wrap(key, context: VaultKeys.vaultKeyContext(vaultID: meta.vaultID, keyID: key.id))
            try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
                try db.execute(
                    sql: "UPDATE vault_meta SET pending_vault_key_id = ?, pending_wrapped_vault_key = ? WHERE singleton = 1",
                    arguments: [Int64(key.id), Data(wrapped)])
            }
            try self.prepareAccountKeys(under: key, db)
            return key
        }
        keyring.setPendingVaultKey(key)
        return (key, false)
    }

    /// Gives every account without one a next data key wrapped by `vaultKey`.
    private func prepareAccountKeys(under vaultKey: SymmetricKey, _ db: Database) throws {
        for row in try Row.fetchAll(db, sql: "SELECT account_id FROM accounts WHERE pending_data_key_id IS NULL") {
            let raw: String = try row.stored("account_id", table: "accounts", row: row.storedKey("account_id"), path: path)
            let account = AccountID(rawValue: raw)
            let key = try SymmetricKey.generate(id: allocateKeyID(db))
            let wrapped = try vaultKey.wrap(key, context: dataKeyContext(account: account, keyID: key.id))
            try integrity.rewrite(.accounts, matching: ["account_id": raw], db) {
                try db.execute(
                    sql: "UPDATE accounts SET pending_data_key_id = ?, pending_wrapped_data_key = ? WHERE account_id = ?",
                    arguments: [Int64(key.id), Data(wrapped), raw])
            }
        }
    }

    /// The tables a rotation goes through, row by row: every authenticated one but the header and the state row (every write authenticates it again),
    /// which ``finishRotation(newVaultKey:)`` rewrites last.
    static let rotatedTables = AuthenticatedTable.all.filter { $0 != .vaultMeta && $0 != .vaultState }

    /// The rows of `table` (aliased `t`) holding a value not sealed with its account's next
    /// data key, or not authenticated with the next vault key. A sealed value's key id, like a
    /// row MAC's, is bytes 2–5: hex characters 3–10.
    static func stragglers(_ table: AuthenticatedTable) -> String {
        let nextVaultKey = "(SELECT printf('%08X', m.pending_vault_key_id) FROM vault_meta m WHERE m.singleton = 1)"
        var conditions = ["(t.\(RowMAC.column) IS NULL OR substr(hex(t.\(RowMAC.column)), 3, 8) IS NOT \(nextVaultKey))"]
        if let sealed = SealedColumns.all.first(where: { $0.table == table.name }) {
            let next = "(SELECT printf('%08X', a.pending_data_key_id) FROM accounts a WHERE a.account_id = t.account_id)"
            conditions += sealed.columns.map { "(t.\($0) IS NOT NULL AND substr(hex(t.\($0)), 3, 8) IS NOT \(next))" }
        }
        return "(" + conditions.joined(separator: " OR ") + ")"
    }

    /// Re-seals, with each account's next data key, the values of up to `limit` rows after
    /// `rowid` that still use another key, and authenticates those rows with the next vault key
    /// (each row checked first). Returns the rows changed, the last rowid (nil when none was
    /// left) and how many values were re-sealed.
    private func resealBatch(_ table: AuthenticatedTable, after rowid: Int64, limit: Int, _ db: Database) throws -> (Int, Int64?, Int) {
        let rowids = try Int64.fetchAll(
            db, sql: "SELECT t.rowid FROM \(table.name) t WHERE t.rowid > ? AND \(Self.stragglers(table)) ORDER BY t.rowid LIMIT ?",
            arguments: [rowid, limit])
        let sealed = SealedColumns.all.first { $0.table == table.name }
        var changed = 0
        for rowKey in rowids {
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(table.name) WHERE rowid = ?", arguments: [rowKey]) else { continue }
            var assignments: [String] = []
            var arguments: [(any DatabaseValueConvertible)?] = []
            // An event of the whole vault (no account) holds nothing sealed.
            if let sealed, row.holdsValue("account_id") {
                // Every read names its place when the value has the wrong type (a hand-edited file).
                let key = row.storedKey(sealed.rowColumn)
                func value<T: DatabaseValueConvertible>(_ column: String, as type: T.Type = T.self) throws -> T {
                    try row.stored(column, table: sealed.table, row: key, path: path)
                }
                let account = AccountID(rawValue: try value("account_id"))
                let rowName = key
                let version = try sealed.versionColumn.map { "\(try value($0, as: Int64.self))" } ?? ""
                let target = try dataKey(for: account, db)
                for column in sealed.columns {
                    guard let blob = try row.storedIfPresent(column, table: sealed.table, row: key, path: path, as: Data.self) else { continue }
                    guard (try? SealedBlob(parsing: [UInt8](blob)).keyID) != target.id else { continue }
                    guard let plain = try open(blob, table: sealed.table, column: column, account: account, row: rowName, version: version, db) else {
                        continue
                    }
                    assignments.append("\(column) = ?")
                    arguments.append(try seal(plain, with: target, table: sealed.table, column: column, account: account, row: rowName, version: version))
                }
            }
            try integrity.rewrite(table, where: "rowid = ?", [rowKey], db) {
                guard !assignments.isEmpty else { return }
                try db.execute(
                    sql: "UPDATE \(table.name) SET \(assignments.joined(separator: ", ")) WHERE rowid = ?",
                    arguments: StatementArguments(arguments + [rowKey]))
            }
            changed += assignments.count
        }
        return (rowids.count, rowids.last, changed)
    }

    /// Swaps the next keys in, once no value sealed with an old key is left, in one transaction.
    private func finishRotation(newVaultKey: SymmetricKey) throws {
        try write("finishing the key rotation") { db in
            // Accounts added during the rotation keep their key, re-wrapped by the new vault key.
            let late = try Row.fetchAll(db, sql: "SELECT account_id FROM accounts WHERE pending_data_key_id IS NULL")
            for row in late {
                let account = AccountID(rawValue: try row.stored("account_id", table: "accounts", row: row.storedKey("account_id"), path: self.path))
                let current = try self.dataKey(for: account, db)
                let wrapped = try newVaultKey.wrap(current, context: self.dataKeyContext(account: account, keyID: current.id))
                try self.integrity.rewrite(.accounts, matching: ["account_id": account.rawValue], db) {
                    try db.execute(
                        sql: "UPDATE accounts SET pending_data_key_id = ?, pending_wrapped_data_key = ? WHERE account_id = ?",
                        arguments: [Int64(current.id), Data(wrapped), account.rawValue])
                }
            }
            // Values and rows written with an old key by other processes while the rotation ran.
            for table in Self.rotatedTables {
                var after = Int64.min
                while case let (_, last?, _) = try self.resealBatch(table, after: after, limit: 500, db) { after = last }
            }
            for row in try Row.fetchAll(db, sql: "SELECT account_id FROM accounts") {
                let account: String = try row.stored("account_id", table: "accounts", row: row.storedKey("account_id"), path: self.path)
                try self.integrity.rewrite(.accounts, matching: ["account_id": account], db) {
                    try db.execute(
                        sql: """
                            UPDATE accounts SET data_key_id = pending_data_key_id, wrapped_data_key = pending_wrapped_data_key,
                                pending_data_key_id = NULL, pending_wrapped_data_key = NULL WHERE account_id = ?
                            """, arguments: [account])
                }
            }
            let commitmentKey = try self.integrity.commitmentKey(resealedUnder: newVaultKey, db)
            try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
                try db.execute(
                    sql: """
                        UPDATE vault_meta SET vault_key_id = pending_vault_key_id, wrapped_vault_key = pending_wrapped_vault_key,
                            pending_vault_key_id = NULL, pending_wrapped_vault_key = NULL,
                            commitment_key = coalesce(?, commitment_key) WHERE singleton = 1
                        """, arguments: [commitmentKey])
            }
        }
        keyring.replaceVaultKey(newVaultKey)
        try core.checkpoint()
    }
}

/// What ``MaintenanceStore/changeCredential(from:to:cost:replacingKeys:slotKeys:progress:)`` did.
public struct CredentialChange: Sendable, Hashable {
    /// Whether the vault key and every account key were replaced first.
    public var keysReplaced: Bool
    /// How many sealed values were re-sealed with the new keys.
    public var valuesResealed: Int
}

// MARK: - Changing the credential

extension MaintenanceStore {
    /// Changes the passphrase or key file and, unless `replacingKeys` is false, replaces the
    /// vault key and every account key first (``rotateKeys(credential:batchSize:progress:)``).
    ///
    /// Re-wrapping alone leaves the vault key as it was: whoever has a copy of the file made
    /// before the change and the old passphrase unwraps that key, and with it every data key and
    /// every value written afterwards. Replacing the keys first leaves them nothing written after
    /// the change. A crash between the two steps leaves a vault that opens with the old
    /// credential and new keys; running it again finishes.
    ///
    /// ```swift
    /// let change = try vault.maintenance.changeCredential(from: .passphrase(old), to: .passphrase(new))
    /// print(change.keysReplaced ? "keys replaced" : "keys kept")
    /// ```
    @discardableResult
    public func changeCredential(
        from current: VaultCredential, to new: VaultCredential, cost: KDFParameters? = nil,
        replacingKeys: Bool = true, slotKeys: [Int64: VaultCredential] = [:],
        progress: (KeyRotationProgress) -> Void = { _ in }
    ) throws -> CredentialChange {
        // Every slot's key is checked before anything is written: a missing one refuses the change.
        let slots = try slotKeysToReseal(slotKeys)
        defer { for slot in slots { slot.key.wipe() } }
        var resealed = 0
        if replacingKeys {
            resealed = try rotateKeys(credential: current, progress: progress).valuesResealed
        }
        try changeCredential(to: new, cost: cost, resealing: slots)
        return CredentialChange(keysReplaced: replacingKeys, valuesResealed: resealed)
    }

    /// Replaces the passphrase or key file. Only the vault key is re-wrapped: no data is rewritten.
    /// A new passphrase is stretched at `cost`, by default the ``VaultOptions/kdf`` the vault was opened with.
    ///
    /// Every key slot (``KeySlotStore``) seals the old credential's secret, so each is sealed again
    /// with the new one, in the same transaction, under its own key: `slotKeys` gives each slot's
    /// key (by slot id). A slot without one, or with one that does not open it, refuses the change
    /// before anything is written; remove a slot whose key is gone first.
    public func changeCredential(to credential: VaultCredential, cost: KDFParameters? = nil, slotKeys: [Int64: VaultCredential] = [:]) throws {
        let slots = try slotKeysToReseal(slotKeys)
        defer { for slot in slots { slot.key.wipe() } }
        try changeCredential(to: credential, cost: cost, resealing: slots)
    }

    /// ``changeCredential(to:cost:slotKeys:)`` with each slot's key derived and proven already.
    private func changeCredential(
        to credential: VaultCredential, cost: KDFParameters?, resealing slots: [(record: VaultKeys.SlotRecord, key: KeyEncryptionKey)]
    ) throws {
        let cost = cost ?? core.kdf
        let vaultKey = try keyring.vaultKey()
        if try keyRotationPending() {
            throw VaultError(.keyRotationUnfinished, "a key rotation is under way: finish it before changing the credential", path: path)
        }
        if case .passphraseBytes = credential, slots.contains(where: { $0.record.kind == .passphrase }) {
            throw VaultError(
                .invalidArgument,
                "key slot \(slots.first { $0.record.kind == .passphrase }?.record.id ?? 0) of \(path) is a passphrase already (a vault has one): remove it first, or choose a key file",
                path: path)
        }
        let (kek, salt) = try VaultKeys.newKeyEncryptionKey(credential, cost: cost, path: path)
        defer { kek.wipe() }
        let wrapped = try kek.wrap(vaultKey, context: VaultKeys.vaultKeyContext(vaultID: keyring.vaultID, keyID: vaultKey.id))
        let check = try kek.keyCheck()
        let resealed = try slots.map { slot in
            (slot.record.id, try kek.sealSecret(under: slot.key, context: VaultKeys.slotContext(vaultID: keyring.vaultID, slot: slot.record.id)))
        }
        let isPassphrase = salt != nil
        try write("changing the credential") { db in
            try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
                try db.execute(
                    sql: """
                        UPDATE vault_meta SET kek_kind = ?, kdf_salt = ?, kdf_opslimit = ?, kdf_memlimit = ?,
                            key_check = ?, wrapped_vault_key = ? WHERE singleton = 1 AND vault_key_id = ?
                        """,
                    arguments: [
                        credential.kind, salt.map { Data($0) },
                        isPassphrase ? Int64(cost.opsLimit) : nil, isPassphrase ? Int64(cost.memLimitBytes) : nil,
                        Data(check), Data(wrapped), Int64(vaultKey.id),
                    ])
                guard db.changesCount == 1 else {
                    throw VaultError(.staleGeneration, "the vault key changed in another process during the credential change; try again", path: self.path)
                }
            }
            // The slots read before are the slots there are: one added meanwhile would be left
            // sealing the old secret.
            let ids = try Int64.fetchAll(db, sql: "SELECT slot_id FROM key_slots ORDER BY slot_id")
            guard ids == resealed.map(\.0) else {
                throw VaultError(.staleGeneration, "the key slots changed in another process during the credential change; try again", path: self.path)
            }
            for (id, sealed) in resealed {
                try self.integrity.rewrite(.keySlots, matching: ["slot_id": id], db) {
                    try db.execute(sql: "UPDATE key_slots SET wrapped_secret = ? WHERE slot_id = ?", arguments: [Data(sealed), id])
                }
            }
        }
        logger.info("changed vault credential", metadata: ["path": "\(path)", "kek": "\(credential.kind)", "slots": "\(resealed.count)"])
    }

    /// Each key slot with its own key-encryption key, derived from `slotKeys` and proven to open
    /// the slot to the header's secret, after every slot row passed its check. Throws naming the
    /// first slot without a key or whose key does not open it.
    private func slotKeysToReseal(_ slotKeys: [Int64: VaultCredential]) throws -> [(record: VaultKeys.SlotRecord, key: KeyEncryptionKey)] {
        let meta = try read("reading the key record") { db -> VaultKeys.UnlockRecord? in
            try core.keySlots.check(db)
            return try VaultKeys.UnlockRecord.fetch(db, path: self.path)
        }
        guard let meta else { throw VaultError(.damaged, "\(path) has no vault header row", path: path) }
        var keys: [(record: VaultKeys.SlotRecord, key: KeyEncryptionKey)] = []
        do {
            for slot in meta.slots {
                guard let credential = slotKeys[slot.id] else {
                    throw VaultError(
                        .invalidArgument,
                        "\(slot.slot) of \(path) must be sealed again with the new credential, and its key was not given: give it, or remove the slot first",
                        path: path)
                }
                guard let key = try slot.key(from: credential, path: path) else {
                    throw VaultError(.wrongCredential, "the key given for \(slot.slot) of \(path) is not of its kind", path: path)
                }
                keys.append((slot, key))
                let opened = try? KeyEncryptionKey.openSecret(
                    slot.wrappedSecret, under: key, context: VaultKeys.slotContext(vaultID: meta.vaultID, slot: slot.id))
                defer { opened?.wipe() }
                guard let opened, (try? opened.matches(keyCheck: meta.keyCheck)) == true else {
                    throw VaultError(.wrongCredential, "the key given for \(slot.slot) of \(path) does not open it", path: path)
                }
            }
        } catch {
            for entry in keys { entry.key.wipe() }
            throw error
        }
        return keys
    }
}
