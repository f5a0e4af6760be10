import Foundation
import GRDB

/// How a checkpoint of the vault's write-ahead log ended.
///
/// A completed checkpoint (`PRAGMA wal_checkpoint(TRUNCATE)`) has copied every committed
/// change into the database file and emptied the WAL: with `secure_delete`, nothing removed
/// is left in either. Another connection's read transaction, in this process or another,
/// stops it: SQLite may not overwrite pages that reader may still read, nor reset a log it
/// is reading. What was removed then stays on disk (old pages in the file, old frames in the
/// WAL) until a later checkpoint completes: the next close of a vault value that wrote, or
/// ``Vault/compact(at:options:)`` (`vault compact`).
///
/// ```swift
/// if case .blockedByReader = try vault.maintenance.attemptCheckpoint(waitingAtMost: .seconds(1)) {
///     print("another process is reading; run `vault compact` later")
/// }
/// ```
public enum WALCheckpoint: Sendable, Hashable {
    /// Everything is in the database file and the WAL is empty.
    case completed
    /// A reader kept the checkpoint from finishing: the WAL held `walFrames` frames, of which
    /// `checkpointedFrames` reached the database file.
    case blockedByReader(walFrames: Int, checkpointedFrames: Int)
    /// The checkpoint failed for another reason (I/O, a closed vault): the message.
    case failed(String)

    /// Whether the checkpoint completed.
    public var isComplete: Bool { self == .completed }
}

extension WALCheckpoint: CustomStringConvertible {
    /// What happened, in one line.
    public var description: String {
        switch self {
        case .completed:
            "checkpoint complete: everything is in the database file and the WAL is empty"
        case .blockedByReader(let frames, let copied):
            "checkpoint blocked by another connection's read transaction (\(copied) of \(frames) WAL frames copied)"
        case .failed(let message):
            "checkpoint failed: \(message)"
        }
    }
}

// MARK: - Checkpointing

extension MaintenanceStore {
    /// Runs `PRAGMA wal_checkpoint(TRUNCATE)`, waiting at most `wait` for readers in other
    /// connections to finish (SQLite's busy handler; nil: the vault's ``VaultOptions/busyTimeout``),
    /// and says how it ended instead of throwing when a reader blocks it. Throws only when the
    /// vault is closed.
    ///
    /// ```swift
    /// let outcome = try vault.maintenance.attemptCheckpoint(waitingAtMost: .zero)
    /// ```
    public func attemptCheckpoint(waitingAtMost wait: Duration? = nil) throws -> WALCheckpoint {
        try core.attemptCheckpoint(waitingAtMost: wait)
    }

    /// Copies the WAL into the database file and truncates the WAL to zero bytes.
    ///
    /// With `secure_delete=ON`, deleted rows are overwritten in the database pages, so after
    /// this returns no removed value remains in either file. Waits (busy timeout) for readers
    /// in other processes; throws ``VaultError/Code/storage`` when they keep the WAL busy.
    /// ``attemptCheckpoint(waitingAtMost:)`` reports that instead of throwing.
    public func checkpoint() throws { try core.checkpoint() }
}

// MARK: - Checkpointing a vault that is not open

extension VaultFile {
    /// See ``Vault/compact(at:options:)``.
    static func compact(at url: URL, options: VaultOptions = VaultOptions()) throws -> WALCheckpoint {
        let url = try VaultFile.checkedLocation(url)
        _ = try VaultFile.readPlain(at: url, options: options) { _ in () }
        let pool: DatabasePool
        do {
            pool = try VaultConnection.openPool(url, options: options)
        } catch {
            throw VaultConnection.classify(error, path: url.path)
        }
        defer { try? pool.close() }
        do {
            return try pool.writeWithoutTransaction { db in try WALCheckpoint.run(db, waitingAtMost: nil) }
        } catch {
            return .failed(VaultError.storage(error, while: "checkpointing", path: url.path).message)
        }
    }
}

extension WALCheckpoint {
    /// One TRUNCATE checkpoint on `db` (a vault connection), its busy handler waiting at most
    /// `wait` meanwhile (nil: the vault's busy timeout).
    static func run(_ db: Database, waitingAtMost wait: Duration?) throws -> WALCheckpoint {
        let checkpoint = { try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        // busy, log, checkpointed: busy is 1 when a reader (or writer) kept it from finishing.
        guard let row = try wait.map({ try VaultConnection.waiting(atMost: $0, checkpoint) }) ?? checkpoint() else {
            return .failed("SQLite returned no checkpoint result")
        }
        let busy: Int = row[0] ?? 1
        guard busy != 0 else { return .completed }
        return .blockedByReader(walFrames: row[1] ?? -1, checkpointedFrames: row[2] ?? -1)
    }
}

extension VaultCore {
    /// See ``MaintenanceStore/attemptCheckpoint(waitingAtMost:)``.
    func attemptCheckpoint(waitingAtMost wait: Duration? = nil) throws -> WALCheckpoint {
        try withOpenPool { pool in
            do {
                return try pool.writeWithoutTransaction { db in try WALCheckpoint.run(db, waitingAtMost: wait) }
            } catch {
                return .failed(VaultError.storage(error, while: "checkpointing", path: path).message)
            }
        }
    }

    /// See ``MaintenanceStore/checkpoint()``.
    func checkpoint() throws {
        switch try attemptCheckpoint() {
        case .completed:
            return
        case .blockedByReader:
            throw VaultError(.storage, "the checkpoint could not finish: another process is reading the vault; try again", path: path)
        case .failed(let message):
            throw VaultError(.storage, message, path: path)
        }
    }
}
