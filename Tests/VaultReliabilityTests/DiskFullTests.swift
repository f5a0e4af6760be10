import Foundation
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Case 5 of issue 7: the file system fills up during a token rotation, a key rotation, a
/// checkpoint and a migration. Each fails with a clear `.storage` error; the previous token
/// still opens; once space is freed the vault passes its integrity check.
///
/// Each test mounts its own 2 MiB tmpfs (root only: tmpfs cannot be mounted otherwise), fills
/// it with a filler file, and unmounts it at the end.
@Suite(.serialized, .enabled(if: geteuid() == 0, "mounting a small tmpfs needs root; run as root to test a full disk"))
struct DiskFullTests {
    /// A 2 MiB tmpfs (mode 0700) in a private directory, unmounted when released.
    final class SmallDisk {
        let base: TemporaryDirectory
        let mountPoint: URL
        var filler: URL { mountPoint.appending(path: "filler") }

        init() throws {
            base = try TemporaryDirectory("diskfull")
            mountPoint = base.file("disk")
            try FileManager.default.createDirectory(
                at: mountPoint, withIntermediateDirectories: false,
                attributes: [.posixPermissions: 0o700])
            guard mount("tmpfs", mountPoint.path, "tmpfs", 0, "size=2m,mode=0700") == 0 else {
                throw VaultError(.storage, "cannot mount a tmpfs at \(mountPoint.path): \(String(cString: strerror(errno)))")
            }
        }

        func file(_ name: String) -> URL { mountPoint.appending(path: name) }

        /// Writes the filler until the file system refuses another byte.
        func fill() {
            let fd = open(filler.path, O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            defer { close(fd) }
            let chunk = [UInt8](repeating: 0xee, count: 4096)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            var byte: UInt8 = 0xee
            while write(fd, &byte, 1) > 0 {}
        }

        func free() { unlink(filler.path) }

        deinit {
            umount2(mountPoint.path, Int32(MNT_DETACH))
        }
    }

    func requireFull(_ error: VaultError?, sourceLocation: SourceLocation = #_sourceLocation) {
        let message = error?.message.lowercased() ?? ""
        #expect(message.contains("full") || message.contains("space"), "a clear message: \(message)", sourceLocation: sourceLocation)
    }

    /// A key-file vault on the small disk (its key file stays off it), with one account's tokens.
    func makeVault(on disk: SmallDisk, logs: CapturedLogs) throws -> (Vault, URL, VaultOptions, VaultCredential, AccountID, TokenSet) {
        let keyFile = disk.base.file("vault.key")
        try VaultCredential.createKeyFile(at: keyFile)
        let url = disk.file("vault.db")
        let options = VaultOptions(logger: logs.logger(), kdf: TestVault.fastKDF)
        let vault = try Vault.create(at: url, credential: .keyFile(keyFile), options: options)
        let account = try vault.accounts.insert(Samples.account()).id
        let tokens = Samples.steadyTokens("full-1")
        try vault.tokens.store(tokens, for: account, replacing: nil)
        return (vault, url, options, .keyFile(keyFile), account, tokens)
    }

