import Foundation
import GRDB
import Logging
import Synchronization
import VaultCrypto
import VaultSync

/// An open, unlocked vault: one SQLite file holding accounts, tokens, sessions, devices
/// and notifications, with every secret and personal field sealed.
///
/// ```swift
/// let url = VaultLocation.defaultURL()
/// let vault = try Vault.create(at: url, credential: .passphrase("correct horse battery staple"))
/// // Accounts, tokens and sessions are written through the session layer (VaultSession):
/// let service = SessionService(vault: vault, oauth: OAuthClient())
/// try await service.signIn(NewAccount(issuer: "https://id.example", subject: "alice", client: client), tokens: tokens)
/// let token = try await service.validAccessToken()
/// vault.close()
/// ```
///
/// Several processes may open the same vault at once. Every connection uses WAL,
/// `synchronous=FULL`, `secure_delete=ON`, foreign keys and a busy timeout, and every
/// write runs in a `BEGIN IMMEDIATE` transaction.
public final class Vault: Sendable {
    /// The vault file.
    public let url: URL
    /// This vault's random id (hex), bound into every sealed value.
    public let vaultID: String
    /// The stable id of this install, used when registering this device with an account.
    public let deviceID: String

    /// The connections, keyring and read/write paths every store shares.
    let core: VaultCore

    init(url: URL, pool: DatabasePool, keyring: Keyring, deviceID: String, wroteWhileOpening: Bool, options: VaultOptions) {
        self.core = VaultCore(url: url, pool: pool, keyring: keyring, deviceID: deviceID, wroteWhileOpening: wroteWhileOpening, options: options)
        self.url = core.url
        self.vaultID = Digest.hex(keyring.vaultID)
        self.deviceID = deviceID
    }

    // MARK: - Stores

    /// The accounts, the active one, their credential hosts (see ``AccountStore``).
    public var accounts: AccountStore { core.accounts }
    /// The accounts' tokens (see ``TokenStore``).
    public var tokens: TokenStore { core.tokens }
    /// The accounts' sessions and session policies (see ``SessionStore``).
    public var sessions: SessionStore { core.sessions }
    /// The refresh leases and back-off state (see ``LeaseStore``).
    public var leases: LeaseStore { core.leases }
    /// This install's and the other devices' registrations (see ``DeviceStore``).
    public var devices: DeviceStore { core.devices }
    /// The notification history (see ``NotificationStore``).
    public var notifications: NotificationStore { core.notifications }
    /// Sessions moved to and from other vaults (see ``TransferStore``).
    public var transfers: TransferStore { core.transfers }
    /// Verification, backup, key rotation, credential change, checkpoints (see ``MaintenanceStore``).
    public var maintenance: MaintenanceStore { core.maintenance }
    /// The event log every process sees (see ``EventStore``).
    public var events: EventStore { core.events }
    /// The ways in besides the vault's own credential (see ``KeySlotStore``).
    public var keySlots: KeySlotStore { core.keySlots }

    /// The key slot this vault was unlocked with: 0 for its own credential (the header's), else
    /// a slot of ``keySlots``.
    public var unlockedBy: Int64 { core.unlockedSlot }

    // MARK: - Create

