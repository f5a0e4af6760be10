import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport
@testable import VaultStore

/// Every fixture vault that has landed, opened with this build's code: each record must
/// survive the migrations and still open.
@Suite("Fixture vaults from every schema version")
struct FixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appending(path: "Fixtures")

    /// Copies a committed fixture into a private directory (the committed file is never opened
    /// in place: opening migrates it, and git does not keep its 0600 mode).
    static func copy(_ name: String, into directory: TemporaryDirectory) throws -> URL {
        let target = directory.file("vault.db")
        try FileManager.default.copyItem(at: fixtures.appending(path: name), to: target)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
        return target
    }

    @Test("every fixture has a FixtureVN description and the newest schema has a fixture")
    func everySchemaVersionHasAFixture() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.path).filter { $0.hasSuffix(".db") }.sorted()
        let expected = (1...Migration.latestVersion).map { "vault-v\($0).db" }
        #expect(files == expected, "Tests/Fixtures must hold one fixture per schema version (make fixtures)")
    }

    @Test("schema-1 fixture opens with the newest code, migrates, and every record survives")
    func schemaOneFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV1.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV1.passphrase))
        defer { vault.close() }
        let differences = try FixtureV1.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        // Migrating to schema 3 authenticated every row, in the migration's transaction.
        let report = try vault.verify()
        #expect(report.passed, "\(report.damaged)")
        #expect(report.rowsAuthenticated > 0)
        let backups = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.hasPrefix("vault.db.v1-") && $0.hasSuffix(".bak") }
        #expect(backups.count == 1, "an older vault is backed up before it is migrated")
        if let backup = backups.first {
            #expect(FileProbe.mode(directory.file(backup)) == 0o600)
        }
        let applied = try vault.pool.read { try Migrator().applied($0, path: nil) }.map(\.version)
        #expect(applied == Array(1...Migration.latestVersion))
    }

    @Test("schema-2 fixture opens with the newest code and every record survives")
    func schemaTwoFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV2.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV2.passphrase))
        defer { vault.close() }
        let differences = try FixtureV2.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-3 fixture opens with the newest code, every record survives and every row is authentic")
    func schemaThreeFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV3.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV3.passphrase))
        defer { vault.close() }
        let differences = try FixtureV3.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("a fixture refuses the wrong passphrase without changing the file")
    func fixtureWrongPassphrase() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV1.fileName, into: directory)
        let before = FileProbe.fingerprint(url)
        #expect {
            try Vault.open(at: url, credential: .passphrase("not the fixture passphrase"))
        } throws: { ($0 as? VaultError)?.code == .wrongCredential }
        #expect(FileProbe.fingerprint(url) == before)
    }
}