    @Test("disk full during a token rotation and a checkpoint: a storage error, the previous token opens, integrity ok once space is freed")
    func tokenRotationAndCheckpoint() throws {
        let disk = try SmallDisk()
        let logs = CapturedLogs()
        var (vault, url, options, credential, account, first) = try makeVault(on: disk, logs: logs)
        try vault.maintenance.checkpoint()
        let second = Samples.steadyTokens("full-2")
        var texts: [String] = []

        // A token rotation with no room for its WAL frames.
        disk.fill()
        let storeError = expectRefusal(.storage) { try vault.tokens.store(second, for: account, replacing: 1) }
        requireFull(storeError)
        #expect(try vault.tokens.current(for: account)?.tokens == first, "the previous token still opens")
        texts.append(storeError.map(String.init(describing:)) ?? "")
        vault.close()
        disk.free()

        vault = try Vault.open(at: url, credential: credential, options: options)
        #expect(try vault.tokens.current(for: account)?.tokens == first)
        #expect(try vault.maintenance.verify().passed)

        // A checkpoint that must grow the database file, with no room for it.
        let generation = try vault.tokens.store(second, for: account, replacing: 1)
        // (Each write also rewrites the header page, its write counter: few large writes, so
        // the WAL and the grown file fit the disk once the filler is gone.)
        for index in 0..<30 {
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: "n-\(index)", account: account, subject: "s", message: String(repeating: "m", count: 1200),
                    actions: [], createdAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(index))))
        }
        disk.fill()
        let checkpointError = expectRefusal(.storage) { try vault.maintenance.checkpoint() }
        requireFull(checkpointError)
        texts.append(checkpointError.map(String.init(describing:)) ?? "")
        #expect(try vault.tokens.current(for: account)?.generation == generation, "the committed token still opens from the WAL")
        #expect(try vault.tokens.current(for: account)?.tokens == second)

        disk.free()
        try vault.maintenance.checkpoint()
        #expect(try vault.maintenance.verify().passed)
        vault.close()
        vault = try Vault.open(at: url, credential: credential, options: options)
        defer { vault.close() }
        let kept = try vault.tokens.current(for: account)?.tokens == second && vault.notifications.count() == 30
        #expect(kept)
        let sound = try vault.maintenance.verify().passed
        #expect(sound)
        Self.record(tried: 2, refused: [storeError, checkpointError].compactMap { $0 }.count, kept: kept && sound)
        LogHygiene.check(logs, texts: texts, secrets: secrets(credential, first, second))
    }

    @Test("disk full during a key rotation: a storage error, the previous token opens, the rotation completes once space is freed")
    func keyRotation() throws {
        let disk = try SmallDisk()
        let logs = CapturedLogs()
        var (vault, url, options, credential, account, first) = try makeVault(on: disk, logs: logs)
        try vault.maintenance.checkpoint()
        disk.fill()
        let error = expectRefusal(.storage) { try vault.maintenance.rotateKeys(credential: credential) }
        requireFull(error)
        #expect(try vault.tokens.current(for: account)?.tokens == first)
        vault.close()
        disk.free()

        vault = try Vault.open(at: url, credential: credential, options: options)
        defer { vault.close() }
        #expect(try vault.tokens.current(for: account)?.tokens == first)
        try vault.maintenance.rotateKeys(credential: credential)
        let kept = try vault.tokens.current(for: account)?.tokens == first
        #expect(kept)
        let sound = try vault.maintenance.verify().passed
        #expect(sound)
        Self.record(tried: 1, refused: error == nil ? 0 : 1, kept: kept && sound)
        LogHygiene.check(logs, texts: [error.map(String.init(describing:)) ?? ""], secrets: secrets(credential, first))
    }

    @Test("disk full during a migration of the v1 fixture: a storage error, the file unchanged, the migration succeeds once space is freed")
    func migration() throws {
        let disk = try SmallDisk()
        let logs = CapturedLogs()
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: "Fixtures").appending(path: FixtureV1.fileName)
        let url = disk.file("vault.db")
        #expect(
            FileManager.default.createFile(
                atPath: url.path, contents: try Data(contentsOf: fixture),
                attributes: [.posixPermissions: 0o600]))
        let credential = try VaultCredential.passphrase(FixtureV1.passphrase)
        let options = VaultOptions(logger: logs.logger())
        let before = FileProbe.fingerprint(url)

        disk.fill()
        let error = expectRefusal(.storage) { try Vault.migrate(at: url, credential: credential, options: options) }
        requireFull(error)
        #expect(FileProbe.fingerprint(url) == before, "the vault is unchanged")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: disk.mountPoint.path).filter { $0.hasSuffix(".bak") }
        #expect(leftovers.isEmpty, "no half-written backup is left: \(leftovers)")

        disk.free()
        _ = try Vault.migrate(at: url, credential: credential, options: options)
        let vault = try Vault.open(at: url, credential: credential, options: options)
        defer { vault.close() }
        let kept = try FixtureV1.differences(in: vault, laterAccounts: 0).isEmpty
        #expect(kept)
        let sound = try vault.maintenance.verify().passed
        #expect(sound)
        Self.record(tried: 1, refused: error == nil ? 0 : 1, kept: kept && sound)
        LogHygiene.check(
            logs, texts: [error.map(String.init(describing:)) ?? ""],
            secrets: [FixtureV1.passphrase] + FixtureV1.accounts.flatMap { [$0.tokens.accessToken, $0.tokens.refreshToken ?? ""] })
    }

    /// Case 5's counts: disk-full moments tried, each refused as a storage error with every
    /// committed value kept (`lost` otherwise) and the vault sound afterwards.
    static func record(tried: Int, refused: Int, kept: Bool) {
        StressResults.record(
            StressCount(
                case: "5 disk full (token rotation, checkpoint, key rotation, migration)", tried: tried,
                passed: kept ? refused : 0, lost: kept ? 0 : tried, leaked: tried - refused))
    }

    func secrets(_ credential: VaultCredential, _ tokens: TokenSet...) -> [String] {
        var secrets = tokens.flatMap { [$0.accessToken, $0.refreshToken ?? "", $0.idToken ?? ""] }
        if case .keyFile(let url) = credential { secrets += LogHygiene.forms(ofKeyFile: url) }
        return secrets
    }
}
