import Foundation
import GRDB

/// Direct SQL access to a vault file, bypassing the vault: what an attacker or a damaged
/// disk can do. Each call opens its own connection and closes it again.
public enum RawDatabase {
    public static func queue(_ url: URL) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return try DatabaseQueue(path: url.path, configuration: configuration)
    }

    public static func execute(_ url: URL, _ sql: String, _ arguments: StatementArguments = []) throws {
        let queue = try queue(url)
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { try $0.execute(sql: sql, arguments: arguments) }
    }

    public static func blob(_ url: URL, _ sql: String, _ arguments: StatementArguments = []) throws -> [UInt8]? {
        let queue = try queue(url)
        defer { try? queue.close() }
        return try queue.read { try Data.fetchOne($0, sql: sql, arguments: arguments) }.map { [UInt8]($0) }
    }

    public static func blobs(_ url: URL, _ sql: String, _ arguments: StatementArguments = []) throws -> [[UInt8]] {
        let queue = try queue(url)
        defer { try? queue.close() }
        return try queue.read { try Data.fetchAll($0, sql: sql, arguments: arguments) }.map { [UInt8]($0) }
    }

    public static func int(_ url: URL, _ sql: String, _ arguments: StatementArguments = []) throws -> Int? {
        let queue = try queue(url)
        defer { try? queue.close() }
        return try queue.read { try Int.fetchOne($0, sql: sql, arguments: arguments) }
    }

    public static func tableExists(_ url: URL, _ table: String) throws -> Bool {
        let queue = try queue(url)
        defer { try? queue.close() }
        return try queue.read { try $0.tableExists(table) }
    }
}
