import Foundation
import GRDB
import Logging

/// Applies `Migrations/` in order, each in its own immediate transaction, and records
/// every applied step with its checksum in `vault_migrations`.
///
/// A step that fails rolls back alone: the vault stays at the version before it.
/// A recorded step whose checksum differs from the build's SQL is reported, never re-run.
struct Migrator: Sendable {
    var migrations: [Migration]

    init(migrations: [Migration] = Migration.embedded) {
        self.migrations = migrations
    }

    var latestVersion: Int { migrations.last?.version ?? 0 }

    struct Applied: Sendable, Hashable {
        var version: Int
        var name: String
        var checksum: String
        var appliedAt: Date
    }

    /// The migrations recorded in the vault, oldest first. Empty for a new file.
    ///
    /// A record holding a value of the wrong type (a hand-edited file) is `.damaged`, naming its column.
    func applied(_ db: Database, path: String?) throws -> [Applied] {
        guard try db.tableExists("vault_migrations") else { return [] }
        return try Row.fetchAll(db, sql: "SELECT version, name, checksum, applied_at FROM vault_migrations ORDER BY version")
            .map { row in
                let key = row.storedKey("version")
                func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
                    try row.stored(column, table: "vault_migrations", row: key, path: path)
                }
                return Applied(
                    version: try value("version"), name: try value("name"), checksum: try value("checksum"),
                    appliedAt: try row.storedDate("applied_at", table: "vault_migrations", row: key, path: path))
            }
    }

    /// Where a vault's schema stands against this build.
    struct Status: Sendable {
        /// The migrations still to apply, oldest first.
        var pending: [Migration]
        /// The schema version the vault records (`user_version` or its last applied migration).
        var recordedVersion: Int
    }

    /// Checks what the vault recorded against this build's migrations and returns the
    /// ones still to apply. Reads only.
    func pending(_ db: Database, path: String?) throws -> [Migration] {
        try status(db, path: path).pending
    }

    /// ``pending(_:path:)`` with the version the vault records. Reads only.
    func status(_ db: Database, path: String?) throws -> Status {
        let userVersion = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
        let applied = try applied(db, path: path)
        let recordedVersion = max(userVersion, applied.last?.version ?? 0)
        if recordedVersion > latestVersion {
            throw VaultError(
                .schemaTooNew,
                "vault schema \(recordedVersion) is newer than this build (\(latestVersion)): upgrade the tool; the vault was not changed",
                path: path)
        }
        for record in applied {
            guard let known = migrations.first(where: { $0.version == record.version }) else { continue }
            if known.checksum != record.checksum {
                throw VaultError(
                    .migrationChecksumMismatch,
                    "migration \(record.version) (\(record.name)) recorded in the vault differs from this build's \(String(format: "%04d", known.version))_\(known.name).sql: a shipped migration was edited; restore it and add a new migration instead",
                    path: path)
            }
        }
        let done = Set(applied.map(\.version))
        return Status(pending: migrations.filter { !done.contains($0.version) }, recordedVersion: recordedVersion)
    }

    /// Applies every pending migration, each in its own immediate transaction.
    ///
    /// `completing` runs in each migration's transaction after its SQL: the work SQL cannot do,
    /// such as authenticating every row when the migration that added row MACs is applied
    /// (it needs the vault key). If it throws, that migration rolls back like a failing SQL step.
    func migrate(
        _ writer: some DatabaseWriter, now: Date, path: String?, logger: Logger,
        completing: (Migration, Database) throws -> Void = { _, _ in }
    ) throws {
        let pending = try writer.read { try self.pending($0, path: path) }
        for migration in pending {
            do {
                try writer.writeWithoutTransaction { db in
                    try db.inTransaction(.immediate) {
                        try db.execute(
                            sql: """
                                CREATE TABLE IF NOT EXISTS vault_migrations (
                                    version     INTEGER PRIMARY KEY,
                                    name        TEXT    NOT NULL,
                                    checksum    TEXT    NOT NULL,
                                    applied_at  INTEGER NOT NULL)
                                """)
                        // A concurrent process may have applied it between our read and this lock.
                        let already =
                            try Bool.fetchOne(
                                db, sql: "SELECT 1 FROM vault_migrations WHERE version = ?", arguments: [migration.version]) ?? false
                        if already { return .commit }
                        try db.execute(sql: migration.sql)
                        try completing(migration, db)
                        try db.execute(
                            sql: "INSERT INTO vault_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                            arguments: [migration.version, migration.name, migration.checksum, now.millisecondsSince1970])
                        try db.execute(sql: "PRAGMA user_version = \(migration.version)")
                        return .commit
                    }
                }
                logger.info("applied migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            } catch let error as VaultError {
                throw error
            } catch {
                throw VaultError(
                    .migrationFailed,
                    "migration \(migration.version) (\(migration.name)) failed and was rolled back; the vault stays at version \(migration.version - 1): \(error)",
                    path: path)
            }
        }
    }
}
