import Foundation
import GRDB
import Logging
import VaultCrypto

/// The vault's key slots (schema 16): more ways in than its own credential, each with a key of
/// its own, added and removed without touching a value the vault holds.
///
/// ```swift
/// let slot = try vault.keySlots.add(.key(keeperKey, source: "the desktop keyring"),
///                                   unlocking: .passphrase(pass), keeper: "secret-service",
///                                   label: "the desktop keyring")
/// // Later, from a desktop session: no passphrase.
/// let vault = try Vault.open(at: url, credential: .key(keeperKey, source: "the desktop keyring"))
/// print(vault.unlockedBy)   // slot.id
/// ```
///
/// A slot seals the header's derived secret, not the vault key: `rotate-key` changes no slot,
/// and `passwd` (``MaintenanceStore/changeCredential(from:to:cost:replacingKeys:slotKeys:progress:)``)
/// re-seals every slot with the keys it is given for them.
public struct KeySlotStore: VaultArea {
    let core: VaultCore

    /// Slot 0 (the header's credential) and every slot, each row checked against its MAC and
    /// all of them against the vault's commitment: a slot edited, deleted or put back is
    /// `.damaged` here.
    public func list() throws -> [KeySlot] {
        try read("reading the key slots") { db in
            guard let meta = try VaultKeys.UnlockRecord.fetch(db, path: path) else {
                throw VaultError(.damaged, "\(path) has no vault header row", path: path)
            }
            try check(db)
            return meta.keySlots
        }
    }

    /// Checks every `key_slots` row against its MAC and the rows against the commitment.
    func check(_ db: Database) throws { try Self.check(db, integrity: integrity, path: path) }

    /// ``check(_:)`` with the row integrity of keys not installed yet (a vault being opened).
    static func check(_ db: Database, integrity: RowIntegrity, path: String) throws {
        guard try db.tableExists("key_slots") else { return }
        let statement = try db.cachedStatement(sql: "SELECT * FROM key_slots ORDER BY slot_id")
        let layout = RowIntegrity.layout(of: statement, in: .keySlots)
        var records: [StoredRecord] = []
        let cursor = try DatabaseValue.fetchCursor(statement)
        while try cursor.next() != nil {
            records.append(StoredRecord(values: StoredRow(current: statement), layout: layout, table: .keySlots, path: path))
        }
        for record in records { try integrity.check(record, db) }
        try integrity.checkCollection(records, .keySlots, account: "", db)
    }

