import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// Schema versions: a newer vault is left alone, an edited migration is noticed, and a
/// failing migration rolls back after a backup.
@Suite struct MigrationTests {
    static var latest: Int { Migration.embedded.count }

    /// How a newer build marked the vault.
    enum NewerSchema: String, CaseIterable, CustomStringConvertible {
        case userVersion
        case migrationRecord
        case both
        var description: String { rawValue }
    }

    @Test(
        "a vault with a newer schema is refused, naming both versions, and left byte-for-byte unchanged",
        arguments: NewerSchema.allCases)
    func newerSchemaIsRefused(how: NewerSchema) throws {
        let test = try TestVault()
        let vault = try test.create()
        try vault.accounts.insert(Samples.account())
        vault.close()
        if how != .migrationRecord {
            try RawDatabase.execute(test.url, "PRAGMA user_version = 99")
        }
        if how != .userVersion {
            try RawDatabase.execute(
                test.url,
                """
                INSERT INTO vault_migrations (version, name, checksum, applied_at) VALUES (99, 'future', 'abc', 0)
                """)
        }
        #expect(FileProbe.isEmpty(URL(fileURLWithPath: test.url.path + "-wal")), "the raw edit was checkpointed")
        let before = FileProbe.fingerprint(test.url)

        let error = expectVaultError(.schemaTooNew) { try test.open() }
        let message = error?.message ?? ""
        #expect(message.contains("99") && message.contains("(\(Self.latest))"), "\(message)")
        #expect(FileProbe.fingerprint(test.url) == before)
        #expect(try RawDatabase.tableExists(test.url, "vault_migrations"))
        let backups = try FileManager.default.contentsOfDirectory(atPath: test.directory.url.path).filter { $0.hasSuffix(".bak") }
        #expect(backups.isEmpty)
    }

    @Test("a shipped migration whose SQL was edited is detected and nothing is changed")
    func editedMigrationIsDetected() throws {
        let test = try TestVault()
        try test.create().close()
        let before = FileProbe.fingerprint(test.url)

        var options = test.options()
        var edited = Migration.embedded
        edited[0].sql += "\n-- an innocent-looking edit\n"
        options.migrations = edited
        let error = expectVaultError(.migrationChecksumMismatch) {
            try Vault.open(at: test.url, credential: test.credential, options: options)
        }
        #expect(error?.message.contains("migration 1") == true)
        #expect(FileProbe.fingerprint(test.url) == before)
    }

    @Test("a failing migration rolls back alone after a 0600 backup, and the vault still opens at its old version")
    func failingMigrationRollsBack() throws {
        let test = try TestVault()
        let clock = WallClock { Date(timeIntervalSince1970: 1_800_000_000) }
        var vault = try test.create(clock: clock)
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("before-migration"), for: account.id, replacing: nil)
        vault.close()

        var options = test.options(clock: clock)
        options.migrations =
            Migration.embedded + [
                Migration(
                    version: Self.latest + 1, name: "broken",
                    sql: """
                        CREATE TABLE half_made (id INTEGER PRIMARY KEY);
                        INSERT INTO half_made (id) VALUES (1);
                        INSERT INTO no_such_table (id) VALUES (1);
                        """)
            ]
        let error = expectVaultError(.migrationFailed) {
            try Vault.open(at: test.url, credential: test.credential, options: options)
        }
        #expect(error?.message.contains("stays at version \(Self.latest)") == true, "\(error.map(String.init(describing:)) ?? "")")
        // Retrying at once (same clock second) fails the same way, not on the earlier backup's name.
        expectVaultError(.migrationFailed) { try Vault.open(at: test.url, credential: test.credential, options: options) }

        #expect(try RawDatabase.int(test.url, "PRAGMA user_version") == Self.latest)
        #expect(try !RawDatabase.tableExists(test.url, "half_made"))
        #expect(try RawDatabase.int(test.url, "SELECT max(version) FROM vault_migrations") == Self.latest)

        // The backup was taken before the migration ran: old version, the data, no half-made table.
        let names = try FileManager.default.contentsOfDirectory(atPath: test.directory.url.path)
        let backups = names.filter { $0.hasPrefix("vault.db.v\(Self.latest)-") && $0.hasSuffix(".bak") }
        let backupName = try #require(backups.first, "backups in \(names)")
        #expect(backups.count == 2, "one backup per attempt: \(backups)")
        let backup = test.directory.file(backupName)
        #expect(FileProbe.mode(backup) == 0o600)
        #expect(try RawDatabase.int(backup, "PRAGMA user_version") == Self.latest)
        #expect(try !RawDatabase.tableExists(backup, "half_made"))
        #expect(try RawDatabase.int(backup, "SELECT count(*) FROM tokens") == 1)
        let restored = try Vault.open(at: backup, credential: test.credential, options: test.options())
        #expect(try restored.tokens(for: account.id)?.tokens == Samples.fixedTokens("before-migration"))
        restored.close()

        vault = try test.open()
        defer { vault.close() }
        #expect(try vault.tokens.current(for: account.id)?.tokens == Samples.fixedTokens("before-migration"))
    }

    @Test("a new migration is applied once, recorded, and the vault keeps its data")
    func newMigrationIsApplied() throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        vault.close()

        var options = test.options()
        options.migrations =
            Migration.embedded + [
                Migration(version: Self.latest + 1, name: "add_index", sql: "CREATE INDEX tokens_by_expiry ON tokens(access_expires_at);")
            ]
        vault = try Vault.open(at: test.url, credential: test.credential, options: options)
        #expect(try vault.accounts.all().map(\.id) == [account.id])
        vault.close()
        #expect(try RawDatabase.int(test.url, "PRAGMA user_version") == Self.latest + 1)
        #expect(try RawDatabase.int(test.url, "SELECT count(*) FROM vault_migrations") == Self.latest + 1)

        // Opening again applies nothing; this build (without the step) now sees a newer vault.
        try Vault.open(at: test.url, credential: test.credential, options: options).close()
        expectVaultError(.schemaTooNew) { try test.open() }
    }
}
