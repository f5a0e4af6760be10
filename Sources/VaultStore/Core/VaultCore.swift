import Foundation
import GRDB
import Logging
import Synchronization
import VaultCrypto
import VaultSync

/// What every store of one open vault shares: the file's connections, the keyring, row
/// integrity, *the* read and write paths and the change stamp.
///
/// Internal: tool authors reach the vault through ``Vault`` and its stores (``Vault/tokens``,
/// ``Vault/sessions``…), each a small value over this core. Every read and write of every store
/// goes through ``read(_:_:)`` and ``write(_:_:)`` here (GRDB keeps `Database` apart from its
/// access policy the same way: `SerializedDatabase` under `DatabasePool`).
final class VaultCore: Sendable {
    /// The vault file (symbolic links resolved).
    let url: URL
    /// `url.path`, kept: every read names the file in its errors, and `URL.path` decodes the URL each time.
    let path: String
    /// The stable id of this install.
    let deviceID: String
    let pool: DatabasePool
    let keyring: Keyring
    let logger: Logger
    let clock: WallClock
    /// The Argon2id cost for a new passphrase (``VaultOptions/kdf``).
    let kdf: KDFParameters
    /// Counts write transactions run through this core (see ``changeStamp()``: a write still
    /// in flight when a stamp is taken moves the next stamp even before it commits).
    /// ``close()`` checkpoints only when it is not 0, so every write goes through ``write(_:_:)``.
    let localWrites = Atomic<Int64>(0)
    /// The key slot the vault was last unlocked with (0: the header's own credential).
    private let unlockedSlotValue = Atomic<Int64>(0)
    var unlockedSlot: Int64 {
        get { unlockedSlotValue.load(ordering: .relaxed) }
        set { unlockedSlotValue.store(newValue, ordering: .relaxed) }
    }

    /// Closed by ``close()``, which waits for the reads and writes in flight (see `CloseGate`).
    /// Locking drops the keys but keeps the file usable for plain metadata.
    private let gate = CloseGate()
    /// Whether this vault wrote to the file outside ``write(_:_:)`` (created it, migrated it), so
    /// ``close()`` must fold the WAL back into the file even if ``localWrites`` is still 0.
    private let wroteWhileOpening: Bool
    /// The options the vault was opened with (the stamp connection is opened with them).
    private let options: VaultOptions
    /// The read-only connection ``dataVersion()`` asks, opened on first use: its own, so a
    /// stamp never queues behind this process's writes on the pool's writer (which can wait a
    /// whole busy timeout for another process's lock) and every commit, this process's own
    /// included, moves it.
    private let stampConnection = Locked<DatabaseQueue?>(nil)

    init(url: URL, pool: DatabasePool, keyring: Keyring, deviceID: String, wroteWhileOpening: Bool, options: VaultOptions) {
        self.url = url
        self.path = url.path
        self.wroteWhileOpening = wroteWhileOpening
        self.pool = pool
        self.keyring = keyring
        self.deviceID = deviceID
        self.logger = options.logger
        self.clock = options.clock
        self.kdf = options.kdf
        self.options = options
    }

    /// Row MACs for this vault (see ``RowIntegrity``).
    var integrity: RowIntegrity { RowIntegrity(keyring: keyring, path: path) }

    // MARK: - Reads and writes

