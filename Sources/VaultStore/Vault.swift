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

    let pool: DatabasePool
    let keyring: Keyring
    /// Closed by ``close()``, which waits for the reads and writes in flight (see `CloseGate`).
    /// Locking drops the keys but keeps the file usable for plain metadata.
    private let gate = CloseGate()
    /// Counts write transactions run through this value (see ``changeStamp()``: a write still
    /// in flight when a stamp is taken moves the next stamp even before it commits).
    /// ``close()`` checkpoints only when it is not 0, so every write goes through ``write(_:_:)``.
    let localWrites = Atomic<Int64>(0)
    /// Whether this value wrote to the file outside ``write(_:_:)`` (created it, migrated it), so
    /// ``close()`` must fold the WAL back into the file even if ``localWrites`` is still 0.
    private let wroteWhileOpening: Bool
    let logger: Logger
    let clock: WallClock
    /// The Argon2id cost for a new passphrase (``VaultOptions/kdf``).
    let kdf: KDFParameters

    /// `url.path`, kept: every read names the file in its errors, and `URL.path` decodes the URL each time.
    let path: String
    /// The options the vault was opened with (the stamp connection is opened with them).
    private let options: VaultOptions
    /// The read-only connection ``dataVersion()`` asks, opened on first use: its own, so a
    /// stamp never queues behind this process's writes on the pool's writer (which can wait a
    /// whole busy timeout for another process's lock) and every commit, this value's own
    /// included, moves it.
    private let stampConnection = Locked<DatabaseQueue?>(nil)

    init(url: URL, pool: DatabasePool, keyring: Keyring, deviceID: String, wroteWhileOpening: Bool, options: VaultOptions) {
        self.url = url
        self.path = url.path
        self.wroteWhileOpening = wroteWhileOpening
        self.pool = pool
        self.keyring = keyring
        self.vaultID = Digest.hex(keyring.vaultID)
        self.deviceID = deviceID
        self.logger = options.logger
        self.clock = options.clock
        self.kdf = options.kdf
        self.options = options
    }

    // MARK: - Create

    /// Creates a new vault at `url` (mode 0600, parent directory created 0700 if missing).
    ///
    /// Refuses an existing file, a directory other users can write, an empty passphrase and
    /// a key-derivation cost below OWASP's floor (19 MiB, 2 passes).
    public static func create(at url: URL, credential: VaultCredential, options: VaultOptions = VaultOptions()) throws -> Vault {
        let (kek, salt) = try newKeyEncryptionKey(credential, cost: options.kdf, path: url.path)
        defer { kek.wipe() }
        let kdfColumns: (salt: [UInt8]?, ops: Int64?, mem: Int64?) =
            salt.map { ($0, Int64(options.kdf.opsLimit), Int64(options.kdf.memLimitBytes)) } ?? (nil, nil, nil)

        // The real file (symbolic links in the directory resolved) is the one checked and opened.
        let url = try VaultFile.createEmpty(url)
        do {
            let pool = try openPool(url, options: options)
            let vaultID = try Random.bytes(16)
            let deviceID = UUID().uuidString.lowercased()
            let vaultKeyID: UInt32 = 1
            let vaultKey = try SymmetricKey.generate(id: vaultKeyID)
            let keyring = try Keyring(vaultID: vaultID, vaultKey: vaultKey)
            let vault = Vault(url: url, pool: pool, keyring: keyring, deviceID: deviceID, wroteWhileOpening: true, options: options)
            let integrity = vault.integrity
            try Migrator(migrations: options.migrations).migrate(
                pool, now: options.clock.now(), path: url.path, logger: options.logger, completing: vault.completeMigration)
            let wrapped = try kek.wrap(vaultKey, context: vaultKeyContext(vaultID: vaultID, keyID: vaultKeyID))
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
        let unlocked: (meta: UnlockRecord, keys: (current: SymmetricKey, pending: SymmetricKey?), pending: [Migration])
        do {
            unlocked = try withReadOnlyQueue(url, options: options) { queue in
                let (schema, meta) = try queue.read { db -> (Migrator.Status, UnlockRecord?) in
                    try VaultFile.checkApplicationID(db, path: path)
                    let schema = try migrator.status(db, path: path)
                    return (schema, try UnlockRecord.fetch(db, path: path))
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
                let vaultKeys = try unlockVaultKeys(meta, credential: credential, path: path)
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
            let opened = try openPool(url, options: options)
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
        // Once the reads and writes in flight on other threads are done; none starts after.
        gate.close { closeWhileGated() }
    }

    private func closeWhileGated() {
        keyring.wipe()
        // First: the pool's reader must stay the last connection to close (see `openPool`).
        if let stamp = stampConnection.withLock({ queue -> DatabaseQueue? in
            defer { queue = nil }
            return queue
        }) {
            try? stamp.close()
        }
        // SQLite folds the WAL back into the file only when the last connection closes, and
        // the pool's last connection is a read-only reader that cannot. Checkpoint explicitly
        // so that what this value wrote ends up in the file and no longer in the WAL (with
        // `secure_delete`, no removed value is left in either). Best effort: another process may
        // be reading, in which case its own close finishes the job.
        //
        // A value that wrote nothing skips it: the WAL then holds at most the empty transaction
        // GRDB commits when it opens a pool on an empty WAL (no row, no secret), and the next
        // open finds the WAL non-empty and writes nothing. Checkpointing it here would cost two
        // to four fsyncs on every read-only open, `vault token` included.
        // Waits at most a second for another process's read transaction (not the whole busy
        // timeout: every writing command closes, and a long reader elsewhere would add ten
        // seconds to each); a checkpoint that cannot finish is left to the next one.
        if wroteWhileOpening || localWrites.load(ordering: .acquiring) > 0 {
            let outcome = try? pool.writeWithoutTransaction { try Self.checkpoint($0, waitingAtMost: .seconds(1)) }
            if let outcome, !outcome.isComplete {
                logger.info("the vault's WAL was not folded back on close: another process is reading", metadata: ["path": "\(path)"])
            }
        }
        do {
            try pool.close()
        } catch {
            logger.warning("closing the vault left connections open", metadata: ["error": "\(error)"])
        }
    }

    /// The source of the times this vault writes (``VaultOptions/clock``).
    public var wallClock: WallClock { clock }

    /// Whether ``close()`` was called.
    public var isClosed: Bool { gate.isClosed }

    // MARK: - Credential

    /// Replaces the passphrase or key file. Only the vault key is re-wrapped: no data is rewritten.
    /// A new passphrase is stretched at `cost`, by default the ``VaultOptions/kdf`` the vault was opened with.
    public func changeCredential(to credential: VaultCredential, cost: KDFParameters? = nil) throws {
        let cost = cost ?? kdf
        let vaultKey = try keyring.vaultKey()
        if try keyRotationPending() {
            throw VaultError(.keyRotationUnfinished, "a key rotation is under way: finish it before changing the credential", path: path)
        }
        let (kek, salt) = try Self.newKeyEncryptionKey(credential, cost: cost, path: path)
        defer { kek.wipe() }
        let wrapped = try kek.wrap(vaultKey, context: Self.vaultKeyContext(vaultID: keyring.vaultID, keyID: vaultKey.id))
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

// MARK: - Internals

extension Vault {
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
        case .keyFile(let keyFile):
            let contents = try VaultCredential.readKeyFile(keyFile)
            defer { contents.wipe() }
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
        case (.keyFile(let keyFile), "keyfile"):
            let contents = try VaultCredential.readKeyFile(keyFile)
            defer { contents.wipe() }
            kek = try KeyEncryptionKey.fromKeyFile(contents)
        case (.passphraseBytes, "keyfile"):
            throw VaultError(.wrongCredential, "\(path) is unlocked with a key file, not a passphrase", path: path)
        case (.keyFile, "argon2id13"):
            throw VaultError(.wrongCredential, "\(path) is unlocked with a passphrase, not a key file", path: path)
        default:
            throw VaultError(.damaged, "\(path) names an unknown key-encryption method", path: path)
        }
        guard try kek.matches(keyCheck: meta.keyCheck) else {
            kek.wipe()
            let what = meta.kekKind == "keyfile" ? "wrong key file" : "wrong passphrase"
            throw VaultError(.wrongCredential, "\(what) for \(path)", path: path)
        }
        return kek
    }

    static func configuration(readonly: Bool, options: VaultOptions) -> Configuration {
        var config = Configuration()
        config.readonly = readonly
        config.foreignKeysEnabled = true
        config.label = "CredentialVault"
        let timeout = options.busyTimeout.components
        config.busyMode = .timeout(TimeInterval(timeout.seconds) + TimeInterval(timeout.attoseconds) / 1e18)
        config.prepareDatabase { db in
            // Set explicitly on every connection: distributions compile SQLite with different defaults.
            try db.execute(
                sql: """
                    PRAGMA secure_delete = ON;
                    PRAGMA trusted_schema = OFF;
                    PRAGMA cell_size_check = ON;
                    """)
            if !db.configuration.readonly {
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
        }
        return config
    }

    static func openPool(_ url: URL, options: VaultOptions) throws -> DatabasePool {
        let pool = try DatabasePool(path: url.path, configuration: configuration(readonly: false, options: options))
        // Asked on a reader, which this opens. It also matters at close: GRDB closes the writer
        // first, so the last connection to close is this read-only one, which cannot checkpoint.
        // Were the writer last, SQLite would checkpoint on close (fsyncs) and delete the WAL, and
        // the next open would find no WAL and write again (see `close()`).
        let mode = try pool.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
        guard mode?.lowercased() == "wal" else {
            throw VaultError(.storage, "SQLite refused WAL mode for \(url.path) (got \(mode ?? "none"))", path: url.path)
        }
        // GRDB sets the writer to synchronous=NORMAL after the connection's own set-up (its WAL
        // default): a commit would then survive a crash of the process but not of the machine.
        // Every commit of the vault is durable: FULL again, on the one connection that writes.
        try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
        return pool
    }

    /// Runs `body` on a read-only connection that is closed afterwards.
    static func withReadOnlyQueue<T>(_ url: URL, options: VaultOptions, _ body: (DatabaseQueue) throws -> T) throws -> T {
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: url.path, configuration: configuration(readonly: true, options: options))
        } catch {
            throw classify(error, path: url.path)
        }
        defer { try? queue.close() }
        do {
            return try body(queue)
        } catch let failure as CredentialChoiceFailure {
            throw failure
        } catch {
            throw classify(error, path: url.path)
        }
    }

    /// Maps SQLite's verdicts on a file into the vault's error codes.
    static func classify(_ error: any Error, path: String) -> VaultError {
        if let vaultError = error as? VaultError { return vaultError }
        if let dbError = error as? DatabaseError {
            switch dbError.resultCode {
            case .SQLITE_NOTADB:
                return VaultError(.notAVault, "\(path) is not a vault (SQLite: not a database)", path: path)
            case .SQLITE_CORRUPT:
                return VaultError(.damaged, "\(path) is damaged (SQLite reports corruption); restore it from a backup", path: path)
            default: break
            }
        }
        return VaultError.storage(error, while: "reading \(path)", path: path)
    }

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

    // MARK: Reads and writes

    /// Runs `body` with the pool while this value is open; ``close()`` waits for it to return.
    /// Every use of `pool` after opening goes through here (or ``read(_:_:)``/``write(_:_:)``):
    /// a closed flag checked before the call cannot stop `close` from running in between.
    func withOpenPool<T>(_ body: (DatabasePool) throws -> T) throws -> T {
        guard let result = try gate.ifOpen({ try body(pool) }) else {
            throw VaultError(.closed, "the vault \(path) was closed; open it again", path: path)
        }
        return result
    }

    /// Runs `body` on the stamp connection (see `stampConnection`), opening it first if needed.
    func withStampConnection<T>(_ body: (Database) throws -> T) throws -> T {
        try withOpenPool { _ in
            let queue = try stampConnection.withLock { queue -> DatabaseQueue in
                if let queue { return queue }
                let opened = try DatabaseQueue(path: path, configuration: Self.configuration(readonly: true, options: options))
                queue = opened
                return opened
            }
            return try queue.inDatabase(body)
        }
    }

    func read<T>(_ action: String, _ body: (Database) throws -> T) throws -> T {
        try withOpenPool { pool in
            do {
                return try pool.read(body)
            } catch {
                throw VaultError.storage(error, while: action, path: path)
            }
        }
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction.
    func write<T>(_ action: String, _ body: (Database) throws -> T) throws -> T {
        try withOpenPool { pool in
            // Counted after the transaction ends (committed or not), so a reader that took a
            // ``changeStamp()`` before reading can never cache pre-write data under a post-write stamp.
            defer { localWrites.add(1, ordering: .releasing) }
            do {
                return try pool.write(body)
            } catch let refusal as SessionTransferError {
                throw refusal  // a refusal decided inside the transaction, which rolled back
            } catch {
                throw VaultError.storage(error, while: action, path: path)
            }
        }
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

/// Carries what a credential chooser threw past ``Vault/classify(_:path:)``, to be rethrown unchanged.
struct CredentialChoiceFailure: Error {
    let error: any Error
}
