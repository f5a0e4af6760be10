import Foundation
import GRDB

/// How the vault's connections are opened: the same pragmas on every connection, WAL, a
/// durable writer, and SQLite's verdicts on a file mapped to ``VaultError`` codes.
enum VaultConnection {
    static func configuration(readonly: Bool, options: VaultOptions) -> Configuration {
        var config = Configuration()
        config.readonly = readonly
        config.foreignKeysEnabled = true
        config.label = "CredentialVault"
        config.busyMode = .callback(busyWait(upTo: options.busyTimeout))
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

    /// SQLite's busy handler for the vault's connections: while another connection holds the
    /// lock a statement needs, wait and try again, up to `timeout` in all, then fail with
    /// `SQLITE_BUSY`. SQLite's own (`busy_timeout`) waits 1, 2, 5, 10, 15, 20 ms and more
    /// between tries, so a write that meets another process's write (one commit: a fraction of a
    /// millisecond, its fsync included) waited 8 ms after three tries; four processes taking a
    /// refresh lease at once spent 16 ms there. Here the waits start at 50 µs and double up to
    /// 2 ms (``busyDelay(afterTries:)``). It runs on the thread that runs the statement: the
    /// writer's are on the vault's I/O threads; a read-only WAL reader (the stamp's, inline on
    /// the cooperative pool) meets a held lock only during WAL recovery, as with SQLite's own.
    static func busyWait(upTo timeout: Duration) -> Database.BusyCallback {
        let configured = microseconds(timeout)
        return { tries in
            // A statement run under `waiting(atMost:)` (a checkpoint that must not wait long).
            let limit = busyLimit.map(microseconds) ?? configured
            let delay = busyDelay(afterTries: tries)
            guard busyWaited(beforeTry: tries) + delay <= limit else { return false }
            usleep(UInt32(delay))
            return true
        }
    }

    /// Runs `body` (statements on a vault connection, on this thread) with its busy handler
    /// waiting at most `wait` in all instead of the vault's ``VaultOptions/busyTimeout``. The
    /// handler itself stays: `PRAGMA busy_timeout` would replace it with SQLite's, and setting
    /// it back would leave the connection with none (the pragma reads 0 under a custom handler).
    static func waiting<T>(atMost wait: Duration, _ body: () throws -> T) rethrows -> T {
        try $busyLimit.withValue(wait, operation: body)
    }

    /// The override ``waiting(atMost:_:)`` sets, read by the busy handler on the thread that
    /// runs the statement.
    @TaskLocal private static var busyLimit: Duration?

    private static func microseconds(_ duration: Duration) -> UInt64 {
        // Saturated: a timeout of years is "wait", never an overflow that stops the process.
        let (seconds, attoseconds) = max(duration, .zero).components
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000)
        let (total, carry) = whole.addingReportingOverflow(UInt64(attoseconds) / 1_000_000_000_000)
        return overflow || carry ? .max : total
    }

    /// The wait, in µs, before try `tries + 1` of a statement that found its lock held.
    static func busyDelay(afterTries tries: Int) -> UInt64 {
        tries >= 6 ? 2000 : min(2000, UInt64(50) << UInt64(max(0, tries)))
    }

    /// The waits, in µs, before `tries` tries (the sum of the ``busyDelay(afterTries:)`` before it).
    static func busyWaited(beforeTry tries: Int) -> UInt64 {
        let ramp = (0..<min(max(0, tries), 6)).reduce(UInt64(0)) { $0 + busyDelay(afterTries: $1) }
        return ramp + UInt64(max(0, tries - 6)) * 2000
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
}

/// Carries what a credential chooser threw past ``VaultConnection/classify(_:path:)``, to be rethrown unchanged.
struct CredentialChoiceFailure: Error {
    let error: any Error
}