    /// Creates a new vault at `url` (mode 0600, parent directory created 0700 if missing).
    ///
    /// Refuses an existing file, a directory other users can write, an empty passphrase and
    /// a key-derivation cost below OWASP's floor (19 MiB, 2 passes).
    public static func create(at url: URL, credential: VaultCredential, options: VaultOptions = VaultOptions()) throws -> Vault {
        let (kek, salt) = try VaultKeys.newKeyEncryptionKey(credential, cost: options.kdf, path: url.path)
        defer { kek.wipe() }
        let kdfColumns: (salt: [UInt8]?, ops: Int64?, mem: Int64?) =
            salt.map { ($0, Int64(options.kdf.opsLimit), Int64(options.kdf.memLimitBytes)) } ?? (nil, nil, nil)

        // The real file (symbolic links in the directory resolved) is the one checked and opened.
        let url = try VaultFile.createEmpty(url)
        do {
            let pool = try VaultConnection.openPool(url, options: options)
            let vaultID = try Random.bytes(16)
            let deviceID = UUID().uuidString.lowercased()
            let vaultKeyID: UInt32 = 1
            let vaultKey = try SymmetricKey.generate(id: vaultKeyID)
            let keyring = try Keyring(vaultID: vaultID, vaultKey: vaultKey)
            let vault = Vault(url: url, pool: pool, keyring: keyring, deviceID: deviceID, wroteWhileOpening: true, options: options)
            let integrity = vault.core.integrity
            try Migrator(migrations: options.migrations).migrate(
                pool, now: options.clock.now(), path: url.path, logger: options.logger, completing: vault.maintenance.completeMigration)
            let wrapped = try kek.wrap(vaultKey, context: VaultKeys.vaultKeyContext(vaultID: vaultID, keyID: vaultKeyID))
            let check = try kek.keyCheck()
            try pool.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO vault_meta (singleton, vault_id, device_id, created_at, kek_kind, kdf_salt,
                            kdf_opslimit, kdf_memlimit, key_check, vault_key_id, wrapped_vault_key, next_key_id)
                        VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        Data(vaultID), deviceID, options.clock.now().millisecondsSince1970, credential.kind,
                        kdfColumns.salt.map { Data($0) }, kdfColumns.ops, kdfColumns.mem,
                        Data(check), Int64(vaultKeyID), Data(wrapped), Int64(vaultKeyID) + 1,
                    ])
                // Write 1: the header, and the state committing to it and to nothing else yet.
                try integrity.beginCounting(at: 1, manifest: VaultManifest(), commitments: VaultCommitments(), db)
                try integrity.newCommitmentKey(db)
                try integrity.authenticate(.vaultMeta, where: "singleton = 1", [], db)
                try integrity.finishWrite(db)
            }
            options.logger.info("created vault", metadata: ["path": "\(url.path)", "kek": "\(credential.kind)"])
            return vault
        } catch {
            VaultFile.remove(url)
            throw VaultError.storage(error, while: "creating the vault", path: url.path)
        }
    }

    // MARK: - Open

    /// Opens and unlocks the vault at `url`, migrating it first if it is older than this build
    /// (after copying it next to itself, see ``VaultOptions/backupBeforeMigrating``).
    ///
    /// Nothing is written before the credential is proven right and the schema is known:
    /// a wrong passphrase, another kind of file, a damaged file or a newer schema leaves the
    /// file byte-for-byte unchanged. A wrong passphrase costs exactly one key derivation.
    public static func open(at url: URL, credential: VaultCredential, options: VaultOptions = VaultOptions()) throws -> Vault {
        try open(at: url, options: options) { _ in credential }
    }

    /// Opens and unlocks the vault at `url` with the credential `credential` picks once it knows
    /// how the vault is unlocked and at which schema it is: one read-only pass over the file where
    /// ``inspect(at:options:)`` followed by ``open(at:credential:options:)`` takes two.
    ///
    /// `credential` is called after the file passed every check ``open(at:credential:options:)``
    /// makes (header, location, mode, application id, schema not newer than this build) and before
    /// any key derivation. An error it throws is rethrown as it is, with nothing written: a tool
    /// that must not migrate refuses a vault with ``VaultOpeningFacts/pendingMigrations`` there.
    ///
    /// ```swift
    /// let vault = try Vault.open(at: url) { facts in
    ///     guard facts.pendingMigrations.isEmpty else { throw MyToolError.needsMigration }
    ///     return facts.unlockMethod == .keyFile ? .keyFile(keyURL) : try .passphrase(askPassphrase())
    /// }
    /// ```
    public static func open(
        at url: URL, options: VaultOptions = VaultOptions(),
        credential choose: (VaultOpeningFacts) throws -> VaultCredential
    ) throws -> Vault {
        // The real file (symbolic links resolved) is the one checked and opened.
        let url = try VaultFile.checkedLocation(url)
        let path = url.path

        let migrator = Migrator(migrations: options.migrations)
        let unlocked: (meta: VaultKeys.UnlockRecord, keys: (current: SymmetricKey, pending: SymmetricKey?, slot: Int64), pending: [Migration])
        do {
            unlocked = try VaultConnection.withReadOnlyQueue(url, options: options) { queue in
                let (schema, meta) = try queue.read { db -> (Migrator.Status, VaultKeys.UnlockRecord?) in
                    try VaultFile.checkApplicationID(db, path: path)
                    let schema = try migrator.status(db, path: path)
                    return (schema, try VaultKeys.UnlockRecord.fetch(db, path: path))
                }
                guard let meta else {
                    throw VaultError(.damaged, "\(path) has no vault header row: the vault was never finished or was edited", path: path)
                }
                let facts = VaultOpeningFacts(
                    url: url, unlockMethod: meta.unlockMethod, schemaVersion: schema.recordedVersion,
                    latestSchemaVersion: migrator.latestVersion,
                    pendingMigrations: schema.pending.map { SchemaStep(version: $0.version, name: $0.name) }, vaultID: Digest.hex(meta.vaultID),
                    keySlots: meta.keySlots)
                let credential: VaultCredential
                do { credential = try choose(facts) } catch { throw CredentialChoiceFailure(error: error) }
                let vaultKeys = try VaultKeys.unlockVaultKeys(meta, credential: credential, path: path)
                if !schema.pending.isEmpty, options.backupBeforeMigrating, !meta.isFresh {
                    do {
                        try VaultFile.backupBeforeMigrating(queue, of: url, fromVersion: migrator.latestVersion - schema.pending.count, options: options)
                    } catch {
                        vaultKeys.current.wipe()
                        vaultKeys.pending?.wipe()
                        throw error
                    }
                }
                return (meta, vaultKeys, schema.pending)
            }
        } catch let failure as CredentialChoiceFailure {
            throw failure.error
        }
        let (meta, vaultKeys, pending) = unlocked
        var pool: DatabasePool?
        do {
            let keyring = try Keyring(vaultID: meta.vaultID, vaultKey: vaultKeys.current, pendingVaultKey: vaultKeys.pending)
            let integrity = RowIntegrity(keyring: keyring, path: path)
            let opened = try VaultConnection.openPool(url, options: options)
            pool = opened
            // A slot opened the vault: it must be one the vault wrote and still has (not edited,
            // nor put back after its removal), checked before anything is written.
            if vaultKeys.slot != 0 { try opened.read { db in try KeySlotStore.check(db, integrity: integrity, path: path) } }
            if !pending.isEmpty {
                // Only for the migrations' Swift half (sealing needs the account keys); the value
                // returned is made once the header is checked.
                let migrating = Vault(
                    url: url, pool: opened, keyring: keyring, deviceID: meta.deviceID,
                    wroteWhileOpening: true, options: options)
                try keyring.acceptingFormat1 {
                    try migrator.migrate(
                        opened, now: options.clock.now(), path: path, logger: options.logger,
                        completing: migrating.maintenance.completeMigration)
                }
            }
            // The header names the active account and this install's device id: checked before
            // either is used. Its unlock columns are authenticated by the key check and the
            // wrapped key's own seal as well.
            let deviceID = try opened.read { db -> String in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM vault_meta WHERE singleton = 1") else {
                    throw VaultError(.damaged, "\(path) has no vault header row", path: path)
                }
                try integrity.check(row, in: .vaultMeta, db)
                // The state it was written with: a header put back from an older copy is refused here.
                if let commitment = try integrity.commitment(db) {
                    try integrity.checkHeader(StoredRecord(row, table: .vaultMeta, path: path), against: commitment)
                }
                return try row.stored("device_id", table: "vault_meta", row: "1", path: path)
            }
            options.logger.debug("opened vault", metadata: ["path": "\(path)"])
            let vault = Vault(
                url: url, pool: opened, keyring: keyring, deviceID: deviceID,
                wroteWhileOpening: !pending.isEmpty, options: options)
            vault.core.unlockedSlot = vaultKeys.slot
            return vault
        } catch {
            vaultKeys.current.wipe()
            vaultKeys.pending?.wipe()
            try? pool?.close()
            throw VaultError.storage(error, while: "opening the vault", path: path)
        }
    }

    /// Drops every key from memory (zeroed) and closes the database connections.
    /// Any later call on this value throws ``VaultError/Code/closed``.
    public func close() {
        core.close()
    }

    // MARK: - Lock and unlock

    /// Drops every key that seals or opens a value from memory (zeroed) but keeps the file
    /// open. Reads and writes of sealed values throw ``VaultError/Code/closed`` until
    /// ``unlock(with:)``. The row authenticator stays (it opens nothing), so a locked vault
    /// still records and checks its sessions' state.
    public func lock() {
        // The commitments' hasher is opened with the vault key, which goes now; a locked
        // process still records events (their commitments need it), so it is loaded first.
        let integrity = core.integrity
        _ = try? core.read("loading the commitment key") { db in try integrity.commitmentHasher(db) }
        core.keyring.wipeSealingKeys()
        core.logger.info("locked vault", metadata: ["path": "\(core.path)"])
    }

    /// Whether the keys are out of memory (locked or closed).
    public var isLocked: Bool { core.keyring.isWiped }

    /// Loads the vault key again from the passphrase or key file. One key derivation;
    /// a wrong credential throws ``VaultError/Code/wrongCredential`` and changes nothing.
    public func unlock(with credential: VaultCredential) throws {
        let meta: VaultKeys.UnlockRecord
        do {
            guard let record = try core.withOpenPool({ pool in try pool.read { try VaultKeys.UnlockRecord.fetch($0, path: core.path) } }) else {
                throw VaultError(.damaged, "\(core.path) has no vault header row", path: core.path)
            }
            meta = record
        } catch {
            throw VaultError.storage(error, while: "reading the key record", path: core.path)
        }
        let keys = try VaultKeys.unlockVaultKeys(meta, credential: credential, path: core.path)
        core.keyring.replaceVaultKey(keys.current)
        core.keyring.setPendingVaultKey(keys.pending)
        if keys.slot != 0 {
            // Checked with the keys just opened (another process may have rotated them): a slot
            // that fails leaves the vault locked again.
            do {
                try core.read("checking the key slots") { db in try core.keySlots.check(db) }
            } catch {
                core.keyring.wipeSealingKeys()
                throw error
            }
        }
        core.unlockedSlot = keys.slot
        core.logger.info("unlocked vault", metadata: ["path": "\(core.path)"])
    }

    /// Whether the keys this process holds still open the vault: false once another process
    /// replaced them (`rotate-key`, or `passwd` without keeping the keys). Decided by the vault
    /// header row's MAC, not by the key id it names: an edited or put-back row can make this
    /// answer false (the caller locks), never true for keys the vault no longer uses. One point
    /// read. Throws `.closed` when the keys were wiped, `.damaged` for a row that fails its MAC.
    public func holdsCurrentKey() throws -> Bool {
        _ = try core.keyring.vaultKey()
        let integrity = core.integrity
        return try core.read("reading the key record") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM vault_meta WHERE singleton = 1") else {
                throw VaultError(.damaged, "\(core.path) has no vault header row", path: core.path)
            }
            switch try integrity.verdict(row, in: .vaultMeta, db) {
            case .authentic: return true
            case .unknownKey: return false
            case .changed(let columns, let reason):
                throw VaultError(
                    .damaged, "vault_meta.\(columns.joined(separator: ", vault_meta.")) \(reason): \(core.path) is damaged or was tampered with",
                    path: core.path)
            }
        }
    }

    /// The source of the times this vault writes (``VaultOptions/clock``).
    public var wallClock: WallClock { core.clock }

    /// Whether ``close()`` was called.
    public var isClosed: Bool { core.isClosed }
}

