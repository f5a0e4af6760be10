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
}

/// Carries what a credential chooser threw past ``VaultConnection/classify(_:path:)``, to be rethrown unchanged.
struct CredentialChoiceFailure: Error {
    let error: any Error
}
