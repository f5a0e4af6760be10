import Foundation
import GRDB

/// Another connection to a vault file that holds a read transaction open until ``finish()``:
/// what a slow reader in another process does to a checkpoint (it may neither overwrite the
/// pages that reader can still see nor reset the log it reads).
///
/// ```swift
/// let reader = try LongReader(url)      // snapshot taken now
/// _ = try vault.accounts.remove(id)       // its checkpoint is blocked
/// try reader.finish()
/// ```
public final class LongReader: Sendable {
    private let queue: DatabaseQueue

    /// Opens its own connection and starts a read transaction on it (a first read fixes the snapshot).
    public init(_ url: URL) throws {
        var configuration = Configuration()
        configuration.readonly = true
        // The point is the transaction left open between calls.
        configuration.allowsUnsafeTransactions = true
        queue = try DatabaseQueue(path: url.path, configuration: configuration)
        try queue.inDatabase { db in
            try db.execute(sql: "BEGIN DEFERRED")
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM accounts")
        }
    }

    /// Ends the read transaction and closes the connection. Idempotent.
    public func finish() throws {
        try queue.inDatabase { db in
            if db.isInsideTransaction { try db.execute(sql: "COMMIT") }
        }
        try queue.close()
    }
}
