import Foundation
import Testing
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Case 12 of issue 7, beyond FileSafetyTests (VaultStoreTests: create and open under umask
/// 022, unsafe directory and file modes): every file the vault writes — the WAL and shared
/// memory re-created by a later open, a backup, a migration's backup — is 0600; the `vault`
/// command refuses a world-writable or sticky shared directory (exit 82) and creates nothing.
@Suite struct ModesTests {
    /// The umask is process-wide: these run one at a time and restore it.
    @Suite(.serialized) struct UnderUmask022 {
        @Test("the WAL and shared memory re-created by a later open, a backup and a migration backup are all 0600")
        func everyWrittenFileIsPrivate() throws {
            let previous = umask(0o022)
            defer { umask(previous) }
            let test = try TestVault()
            var vault = try test.create()
            let account = try vault.accounts.insert(Samples.account())
            try vault.tokens.store(Samples.steadyTokens("modes-1"), for: account.id, replacing: nil)
            vault.close()
            // As after a copy of the file alone: the next open creates the WAL and shared memory anew.
            for suffix in ["-wal", "-shm"] { unlink(test.url.path + suffix) }

            vault = try test.open()
            try vault.tokens.store(Samples.steadyTokens("modes-2"), for: account.id, replacing: 1)
            for suffix in ["", "-wal", "-shm"] {
                #expect(FileProbe.mode(URL(fileURLWithPath: test.url.path + suffix)) == 0o600, "vault.db\(suffix)")
            }
            let backup = test.directory.file("backups/copy.db")
            try vault.maintenance.backup(to: backup)
            vault.close()
            #expect(FileProbe.mode(backup) == 0o600)
            #expect(FileProbe.mode(backup.deletingLastPathComponent()) == 0o700)

            // A migration's backup of an older vault.
            let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appending(path: "Fixtures").appending(path: FixtureV1.fileName)
            let old = test.directory.file("old.db")
            #expect(
                FileManager.default.createFile(
                    atPath: old.path, contents: try Data(contentsOf: fixture),
                    attributes: [.posixPermissions: 0o600]))
            let report = try Vault.migrate(
                at: old, credential: .passphrase(FixtureV1.passphrase),
                options: VaultOptions(logger: test.logs.logger()))
            let bak = try #require(report.backup)
            #expect(FileProbe.mode(bak) == 0o600, "\(bak.lastPathComponent)")
            #expect(FileProbe.mode(old) == 0o600)
            let files = ["", "-wal", "-shm"].map { URL(fileURLWithPath: test.url.path + $0) } + [backup, bak, old]
            let open = files.filter { FileProbe.mode($0) != 0o600 }.count
            StressResults.record(
                StressCount(
                    case: "12 file modes under umask 022 (vault, WAL, shm, backups)", tried: files.count,
                    passed: files.count - open, lost: 0, leaked: open))
            LogHygiene.check(test.logs, secrets: LogHygiene.secrets(of: test) + [FixtureV1.passphrase, "RT-modes-1-fedcba9876543210"])
        }
    }

    static let sharedDirectoryModes: [Int] = [0o777, 0o1777, 0o775]

    @Test("vault init refuses a directory other users can write, exits 82 and creates nothing", arguments: sharedDirectoryModes)
    func initRefusesSharedDirectory(mode: Int) async throws {
        let home = try TemporaryDirectory("modes")
        let shared = home.file("shared")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: false)
        #expect(chmod(shared.path, mode_t(mode)) == 0)
        let url = shared.appending(path: "vault.db")
        let passphrase = "modes passphrase 2b7f"
        let result = try await VaultRun.run(
            ["init", "--vault", url.path, "--kdf", "interactive"],
            environment: ["VAULT_PASSPHRASE": passphrase], in: home)
        #expect(result.status == 82, "\(result)")
        #expect(result.stderr.contains("chmod go-w"), "the message says what to do: \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: shared.path).isEmpty, "nothing was created")
        LogHygiene.check(CapturedLogs(), texts: [result.output], secrets: [passphrase])
    }

    @Test("a vault moved into a directory other users can write is refused by every command, and left unchanged")
    func commandsRefuseSharedDirectory() async throws {
        let test = try TestVault()
        try test.create().close()
        guard case .keyFile(let keyFile) = test.credential else { return }
        let before = FileProbe.fingerprint(test.url)
        #expect(chmod(test.directory.url.path, 0o777) == 0)
        defer { chmod(test.directory.url.path, 0o700) }
        var outputs: [String] = []
        for command in [["status"], ["verify"], ["accounts", "list"]] {
            let result = try await VaultRun.run(
                command + ["--vault", test.url.path],
                environment: ["VAULT_KEY_FILE": keyFile.path], in: test.directory)
            #expect(result.status == 82, "\(result)")
            outputs.append(result.output)
        }
        #expect(FileProbe.fingerprint(test.url) == before)
        LogHygiene.check(test.logs, texts: outputs, secrets: LogHygiene.secrets(of: test))
    }
}