    /// Runs `body` with the pool while the vault is open; ``close()`` waits for it to return.
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
                let opened = try DatabaseQueue(path: path, configuration: VaultConnection.configuration(readonly: true, options: options))
                queue = opened
                return opened
            }
            return try queue.inDatabase(body)
        }
    }

    /// A deferred read transaction on the stamp connection, begun and ended with statements it
    /// keeps prepared: for a read small enough to make where the stamp is taken (see
    /// ``TokenStore/accessRevision(for:)``). Like the stamp, it never waits for a writer.
    func readOnStamp<T>(_ action: String, _ body: (Database) throws -> T) throws -> T {
        do {
            return try withStampConnection { db in try Self.inPreparedRead(db, body) }
        } catch {
            throw VaultError.storage(error, while: action, path: path)
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

    /// ``read(_:_:)`` for the token path: the same deferred read transaction, begun and ended
    /// with statements the connection keeps prepared. GRDB's `read` prepares `BEGIN` and
    /// `COMMIT` anew on every call (about 25k instructions each, a fifth of a cold token
    /// request's read); a token request that misses its cache reads on every API call.
    func readPrepared<T>(_ action: String, _ body: (Database) throws -> T) throws -> T {
        try withOpenPool { pool in
            do {
                return try pool.unsafeRead { db in try Self.inPreparedRead(db, body) }
            } catch {
                throw VaultError.storage(error, while: action, path: path)
            }
        }
    }

    /// `body` in a deferred read transaction on `db`, begun and ended with statements the
    /// connection keeps prepared.
    private static func inPreparedRead<T>(_ db: Database, _ body: (Database) throws -> T) throws -> T {
        try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
        do {
            let result = try body(db)
            try db.cachedStatement(sql: "COMMIT").execute()
            return result
        } catch {
            // Never leave the reader inside the transaction (the body failed, or COMMIT did):
            // GRDB stops the process when a read leaves one open.
            if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK").execute() }
            if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
            throw error
        }
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction.
    func write<T>(_ action: String, _ body: (Database) throws -> T) throws -> T {
        try withOpenPool { pool in
            // Counted after the transaction ends (committed or not), so a reader that took a
            // ``changeStamp()`` before reading can never cache pre-write data under a post-write stamp.
            defer { localWrites.add(1, ordering: .releasing) }
            do {
                let integrity = self.integrity
                return try pool.write { db in
                    let result = try body(db)
                    try integrity.finishWrite(db)  // the header records the counter and manifest
                    return result
                }
            } catch let refusal as SessionTransferError {
                throw refusal  // a refusal decided inside the transaction, which rolled back
            } catch {
                throw VaultError.storage(error, while: action, path: path)
            }
        }
    }

    // MARK: - Change stamp

    /// See ``Vault/dataVersion()``.
    func dataVersion() throws -> Int64 {
        do {
            return try withStampConnection { db in try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) ?? 0 }
        } catch let error as VaultError {
            throw error
        } catch {
            throw VaultError.storage(error, while: "reading data_version", path: path)
        }
    }

    /// See ``Vault/changeStamp()``.
    func changeStamp() throws -> VaultChangeStamp {
        // Counter first: a write finishing between the two readings makes the stamp older, never newer.
        let writes = localWrites.load(ordering: .acquiring)
        return VaultChangeStamp(dataVersion: try dataVersion(), localWrites: writes)
    }

    // MARK: - Close

    /// Whether ``close()`` was called.
    var isClosed: Bool { gate.isClosed }

    /// Drops every key (zeroed) and closes the connections, once the reads and writes in
    /// flight on other threads are done; none starts after.
    func close() {
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
        // so that what this vault wrote ends up in the file and no longer in the WAL (with
        // `secure_delete`, no removed value is left in either). Best effort: another process may
        // be reading, in which case its own close finishes the job.
        //
        // A vault that wrote nothing skips it: the WAL then holds at most the empty transaction
        // GRDB commits when it opens a pool on an empty WAL (no row, no secret), and the next
        // open finds the WAL non-empty and writes nothing. Checkpointing it here would cost two
        // to four fsyncs on every read-only open, `vault token` included.
        // Waits at most a second for another process's read transaction (not the whole busy
        // timeout: every writing command closes, and a long reader elsewhere would add ten
        // seconds to each); a checkpoint that cannot finish is left to the next one.
        if wroteWhileOpening || localWrites.load(ordering: .acquiring) > 0 {
            let outcome = try? pool.writeWithoutTransaction { try WALCheckpoint.run($0, waitingAtMost: .seconds(1)) }
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
}