// MARK: - Change stamp

extension Vault {
    /// A number that changes whenever a connection (in this or another process, this vault's
    /// own writes included) commits to the vault: SQLite's `PRAGMA data_version` on a read-only
    /// connection of its own, which never waits for a writer. Cheap enough to check on every
    /// call; compare two readings to know whether to reload.
    public func dataVersion() throws -> Int64 { try core.dataVersion() }

    /// A value that changes whenever the vault's content may have changed: a commit by any
    /// connection (this or another process; SQLite's `data_version`) or a write through this
    /// vault (counted as well, so a write that has not committed yet when the stamp is taken
    /// still moves the next one). Take it *before* reading what you cache; while it stays
    /// equal, what you read is still what the file holds. It never waits for a writer.
    public func changeStamp() throws -> VaultChangeStamp { try core.changeStamp() }
}

// MARK: - A vault file that is not open

extension Vault {
    /// Reads the plain facts of the vault at `url` on a read-only connection, without any
    /// credential. Writes nothing.
    ///
    /// Throws what ``open(at:credential:options:)`` throws before unlocking: `.notFound`,
    /// `.notAVault`, `.damaged`, `.unsafeLocation`, `.schemaTooNew`, `.migrationChecksumMismatch`.
    public static func inspect(at url: URL, options: VaultOptions = VaultOptions()) throws -> VaultInspection {
        try VaultFile.inspect(at: url, options: options)
    }

