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

extension VaultFile {
    /// See ``Vault/migrate(at:credential:options:progress:)``.
    static func migrate(
        at url: URL, credential: VaultCredential, options: VaultOptions = VaultOptions(),
        progress: ((MaintenanceProgress) -> Void)? = nil
    ) throws -> MigrationReport {
        let url = try VaultFile.checkedLocation(url)
        let path = url.path
        let migrator = Migrator(migrations: options.migrations)
        let (pending, fromVersion, backupURL, keyring) = try VaultConnection.withReadOnlyQueue(url, options: options) { queue in
            let (pending, meta, version) = try queue.read { db -> ([Migration], VaultKeys.UnlockRecord?, Int) in
                try VaultFile.checkApplicationID(db, path: path)
                let pending = try migrator.pending(db, path: path)
                let userVersion = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                let version = max(userVersion, try migrator.applied(db, path: path).last?.version ?? 0)
                return (pending, try VaultKeys.UnlockRecord.fetch(db, path: url.path), version)
            }
            guard let meta else {
                throw VaultError(.damaged, "\(path) has no vault header row: the vault was never finished or was edited", path: path)
            }
            // The keys stay for the migrations that need them (authenticating every row).
            let keys = try VaultKeys.unlockVaultKeys(meta, credential: credential, path: path)
            let keyring: Keyring
            do {
                keyring = try Keyring(vaultID: meta.vaultID, vaultKey: keys.current, pendingVaultKey: keys.pending)
            } catch {
                keys.current.wipe()
                keys.pending?.wipe()
                throw error
            }
            guard !pending.isEmpty else {
                keyring.wipe()
                return (pending, version, URL?.none, keyring)
            }
            progress?(MaintenanceProgress(completed: 0, total: pending.count + 1))
            do {
                let backupURL =
                    options.backupBeforeMigrating && !meta.isFresh
                    ? try VaultFile.backupBeforeMigrating(queue, of: url, fromVersion: version, options: options) : nil
                return (pending, version, backupURL, keyring)
            } catch {
                keyring.wipe()
                throw error
            }
        }
        defer { keyring.wipe() }
        guard !pending.isEmpty else {
            return MigrationReport(fromVersion: fromVersion, toVersion: fromVersion, applied: [], backup: nil)
        }
        progress?(MaintenanceProgress(completed: 1, total: pending.count + 1))
        let pool: DatabasePool
        do {
            pool = try VaultConnection.openPool(url, options: options)
        } catch {
            throw VaultError.storage(error, while: "opening the vault to migrate it", path: path)
        }
        defer {
            _ = try? pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try? pool.close()
        }
        // Only for the migrations' Swift half (sealing and authenticating need the keys).
        let migrating = Vault(url: url, pool: pool, keyring: keyring, deviceID: "", wroteWhileOpening: true, options: options)
        var applied: [SchemaStep] = []
        for (index, migration) in pending.enumerated() {
            // A migrator that ends at this step applies exactly this step (those before it are recorded).
            let upToThis = Migrator(migrations: migrator.migrations.filter { $0.version <= migration.version })
            do {
                try keyring.acceptingFormat1 {
                    try upToThis.migrate(
                        pool, now: options.clock.now(), path: path, logger: options.logger,
                        completing: migrating.maintenance.completeMigration)
                }
            } catch {
                throw VaultError.storage(error, while: "migrating", path: path)
            }
            applied.append(SchemaStep(version: migration.version, name: migration.name))
            progress?(MaintenanceProgress(completed: index + 2, total: pending.count + 1))
        }
        return MigrationReport(fromVersion: fromVersion, toVersion: migrator.latestVersion, applied: applied, backup: backupURL)
    }
}

// MARK: - The migrations' Swift half

