import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// `rotateKeys` replaces every key and re-seals every value, and survives being stopped.
@Suite("Key rotation")
struct KeyRotationTests {
    /// The key ids named by every sealed value in the file, read with raw SQL.
    static func sealedKeyIDs(_ url: URL) throws -> Set<UInt32> {
        let queue = try DatabaseQueue(path: url.path)
        defer { try? queue.close() }
        return try queue.read { db in
            var ids = Set<UInt32>()
            for table in SealedColumns.all {
                for column in table.columns {
                    for blob in try Data.fetchAll(db, sql: "SELECT \(column) FROM \(table.table) WHERE \(column) IS NOT NULL") {
                        ids.insert(try SealedBlob(parsing: [UInt8](blob)).keyID)
                    }
                }
            }
            return ids
        }
    }

    static func populated(_ kind: TestVault.Kind = .keyFile) throws -> (TestVault, Vault) {
        let test = try TestVault(kind)
        let vault = try test.create()
        try FixtureV1.populate(vault)
        return (test, vault)
    }

    @Test("vault verify --deep opens every sealed value in the file, in every table, and authenticates every row")
    func verifyOpensEveryValue() throws {
        let (test, vault) = try Self.populated()
        defer { vault.close() }
        let report = try vault.maintenance.verify(depth: .deep)
        let queue = try DatabaseQueue(path: test.url.path)
        defer { try? queue.close() }
        let (values, rows) = try queue.read { db in
            var values = 0
            for table in SealedColumns.all {
                for column in table.columns {
                    values += try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.table) WHERE \(column) IS NOT NULL") ?? 0
                }
            }
            // The accounts' wrapped data keys are opened too.
            values += try Int.fetchOne(db, sql: "SELECT count(*) FROM accounts WHERE wrapped_data_key IS NOT NULL") ?? 0
            let rows = try AuthenticatedTable.all.reduce(0) { $0 + (try Int.fetchOne(db, sql: "SELECT count(*) FROM \($1.name)") ?? 0) }
            return (values, rows)
        }
        #expect(report.passed)
        #expect(report.sealedValuesOpened == values)
        #expect(report.rowsAuthenticated == rows)
    }

    @Test("verify checks every row but opens only the data keys; --deep also finds a value authenticated where it does not open")
    func verifyDepths() throws {
        let (test, vault) = try Self.populated()
        defer { vault.close() }
        let rows = try vault.maintenance.verify()
        let raw = try RawDatabase.queue(test.url)
        defer { try? raw.close() }
        let (dataKeys, authenticated) = try raw.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM accounts WHERE wrapped_data_key IS NOT NULL") ?? 0,
                try AuthenticatedTable.all.reduce(0) { $0 + (try Int.fetchOne(db, sql: "SELECT count(*) FROM \($1.name)") ?? 0) }
            )
        }
        #expect(rows.passed && rows.depth == .rows)
        #expect(rows.sealedValuesOpened == dataKeys, "the data keys, and nothing else")
        #expect(rows.rowsAuthenticated == authenticated)

        // A fault of the vault's own making, which no one without the key can make: one
        // notification's message sealed for another row, then authenticated as it stands.
        let uuids = try raw.read { try String.fetchAll($0, sql: "SELECT uuid FROM notifications ORDER BY rowid LIMIT 2") }
        try #require(uuids.count == 2)
        try vault.maintenance.write("misplacing a sealed value") { db in
            try vault.core.integrity.rewrite(.notifications, matching: ["uuid": uuids[0]], db) {
                try db.execute(
                    sql: "UPDATE notifications SET message = (SELECT message FROM notifications WHERE uuid = ?) WHERE uuid = ?",
                    arguments: [uuids[1], uuids[0]])
            }
        }
        #expect(try vault.maintenance.verify().passed, "every row is as the vault wrote it")
        let deep = try vault.maintenance.verify(depth: .deep)
        #expect(!deep.passed && deep.depth == .deep)
        #expect(deep.damaged.map { "\($0.table) \($0.row) \($0.column)" } == ["notifications \(uuids[0]) message"], "\(deep.damaged)")
    }

    @Test("every value is re-sealed with new keys and still reads back the same")
    func rotationReplacesEveryKey() throws {
        let (test, vault) = try Self.populated()
        let before = try Self.sealedKeyIDs(test.url)
        var phases: [KeyRotationProgress.Phase] = []
        let report = try vault.maintenance.rotateKeys(credential: test.credential, batchSize: 2) { phases.append($0.phase) }
        #expect(!report.resumed)
        #expect(report.valuesResealed > 10)
        #expect(phases.first == .prepared && phases.last == .finished && phases.contains(.resealing))
        let after = try Self.sealedKeyIDs(test.url)
        #expect(before.isDisjoint(with: after), "no value may still name an old key")
        #expect(try FixtureV1.differences(in: vault).isEmpty)
        #expect(try !vault.maintenance.keyRotationPending())
        vault.close()

        let reopened = try test.open()
        defer { reopened.close() }
        #expect(try FixtureV1.differences(in: reopened).isEmpty)
    }

    @Test("a rotation stopped midway leaves every value readable and resumes to the end")
    func interruptedRotationResumes() throws {
        let (test, vault) = try Self.populated()
        #expect(throws: VaultError.self) {
            try vault.maintenance.rotateKeys(credential: test.credential, batchSize: 1, stopAfterBatches: 3) { _ in }
        }
        #expect(try vault.maintenance.keyRotationPending())
        #expect(try FixtureV1.differences(in: vault).isEmpty, "mid-rotation, this process reads every value")
        let mixed = try Self.sealedKeyIDs(test.url)
        #expect(mixed.count > 2, "some values use the old keys, some the new ones")

        // Writes during the rotation, and a crash: a new process opens the half-rotated vault.
        let alice = try #require(try vault.accounts.all().first { $0.subject == "alice" })
        let generation = try #require(try vault.tokens.current(for: alice.id)).generation
        let newTokens = TokenSet(accessToken: "AT-during-rotation", refreshToken: "RT-during-rotation")
        try vault.tokens.store(newTokens, for: alice.id, replacing: generation)
        vault.close()

        let reopened = try test.open()
        defer { reopened.close() }
        #expect(try reopened.tokens(for: alice.id)?.tokens == newTokens)
        let late = try reopened.insertAccount(Samples.account("carol"))
        try reopened.writeTokens(Samples.fixedTokens("carol"), for: late.id, replacing: nil)

        let report = try reopened.rotateKeys(credential: test.credential, batchSize: 3)
        #expect(report.resumed)
        #expect(try !reopened.keyRotationPending())
        #expect(try reopened.tokens(for: alice.id)?.tokens == newTokens)
        #expect(try reopened.tokens(for: late.id)?.tokens == Samples.fixedTokens("carol"))
        #expect(try reopened.account(late.id)?.label == Samples.account("carol").label)
        let after = try Self.sealedKeyIDs(test.url)
        let accountKeys = try Set(
            DatabaseQueue(path: test.url.path).read { db in
                try Int64.fetchAll(db, sql: "SELECT data_key_id FROM accounts").map { UInt32($0) }
            })
        #expect(after.isSubset(of: accountKeys), "every value names its account's current key")
    }

    @Test("another process must unlock again after the vault key was rotated")
    func otherProcessNeedsUnlockAfterRotation() throws {
        let (test, vault) = try Self.populated()
        let other = try test.open()
        defer { other.close() }
        let alice = try #require(try vault.accounts.all().first { $0.subject == "alice" })
        try vault.maintenance.rotateKeys(credential: test.credential)

        // The other process's keys are stale: it is told to unlock, never handed garbage.
        #expect {
            _ = try other.tokens(for: alice.id)
        } throws: { ($0 as? VaultError)?.code == .keyChanged }
        try other.unlock(with: test.credential)
        #expect(try other.tokens(for: alice.id)?.tokens.accessToken == "fixture-access-alice")
        vault.close()
    }

    @Test("a wrong credential starts no rotation")
    func wrongCredentialRefused() throws {
        let (test, vault) = try Self.populated(.passphrase)
        defer { vault.close() }
        #expect {
            try vault.maintenance.rotateKeys(credential: .passphrase("not the passphrase"))
        } throws: { ($0 as? VaultError)?.code == .wrongCredential }
        #expect(try !vault.maintenance.keyRotationPending())
        #expect(try FixtureV1.differences(in: vault).isEmpty)
        _ = test
    }
}