    /// Reads every plain record of the vault at `url` on a read-only connection, without a
    /// credential. Writes nothing. `includeNotifications: false` skips the notification history.
    ///
    /// A plain column holding a value of the wrong type (a hand-edited file) is
    /// ``VaultError/Code/damaged``, naming the table, row and column; a sealed column is only
    /// reported present or absent, whatever it holds (``verify(depth:progress:)`` judges those).
    public static func metadata(
        at url: URL, options: VaultOptions = VaultOptions(),
        includeNotifications: Bool = true
    ) throws -> VaultMetadata {
        try VaultFile.metadata(at: url, options: options, includeNotifications: includeNotifications)
    }

    /// The credential-helper bindings the vault at `url` says it has, read without the key
    /// (one read-only pass; nothing derived, nothing written), not authenticated: see
    /// ``CredentialBinding``. A git or docker helper asks this first, so a request for a host
    /// the vault binds nothing to is answered "not found" without a passphrase.
    public static func inspectCredentialBindings(at url: URL, options: VaultOptions = VaultOptions()) throws -> [CredentialBinding] {
        try VaultFile.credentialBindings(at: url, options: options)
    }

    /// Brings the vault at `url` to this build's schema, as ``open(at:credential:options:)``
    /// does, but on its own and reporting each step: proves the credential (one key
    /// derivation), copies the vault next to itself (`vault.db.vN-TIMESTAMP.bak`, 0600), then
    /// applies each pending step in its own immediate transaction.
    ///
    /// A wrong credential, a newer schema or a damaged file leaves the vault untouched; a step
    /// that fails rolls back alone (``VaultError/Code/migrationFailed``). To see what would be
    /// applied without writing, read ``VaultInspection/pendingMigrations`` from ``inspect(at:options:)``.
    ///
    /// ```swift
    /// let report = try Vault.migrate(at: url, credential: .passphrase(pass))
    /// print("schema \(report.fromVersion) → \(report.toVersion), backup: \(report.backup?.path ?? "none")")
    /// ```
    ///
    /// `progress` counts steps: the backup, then each migration.
    public static func migrate(
        at url: URL, credential: VaultCredential, options: VaultOptions = VaultOptions(),
        progress: ((MaintenanceProgress) -> Void)? = nil
    ) throws -> MigrationReport {
        try VaultFile.migrate(at: url, credential: credential, options: options, progress: progress)
    }