extension MaintenanceStore {
    /// What SQL cannot do in a migration, run in its transaction
    /// (``Migrator/migrate(_:now:path:logger:completing:)``). For schema 3: the server's words
    /// kept in plain columns are sealed, then every row is authenticated as it stands. (Changes
    /// made to the file before this first open with the key cannot be detected: nothing
    /// authenticated the rows then.)
    ///
    /// For schema 12: every row is checked under its format-1 MAC, then authenticated again in
    /// format 2 at write counter 1, so a row changed before is refused here, not laundered;
    /// then the state row records the manifest and the commitments.
    func completeMigration(_ migration: Migration, _ db: Database) throws {
        switch migration.version {
        case RowIntegrity.introducedInVersion:
            try sealServerText(db)
            // The tables as schema 3 has them: later ones do not exist yet in this transaction.
            for table in AuthenticatedTable.schema3 { try integrity.authenticateAll(table, db) }
        case RowIntegrity.countedInVersion:
            guard let header = try Row.fetchOne(db, sql: "SELECT * FROM vault_meta WHERE singleton = 1") else { return }  // a new file
            try integrity.check(header, in: .vaultMeta, db)
            // Every row at write 1: the manifest names each row the session layer reads, and
            // the collections are committed to (under a new root key) once all were checked.
            try integrity.beginCounting(at: 1, manifest: VaultManifest(), commitments: nil, db)
            try integrity.newCommitmentKey(db)
            try integrity.authenticate(.vaultMeta, where: "singleton = 1", [], db)
            // The tables as schema 12 has them: later ones do not exist yet in this transaction.
            for table in AuthenticatedTable.schema12 where table != .vaultMeta && table != .vaultState {
                try integrity.authenticateAll(table, checkingFirst: true, db)
            }
            try integrity.setCommitments(
                try integrity.computeCommitments(db, checking: false, tables: VaultCommitments.schema12Tables), db)
            try integrity.finishWrite(db)
        default:
            return
        }
    }

    /// Moves a device's status reason into its sealed `status_detail`, and a refresh failure
    /// recorded in words that are not this build's own into the sealed `last_failure_detail`.
    private func sealServerText(_ db: Database) throws {
        for row in try Row.fetchAll(db, sql: "SELECT registration_id, account_id, status_reason FROM devices WHERE status_reason IS NOT NULL") {
            let key = row.storedKey("registration_id")
            let id: String = try row.stored("registration_id", table: "devices", row: key, path: path)
            let account = AccountID(rawValue: try row.stored("account_id", table: "devices", row: key, path: path))
            let reason: String = try row.stored("status_reason", table: "devices", row: key, path: path)
            try db.execute(
                sql: "UPDATE devices SET status_detail = ?, status_reason = NULL WHERE registration_id = ?",
                arguments: [try seal(reason, table: "devices", column: "status_detail", account: account, row: id, db), id])
        }
        for row in try Row.fetchAll(db, sql: "SELECT account_id, last_failure FROM refresh_state WHERE last_failure IS NOT NULL") {
            let key = row.storedKey("account_id")
            let account = AccountID(rawValue: try row.stored("account_id", table: "refresh_state", row: key, path: path))
            let failure: String = try row.stored("last_failure", table: "refresh_state", row: key, path: path)
            guard !Self.isOwnFailureText(failure) else { continue }
            try db.execute(
                sql: "UPDATE refresh_state SET last_failure = ?, last_failure_detail = ? WHERE account_id = ?",
                arguments: [
                    "refresh failed (recorded before schema 3; the details are sealed)",
                    try seal(failure, table: "refresh_state", column: "last_failure_detail", account: account, row: key, db),
                    account.rawValue,
                ])
        }
    }

    /// Whether a failure text recorded by an older build is in that build's own words only:
    /// a status code, a time-out, a rate limit, a network failure or a one-word reason. Anything
    /// else may hold the server's words (an `error_description` that echoed the request).
    static func isOwnFailureText(_ text: String) -> Bool {
        let own = [
            #"server error \(HTTP \d{3}\)"#,
            #"the server did not answer in time"#,
            #"rate limited by the server(; retry after \d+ s)?"#,
            #"no refresh token|missing client secret|cancelled|token refresh was cancelled"#,
            #"[a-z_]{1,40}"#,
        ]
        let transient =
            "token refresh failed temporarily: (" + own.prefix(3).joined(separator: "|")
            + #"|network failure: [A-Za-z0-9 ().-]{0,80}); retry later"#
        return (own + [transient]).contains { text.range(of: "^(\($0))$", options: .regularExpression) != nil }
    }
}
