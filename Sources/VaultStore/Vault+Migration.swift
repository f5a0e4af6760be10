import Foundation
import GRDB
import VaultCrypto

/// What ``Vault/migrate(at:credential:options:progress:)`` did.
public struct MigrationReport: Sendable, Hashable {
    /// The schema version before.
    public var fromVersion: Int
    /// The schema version after.
    public var toVersion: Int
    /// The steps applied, oldest first; empty when the vault was up to date.
    public var applied: [SchemaStep]
    /// The copy taken before the first step (``VaultOptions/backupBeforeMigrating``); nil when
    /// nothing was applied or the vault held no account.
    public var backup: URL?
}

// MARK: - Explicit migration

extension Vault {
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
    public static func migrate(at url: URL, credential: VaultCredential, options: VaultOptions = VaultOptions(),
                               progress: ((MaintenanceProgress) -> Void)? = nil) throws -> MigrationReport {
        let url = try VaultFile.checkedLocation(url)
        let path = url.path
        let migrator = Migrator(migrations: options.migrations)
        let (pending, fromVersion, backupURL) = try withReadOnlyQueue(url, options: options) { queue in
            let (pending, meta, version) = try queue.read { db -> ([Migration], UnlockRecord?, Int) in
                try VaultFile.checkApplicationID(db, path: path)
                let pending = try migrator.pending(db, path: path)
                let userVersion = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                let version = max(userVersion, try migrator.applied(db, path: path).last?.version ?? 0)
                return (pending, try UnlockRecord.fetch(db, path: url.path), version)
            }
            guard let meta else {
                throw VaultError(.damaged, "\(path) has no vault header row: the vault was never finished or was edited", path: path)
            }
            try unlockVaultKey(meta, credential: credential, path: path).wipe()
            guard !pending.isEmpty else { return (pending, version, URL?.none) }
            progress?(MaintenanceProgress(completed: 0, total: pending.count + 1))
            let backupURL = options.backupBeforeMigrating && !meta.isFresh
                ? try backup(queue, of: url, fromVersion: version, options: options) : nil
            return (pending, version, backupURL)
        }
        guard !pending.isEmpty else {
            return MigrationReport(fromVersion: fromVersion, toVersion: fromVersion, applied: [], backup: nil)
        }
        progress?(MaintenanceProgress(completed: 1, total: pending.count + 1))
        let pool: DatabasePool
        do {
            pool = try openPool(url, options: options)
        } catch {
            throw VaultError.storage(error, while: "opening the vault to migrate it", path: path)
        }
        defer {
            _ = try? pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try? pool.close()
        }
        var applied: [SchemaStep] = []
        for (index, migration) in pending.enumerated() {
            // A migrator that ends at this step applies exactly this step (those before it are recorded).
            let upToThis = Migrator(migrations: migrator.migrations.filter { $0.version <= migration.version })
            do {
                try upToThis.migrate(pool, now: options.clock.now(), path: path, logger: options.logger)
            } catch {
                throw VaultError.storage(error, while: "migrating", path: path)
            }
            applied.append(SchemaStep(version: migration.version, name: migration.name))
            progress?(MaintenanceProgress(completed: index + 2, total: pending.count + 1))
        }
        return MigrationReport(fromVersion: fromVersion, toVersion: migrator.latestVersion, applied: applied, backup: backupURL)
    }
}