    /// Checkpoints the vault at `url` without unlocking it (a checkpoint needs no key), after
    /// the checks ``inspect(at:options:)`` makes; waits for readers up to
    /// ``VaultOptions/busyTimeout``. What `vault compact` runs.
    ///
    /// ```swift
    /// guard try Vault.compact(at: url).isComplete else { print("still in use; try again later"); return }
    /// ```
    public static func compact(at url: URL, options: VaultOptions = VaultOptions()) throws -> WALCheckpoint {
        try VaultFile.compact(at: url, options: options)
    }

    /// Like ``backup(to:progress:)`` for a vault that is not open: no credential is needed,
    /// since the copy holds only what the file holds. The source is checked as
    /// ``inspect(at:options:)`` checks it.
    public static func backup(
        of url: URL, to destination: URL, options: VaultOptions = VaultOptions(),
        progress: ((MaintenanceProgress) -> Void)? = nil
    ) throws {
        try VaultFile.backup(of: url, to: destination, options: options, progress: progress)
    }
}

/// What ``Vault/open(at:options:credential:)`` knows about a vault when it asks for the
/// credential: nothing secret, and nothing derived yet.
public struct VaultOpeningFacts: Sendable, Hashable {
    /// The vault file.
    public var url: URL
    /// How the vault is unlocked, with the key-derivation cost for a passphrase.
    public var unlockMethod: VaultUnlockMethod
    /// The schema version the vault is at.
    public var schemaVersion: Int
    /// The schema version this build writes.
    public var latestSchemaVersion: Int
    /// The migrations opening would apply, oldest first; empty when the vault is up to date.
    public var pendingMigrations: [SchemaStep]
    /// The vault's id (hex), as ``VaultInspection/vaultID``: what a keeper finds its key by.
    public var vaultID: String = ""
    /// The ways in (slot 0, the header's credential, first), as the file says before anything is
    /// unlocked: not authenticated yet. A tool asks a keeper these name before a prompt.
    public var keySlots: [KeySlot] = []
}
