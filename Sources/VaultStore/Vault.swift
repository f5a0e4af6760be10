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
    /// The event log every process sees (see ``EventStore``).
    public var events: EventStore { core.events }

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
            let integrity = vault.integrity
            try Migrator(migrations: options.migrations).migrate(
                pool, now: options.clock.now(), path: url.path, logger: options.logger, completing: vault.completeMigration)
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
                try integrity.authenticate(.vaultMeta, where: "singleton = 1", [], db)
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
        let unlocked: (meta: VaultKeys.UnlockRecord, keys: (current: SymmetricKey, pending: SymmetricKey?), pending: [Migration])
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
                    pendingMigrations: schema.pending.map { SchemaStep(version: $0.version, name: $0.name) })
                let credential: VaultCredential
                do { credential = try choose(facts) } catch { throw CredentialChoiceFailure(error: error) }
                let vaultKeys = try VaultKeys.unlockVaultKeys(meta, credential: credential, path: path)
                if !schema.pending.isEmpty, options.backupBeforeMigrating, !meta.isFresh {
                    do {
                        try backup(queue, of: url, fromVersion: migrator.latestVersion - schema.pending.count, options: options)
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
            if !pending.isEmpty {
                // Only for the migrations' Swift half (sealing needs the account keys); the value
                // returned is made once the header is checked.
                let migrating = Vault(
                    url: url, pool: opened, keyring: keyring, deviceID: meta.deviceID,
                    wroteWhileOpening: true, options: options)
                try migrator.migrate(
                    opened, now: options.clock.now(), path: path, logger: options.logger,
                    completing: migrating.completeMigration)
            }
            // The header names the active account and this install's device id: checked before
            // either is used. Its unlock columns are authenticated by the key check and the
            // wrapped key's own seal as well.
            let deviceID = try opened.read { db -> String in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM vault_meta WHERE singleton = 1") else {
                    throw VaultError(.damaged, "\(path) has no vault header row", path: path)
                }
                try integrity.check(row, in: .vaultMeta, db)
                return try row.stored("device_id", table: "vault_meta", row: "1", path: path)
            }
            options.logger.debug("opened vault", metadata: ["path": "\(path)"])
            return Vault(
                url: url, pool: opened, keyring: keyring, deviceID: deviceID,
                wroteWhileOpening: !pending.isEmpty, options: options)
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

    /// The source of the times this vault writes (``VaultOptions/clock``).
    public var wallClock: WallClock { core.clock }

    /// Whether ``close()`` was called.
    public var isClosed: Bool { core.isClosed }

    // MARK: - Credential

    /// Replaces the passphrase or key file. Only the vault key is re-wrapped: no data is rewritten.
    /// A new passphrase is stretched at `cost`, by default the ``VaultOptions/kdf`` the vault was opened with.
    public func changeCredential(to credential: VaultCredential, cost: KDFParameters? = nil) throws {
        let cost = cost ?? core.kdf
        let vaultKey = try keyring.vaultKey()
        if try keyRotationPending() {
            throw VaultError(.keyRotationUnfinished, "a key rotation is under way: finish it before changing the credential", path: path)
        }
        let (kek, salt) = try VaultKeys.newKeyEncryptionKey(credential, cost: cost, path: path)
        defer { kek.wipe() }
        let wrapped = try kek.wrap(vaultKey, context: VaultKeys.vaultKeyContext(vaultID: keyring.vaultID, keyID: vaultKey.id))
        let check = try kek.keyCheck()
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
        }
        logger.info("changed vault credential", metadata: ["path": "\(path)", "kek": "\(credential.kind)"])
    }
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

/// While the areas move out into their stores, the code still written as `extension Vault`
/// reaches the core as they do.
extension Vault: VaultArea {}

// MARK: - Internals

extension Vault {
    /// Copies the vault next to itself with SQLite's online backup, mode 0600. Returns the copy.
    @discardableResult
    static func backup(_ source: DatabaseQueue, of url: URL, fromVersion: Int, options: VaultOptions) throws -> URL {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withYear, .withMonth, .withDay, .withTime]
        let stamp = formatter.string(from: options.clock.now()).replacingOccurrences(of: ":", with: "")
        // Two processes migrating the same vault, or a retry within the same second, must not
        // fail on each other's backup: take the next free name (…-2.bak, …-3.bak).
        let base = url.path + ".v\(fromVersion)-\(stamp)"
        var backupURL = URL(fileURLWithPath: base + ".bak")
        for attempt in 2... {
            do {
                try VaultFile.createEmpty(backupURL)
                break
            } catch let error as VaultError where error.code == .alreadyExists && attempt <= 100 {
                backupURL = URL(fileURLWithPath: base + "-\(attempt).bak")
            }
        }
        try fill(backupURL, from: source, sourcePath: url.path, action: "backing up before migration to \(backupURL.path)")
        options.logger.info("backed up vault before migrating", metadata: ["backup": "\(backupURL.path)"])
        return backupURL
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
}
