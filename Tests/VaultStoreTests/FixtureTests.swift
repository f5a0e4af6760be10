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
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.path).filter { $0.hasSuffix(".db") }
            .sorted { $0.count == $1.count ? $0 < $1 : $0.count < $1.count }  // v2 before v10
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
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
        #expect(report.rowsAuthenticated > 0)
        let backups = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.hasPrefix("vault.db.v1-") && $0.hasSuffix(".bak") }
        #expect(backups.count == 1, "an older vault is backed up before it is migrated")
        if let backup = backups.first {
            #expect(FileProbe.mode(directory.file(backup)) == 0o600)
        }
        let applied = try vault.core.pool.read { try Migrator().applied($0, path: nil) }.map(\.version)
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
        let report = try vault.maintenance.verify()
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
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-4 fixture opens with the newest code, every record survives and every row is authentic")
    func schemaFourFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV4.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV4.passphrase))
        defer { vault.close() }
        let differences = try FixtureV4.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-5 fixture opens with the newest code: sign-in metadata, verified subject, auth_time and the upgraded guest survive")
    func schemaFiveFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV5.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV5.passphrase))
        defer { vault.close() }
        let differences = try FixtureV5.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-6 fixture opens with the newest code: the credential hosts survive")
    func schemaSixFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV6.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV6.passphrase))
        defer { vault.close() }
        let differences = try FixtureV6.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-7 fixture opens with the newest code: the imported account, its origin and the remembered transfer survive")
    func schemaSevenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV7.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV7.passphrase))
        defer { vault.close() }
        let differences = try FixtureV7.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-8 fixture opens with the newest code: alice's notification retention survives")
    func schemaEightFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV8.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV8.passphrase))
        defer { vault.close() }
        let differences = try FixtureV8.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-9 fixture opens with the newest code: the pending device and its approval request survive")
    func schemaNineFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV9.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV9.passphrase))
        defer { vault.close() }
        let differences = try FixtureV9.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-10 fixture opens with the newest code: heidi's registered redirect URI and CA file survive")
    func schemaTenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV10.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV10.passphrase))
        defer { vault.close() }
        let differences = try FixtureV10.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-11 fixture opens with the newest code: ivan shares erin's host as its default, erin keeps the other")
    func schemaElevenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV11.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV11.passphrase))
        defer { vault.close() }
        let differences = try FixtureV11.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-12 fixture opens with the newest code: judy's rows, written at several counters, and her pruned notifications match the state")
    func schemaTwelveFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV12.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV12.passphrase))
        defer { vault.close() }
        let differences = try FixtureV12.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-13 fixture opens with the newest code: kate's tokens for other targets, one replaced, and her host's target")
    func schemaThirteenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV13.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV13.passphrase))
        defer { vault.close() }
        let differences = try FixtureV13.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-14 fixture opens with the newest code: two client accounts (a secret in the body, a sealed signing key) and a person's client_secret_post")
    func schemaFourteenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV14.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV14.passphrase))
        defer { vault.close() }
        let differences = try FixtureV14.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-15 fixture opens with the newest code: mona's DPoP key, sealed, and her DPoP tokens")
    func schemaFifteenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV15.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV15.passphrase))
        defer { vault.close() }
        let differences = try FixtureV15.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("schema-16 fixture opens with the newest code: two key slots, each opening the vault as its passphrase does")
    func schemaSixteenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV16.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV16.passphrase))
        let differences = try FixtureV16.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
        vault.close()
        for (slot, key) in [(Int64(1), FixtureV16.keeperKey), (2, FixtureV16.keyFileKey)] {
            let bySlot = try Vault.open(at: url, credential: .key(try SecureBytes(copying: key)))
            #expect(bySlot.unlockedBy == slot)
            #expect(try FixtureV16.differences(in: bySlot).isEmpty)
            bySlot.close()
        }
    }

    @Test("schema-17 fixture opens with the newest code: nora's sensitive-action cap and refresh-token lifetime, and her session")
    func schemaSeventeenFixture() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV17.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV17.passphrase))
        defer { vault.close() }
        let differences = try FixtureV17.differences(in: vault)
        #expect(differences.isEmpty, "\(differences)")
        let report = try vault.maintenance.verify()
        #expect(report.passed, "\(report.damaged)")
    }

    @Test("a row MAC made by this build is byte for byte the one the schema-17 code stored for the same row")
    func rowMACsAreStable() throws {
        let directory = try TemporaryDirectory()
        let url = try Self.copy(FixtureV17.fileName, into: directory)
        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV17.passphrase))
        defer { vault.close() }
        let remade = try remadeMACs(url, tables: AuthenticatedTable.all, integrity: vault.maintenance.integrity)
        for row in remade { #expect(row.made == row.stored, "\(row.row)") }
        #expect(remade.count > 30)
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

/// Schema 3 seals the server's words that older vaults kept in plain columns.
@Suite("Migrating to schema 3 seals server text kept in plain columns")
struct ServerTextMigrationTests {
    @Test("a device's status reason and a failure in the server's words move into sealed columns; the vault's own words stay")
    func serverTextIsSealed() throws {
        let directory = try TemporaryDirectory()
        let url = try FixtureTests.copy(FixtureV2.fileName, into: directory)
        let echoed = "invalid_request: grant_type=refresh_token&refresh_token=echo-7f3a"
        try RawDatabase.execute(url, "UPDATE devices SET status_reason = 'approved from the kitchen tablet'")
        try RawDatabase.execute(
            url, "INSERT INTO refresh_state (account_id, last_failure) SELECT account_id, ? FROM accounts WHERE subject = 'alice'",
            [echoed])

        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV2.passphrase))
        let accounts = try vault.accounts.all()
        let alice = try #require(accounts.first { $0.subject == "alice" })
        let bob = try #require(accounts.first { $0.subject == "bob" })
        #expect(try vault.devices.all().allSatisfy { $0.statusReason == "approved from the kitchen tablet" })
        let aliceState = try vault.leases.state(for: alice.id)
        #expect(aliceState.lastFailureDetail == echoed)
        #expect(aliceState.lastFailure?.contains("echo-7f3a") == false)
        #expect(try vault.leases.state(for: bob.id).lastFailure == FixtureV2.bobFailure, "the vault's own words stay in plain")
        #expect(try vault.maintenance.verify().passed)
        vault.close()

        #expect(try RawDatabase.int(url, "SELECT count(*) FROM devices WHERE status_reason IS NOT NULL") == 0)
        #expect(!FileProbe.contains(url, Array("echo-7f3a".utf8)), "the plain copy is gone from the file")
        #expect(!FileProbe.contains(url, Array("kitchen tablet".utf8)))
    }

    @Test("failure texts in an older build's own words are recognised; anything else is not")
    func ownWords() {
        for own in [
            "server error (HTTP 503)", "the server did not answer in time", "revoked", "no refresh token",
            "token refresh failed temporarily: network failure: connection refused; retry later",
            "rate limited by the server; retry after 30 s",
        ] {
            #expect(MaintenanceStore.isOwnFailureText(own), "\(own)")
        }
        for foreign in [
            "the identity service says: token RT-1 is revoked", "invalid_grant: Token has been revoked",
            "the authorization server refused the refresh with HTTP 400 invalid_request: echo",
        ] {
            #expect(!MaintenanceStore.isOwnFailureText(foreign), "\(foreign)")
        }
    }
}