    /// Adds a way in: `new` (a passphrase, stretched at `cost`; or a key file's or a keeper's 32
    /// bytes) opens the vault from now on, as `current` does. `current` proves the caller may
    /// (one key derivation for a passphrase); `keeper` names who holds a key (`secret-service`,
    /// `systemd-creds`; nil for a key file), `label` says what it is ("/media/usb/vault.key").
    ///
    /// Refused (nothing changed): a second passphrase (a vault has one, so a wrong one costs one
    /// derivation: change that one instead), a key that already opens the vault, a vault before
    /// schema 16, slots that fail their check. A key rotation under way does not matter: it
    /// re-wraps the vault key under the same secret the slot seals.
    @discardableResult
    public func add(
        _ new: VaultCredential, unlocking current: VaultCredential, keeper: String? = nil, label: String, cost: KDFParameters? = nil
    ) throws -> KeySlot {
        let meta = try unlockRecord()
        if case .passphraseBytes = new {
            guard keeper == nil else { throw VaultError(.invalidArgument, "a keeper holds a key, not a passphrase", path: path) }
            if meta.kekKind == "argon2id13" || meta.slots.contains(where: { $0.kind == .passphrase }) {
                throw VaultError(
                    .invalidArgument, "\(path) has a passphrase already (a vault has one): change that one instead (a credential change)", path: path)
            }
        }
        let (kek, _) = try VaultKeys.keyEncryptionKey(meta, credential: current, path: path)
        defer { kek.wipe() }
        if let (opens, _) = try? VaultKeys.keyEncryptionKey(meta, credential: new, path: path) {
            opens.wipe()
            throw VaultError(.alreadyExists, "that key already opens \(path)", path: path)
        }
        let cost = cost ?? core.kdf
        let (slotKey, salt) = try VaultKeys.newKeyEncryptionKey(new, cost: cost, path: path)
        defer { slotKey.wipe() }
        let now = clock.now().millisecondsSince1970
        let id = try write("adding a key slot") { db -> Int64 in
            try Self.requireUnchanged(meta, db, path: path)
            try check(db)
            // Never an id a removed slot had (AUTOINCREMENT's counter is not authenticated: one
            // edited to the end of the range refuses, it never wraps).
            let highest = try Int64.fetchOne(db, sql: "SELECT max(seq) FROM sqlite_sequence WHERE name = 'key_slots'") ?? 0
            let (id, overflow) = max(highest, try Int64.fetchOne(db, sql: "SELECT max(slot_id) FROM key_slots") ?? 0).addingReportingOverflow(1)
            guard !overflow else { throw VaultError(.damaged, "\(path) has no key slot id left: its slot counter was edited", path: path) }
            let sealed = try kek.sealSecret(under: slotKey, context: VaultKeys.slotContext(vaultID: meta.vaultID, slot: id))
            try db.execute(
                sql: """
                    INSERT INTO key_slots (slot_id, kind, keeper, label, kdf_salt, kdf_opslimit, kdf_memlimit, wrapped_secret, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    id, new.kind, keeper, label, salt.map { Data($0) },
                    salt == nil ? nil : Int64(cost.opsLimit), salt == nil ? nil : Int64(cost.memLimitBytes),
                    Data(sealed), now,
                ])
            try integrity.authenticate(.keySlots, where: "slot_id = ?", [id], db)
            return id
        }
        logger.info("added key slot", metadata: ["path": "\(path)", "slot": "\(id)", "keeper": "\(keeper ?? "-")"])
        return KeySlot(id: id, kind: KeySlot.Kind(rawValue: new.kind) ?? .key, keeper: keeper, label: label, createdAt: Date(millisecondsSince1970: now))
    }

    /// Removes slot `id`: its key no longer opens the vault (a copy of the file made before still
    /// opens with it). Slot 0 is the vault's own credential and stays (`passwd` changes it). The
    /// slot this vault was unlocked with is refused unless `evenIfUnlockedByIt`: the caller may
    /// hold no other way in.
    public func remove(_ id: Int64, evenIfUnlockedByIt: Bool = false) throws {
        guard id != 0 else {
            throw VaultError(.invalidArgument, "slot 0 is the vault's own credential: it can be changed (a credential change), not removed", path: path)
        }
        if id == core.unlockedSlot, !evenIfUnlockedByIt {
            throw VaultError(.invalidArgument, "\(path) was unlocked with slot \(id): unlock it another way to remove that slot", path: path)
        }
        try write("removing a key slot") { db in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM key_slots WHERE slot_id = ?", arguments: [id]) == 1 else {
                throw VaultError(.recordNotFound, "\(path) has no key slot \(id)", path: path)
            }
            try check(db)
            try integrity.delete(from: .keySlots, where: "slot_id = ?", [id], db)
        }
        logger.info("removed key slot", metadata: ["path": "\(path)", "slot": "\(id)"])
    }

    /// The header and slots as the file holds them now.
    func unlockRecord() throws -> VaultKeys.UnlockRecord {
        let (record, hasSlots) = try read("reading the key record") { db in
            (try VaultKeys.UnlockRecord.fetch(db, path: path), try db.tableExists("key_slots"))
        }
        guard let record else { throw VaultError(.damaged, "\(path) has no vault header row", path: path) }
        guard hasSlots else {
            throw VaultError(.invalidArgument, "\(path) predates key slots (schema 16): open it with this build first, which migrates it", path: path)
        }
        return record
    }

    /// Refuses a write computed from a header another process has changed since (`passwd`).
    static func requireUnchanged(_ meta: VaultKeys.UnlockRecord, _ db: Database, path: String) throws {
        let check = try Data.fetchOne(db, sql: "SELECT key_check FROM vault_meta WHERE singleton = 1")
        guard check == Data(meta.keyCheck) else {
            throw VaultError(.staleGeneration, "the vault's credential changed in another process meanwhile; try again", path: path)
        }
    }
}

extension VaultCore {
    var keySlots: KeySlotStore { KeySlotStore(core: self) }
}
