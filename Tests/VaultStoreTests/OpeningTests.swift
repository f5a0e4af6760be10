import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// `Vault.open(at:options:credential:)`: one read-only pass that checks the file, tells the
/// caller how it is unlocked, then unlocks with the credential the caller picks; and what
/// opening and closing write to the file.
@Suite struct OpeningTests {
    struct Refusal: Error, Equatable {
        var reason: String
    }

    static func wal(_ test: TestVault) -> URL { URL(fileURLWithPath: test.url.path + "-wal") }

    @Test(
        "the chooser is told how the vault is unlocked and its schema, and its credential unlocks it",
        arguments: TestVault.Kind.allCases)
    func chooserGetsTheFacts(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        let created = try test.create()
        let account = try created.insertAccount(Samples.account())
        created.close()

        var seen: [VaultOpeningFacts] = []
        let vault = try Vault.open(at: test.url, options: test.options()) { facts in
            seen.append(facts)
            return test.credential
        }
        defer { vault.close() }
        #expect(try vault.accounts.all().map(\.id) == [account.id])
        #expect(seen.count == 1)
        let facts = try #require(seen.first)
        #expect(facts.url == test.url)
        #expect(facts.unlockMethod == (kind == .keyFile ? .keyFile : .passphrase(TestVault.fastKDF)))
        #expect(facts.schemaVersion == Migration.latestVersion)
        #expect(facts.latestSchemaVersion == Migration.latestVersion)
        #expect(facts.pendingMigrations.isEmpty)
        // The same facts as a separate inspection reports.
        let inspected = try Vault.inspect(at: test.url, options: test.options())
        #expect(inspected.unlockMethod == facts.unlockMethod && inspected.schemaVersion == facts.schemaVersion)
    }

    @Test(
        "what the chooser throws comes back unchanged, and the vault and its WAL are left byte-for-byte unchanged",
        arguments: TestVault.Kind.allCases)
    func chooserRefusalWritesNothing(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        let created = try test.create()
        try created.insertAccount(Samples.account())
        created.close()
        let before = (FileProbe.fingerprint(test.url), FileProbe.fingerprint(Self.wal(test)))

        #expect(throws: Refusal(reason: "not today")) {
            try Vault.open(at: test.url, options: test.options()) { _ in throw Refusal(reason: "not today") }
        }
        #expect((FileProbe.fingerprint(test.url), FileProbe.fingerprint(Self.wal(test))) == before)
    }

    @Test("the chooser is not asked when the file fails the checks: not a vault, newer schema, unsafe mode")
    func chooserNotAskedForABadFile() throws {
        let notAVault = try TestVault()
        _ = FileManager.default.createFile(
            atPath: notAVault.url.path, contents: Data(repeating: 0x5A, count: 8192),
            attributes: [.posixPermissions: 0o600])
        var asked = 0
        expectVaultError(.notAVault) {
            try Vault.open(at: notAVault.url, options: notAVault.options()) { _ in
                asked += 1
                return notAVault.credential
            }
        }

        let newer = try TestVault()
        try newer.create().close()
        try RawDatabase.execute(newer.url, "PRAGMA user_version = 99")
        let before = FileProbe.fingerprint(newer.url)
        expectVaultError(.schemaTooNew) {
            try Vault.open(at: newer.url, options: newer.options()) { _ in
                asked += 1
                return newer.credential
            }
        }
        #expect(FileProbe.fingerprint(newer.url) == before)

        let exposed = try TestVault()
        try exposed.create().close()
        #expect(chmod(exposed.url.path, 0o644) == 0)
        expectVaultError(.unsafeLocation) {
            try Vault.open(at: exposed.url, options: exposed.options()) { _ in
                asked += 1
                return exposed.credential
            }
        }
        #expect(asked == 0)
    }

    @Test("the chooser sees the migrations an older vault needs, and refusing them changes nothing and backs nothing up")
    func chooserSeesPendingMigrations() throws {
        let test = try TestVault()
        let created = try test.create()
        try created.insertAccount(Samples.account())
        created.close()
        let before = FileProbe.fingerprint(test.url)

        var options = test.options()
        let step = Migration(
            version: Migration.latestVersion + 1, name: "add_index",
            sql: "CREATE INDEX tokens_by_expiry ON tokens(access_expires_at);")
        options.migrations = Migration.embedded + [step]
        var pending: [SchemaStep] = []
        #expect(throws: Refusal(reason: "outdated")) {
            try Vault.open(at: test.url, options: options) { facts in
                pending = facts.pendingMigrations
                #expect(facts.schemaVersion == Migration.latestVersion)
                #expect(facts.latestSchemaVersion == Migration.latestVersion + 1)
                throw Refusal(reason: "outdated")
            }
        }
        #expect(pending.map(\.version) == [step.version])
        #expect(FileProbe.fingerprint(test.url) == before)
        let backups = try FileManager.default.contentsOfDirectory(atPath: test.directory.url.path).filter { $0.hasSuffix(".bak") }
        #expect(backups.isEmpty)
    }

    @Test("opening, reading and closing leaves the vault file unchanged, and from the second time writes nothing at all")
    func readOnlyUseWritesNothing() throws {
        let test = try TestVault()
        let created = try test.create()
        let account = try created.insertAccount(Samples.account())
        try created.writeTokens(Samples.tokens("read-only"), for: account.id, replacing: nil)
        created.close()
        #expect(FileProbe.isEmpty(Self.wal(test)), "a close after writes folds the WAL into the file")
        let file = FileProbe.fingerprint(test.url)

        var vault = try test.open()
        #expect(try vault.tokens.current(for: account.id)?.tokens.accessToken == Samples.tokens("read-only").accessToken)
        vault.close()
        #expect(FileProbe.fingerprint(test.url) == file)

        let both = (FileProbe.fingerprint(test.url), FileProbe.fingerprint(Self.wal(test)))
        vault = try test.open()
        #expect(try vault.accounts.all().map(\.id) == [account.id])
        vault.close()
        #expect((FileProbe.fingerprint(test.url), FileProbe.fingerprint(Self.wal(test))) == both)
    }

    @Test("closing after a write folds the WAL back into the file, even when opening wrote nothing")
    func writeIsCheckpointedOnClose() throws {
        let test = try TestVault()
        try test.create().close()
        try test.open().close()
        let vault = try test.open()
        try vault.accounts.insert(Samples.account("bob"))
        vault.close()
        #expect(FileProbe.isEmpty(Self.wal(test)))
        #expect(try RawDatabase.int(test.url, "SELECT count(*) FROM accounts") == 1)
    }

    @Test("every commit is durable: the connection that writes runs at synchronous=FULL, created or opened")
    func writerIsFull() throws {
        let test = try TestVault()
        for vault in [try test.create(), try test.open()] {
            defer { vault.close() }
            // 2 is FULL; GRDB's own WAL default (NORMAL, 1) would lose the last commits in a power cut.
            let level = try vault.core.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
            #expect(level == 2)
        }
    }
}
