import Foundation
import Testing
import VaultCrypto
import VaultProcess
import VaultStore
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 36's desktop keeper with the real parts: a private D-Bus session bus and
/// gnome-keyring-daemon (its login keyring unlocked with a test password), libsecret loaded by
/// `vault` when it first asks.
@Suite("the vault key in the desktop keyring (Secret Service)")
struct SecretServiceKeeperTests {
    /// A session bus of the test's own and a keyring daemon on it; stopped by ``stop()``.
    final class Desktop: Sendable {
        let home: URL
        let bus: String
        let daemon: pid_t
        let directory: TemporaryDirectory

        init() async throws {
            directory = try TemporaryDirectory()
            home = directory.url
            let socket = directory.file("bus")
            bus = "unix:path=\(socket.path)"
            let null = open("/dev/null", O_RDWR)
            defer { close(null) }
            // --print-address writes the address once the bus listens: reading it is the wait.
            var ready: [Int32] = [0, 0]
            try #require(pipe(&ready) == 0)
            daemon = try Spawn.start(
                URL(fileURLWithPath: "/usr/bin/dbus-daemon"), ["--session", "--nofork", "--nopidfile", "--address=\(bus)", "--print-address=1"],
                environment: ["PATH": "/usr/bin:/bin", "HOME": home.path], input: null, output: ready[1], error: null)
            close(ready[1])
            var byte: UInt8 = 0
            while read(ready[0], &byte, 1) == 1, byte != 0x0A {}
            close(ready[0])
            try #require(FileManager.default.fileExists(atPath: socket.path), "dbus-daemon did not listen")
            // The login keyring, created and unlocked with this password (read on standard input).
            let unlocked = try run("/bin/sh", ["-c", "printf test | gnome-keyring-daemon --unlock --components=secrets"]).status
            if unlocked != 0 { stop() }  // the bus is not left behind by a failed start
            try #require(unlocked == 0, "gnome-keyring-daemon --unlock")
        }

        var environment: [String: String] {
            ["DBUS_SESSION_BUS_ADDRESS": bus, "HOME": home.path, "XDG_RUNTIME_DIR": home.path, "VAULT_KEYRING_TIMEOUT": "5"]
        }

        /// Runs a program on this desktop's bus with `input` on its standard input; its exit
        /// status and, when `capturing`, what it wrote on standard output (not for a program that
        /// leaves a daemon behind holding it: the read would wait for the daemon).
        func run(_ program: String, _ arguments: [String], input: String = "", capturing: Bool = false) throws -> (status: Int32, output: String) {
            var toChild: [Int32] = [0, 0]
            var fromChild: [Int32] = [0, 0]
            try #require(pipe(&toChild) == 0 && pipe(&fromChild) == 0)
            let null = open("/dev/null", O_RDWR)
            defer { close(null) }
            var environment = self.environment
            environment["PATH"] = "/usr/bin:/bin"
            let pid = try Spawn.start(
                URL(fileURLWithPath: program), arguments, environment: environment, input: toChild[0], output: capturing ? fromChild[1] : null,
                error: null)
            close(toChild[0])
            close(fromChild[1])
            _ = input.utf8CString.withUnsafeBufferPointer { write(toChild[1], $0.baseAddress, $0.count - 1) }
            close(toChild[1])
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 256)
            while capturing, case let count = read(fromChild[0], &buffer, buffer.count), count > 0 { bytes += buffer[0..<count] }
            close(fromChild[0])
            return (Spawn.waitBlocking(pid).shellStatus, String(decoding: bytes, as: UTF8.self))
        }

        /// The keyring's item for `vaultID` (its base64url text), read with secret-tool; nil when none.
        func lookup(vaultID: String) throws -> String? {
            let found = try run("/usr/bin/secret-tool", ["lookup", "application", "credentialvault", "vault", vaultID], capturing: true)
            return found.status == 0 ? found.output.trimmingCharacters(in: .whitespacesAndNewlines) : nil
        }

        func stop() {
            kill(daemon, SIGTERM)  // gnome-keyring-daemon leaves with its bus
            _ = Spawn.waitBlocking(daemon)
        }
    }

    static func withDesktop(_ body: (Desktop) async throws -> Void) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/gnome-keyring-daemon"), "make test-deps installs gnome-keyring")
        let desktop = try await Desktop()
        do {
            try await body(desktop)
        } catch {
            desktop.stop()
            throw error
        }
        desktop.stop()
    }

    @Test("init keeps a new key in the keyring: every command opens the vault with no key file; the recovery file opens it too")
    func initWithTheKeyring() async throws {
        try await Self.withDesktop { desktop in
            let cli = try VaultCLI()
            let recovery = cli.file("recovery.key")
            let created = try await cli.run(
                ["init", "--keeper", "secret-service", "--recovery-key-file", recovery.path], environment: desktop.environment)
            try #require(created.status == 0, "\(created)")
            #expect(FileProbe.mode(recovery) == 0o600 && FileProbe.bytes(recovery).count == 32)
            let listed = try await cli.run(["accounts", "list"], environment: desktop.environment)
            #expect(listed.status == 0, "\(listed)")
            // Two slots with two keys: the recovery file is slot 0, the keyring's own key slot 1.
            let entries = try await Self.slots(cli, desktop)
            #expect(entries.map { $0["slot"] as? Int } == [0, 1], "\(entries)")
            #expect(entries.last?["keeper"] as? String == "secret-service" && entries.last?["here"] as? String == "keyring item present", "\(entries)")
            #expect(
                try desktop.lookup(vaultID: try Self.vaultID(cli)) != Base64URL.encode(FileProbe.bytes(recovery)), "the keyring never holds the recovery key")
            // The recovery route, with no keyring at all.
            #expect(try await cli.run(["verify", "--key-file", recovery.path]).status == 0)
            // No keyring to ask: refused, saying why (not a hang, not a prompt).
            let away = try await cli.run(["accounts", "list"], environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"])
            #expect(away.status == 64 && away.stderr.contains("desktop keyring"), "\(away)")
            // Without a recovery choice, --keeper is refused before anything is made.
            let other = try VaultCLI()
            #expect(try await other.run(["init", "--keeper", "secret-service"], environment: desktop.environment).status == 64)
            #expect(!FileManager.default.fileExists(atPath: other.vault.path))
        }
    }

    @Test(
        "add makes a slot with the keyring's own key; remove needs another way in than that slot (or --force); a key file that does not open the vault adds nothing"
    )
    func removeAndAdd() async throws {
        try await Self.withDesktop { desktop in
            var cli = try await VaultCLI.keyFileVault()
            let keyFile = try #require(cli.environment["VAULT_KEY_FILE"])
            cli.environment["VAULT_KEY_FILE"] = nil
            let added = try await cli.run(["keeper", "add", "secret-service", "--key-file", keyFile], environment: desktop.environment)
            #expect(added.status == 0, "\(added)")
            #expect(try await cli.run(["accounts", "list"], environment: desktop.environment).status == 0)

            let refused = try await cli.run(["keeper", "remove", "secret-service"], environment: desktop.environment)
            #expect(refused.status == 64 && refused.stderr.contains("slot 1") && refused.stderr.contains("itself"), "\(refused)")
            // passwd changes slot 0: the keyring's slot 1 cannot stand in for it.
            let viaSlot = try await cli.run(["passwd", "--new-key-file", cli.file("next.key").path], environment: desktop.environment)
            #expect(viaSlot.status == 64 && viaSlot.stderr.contains("--key-file"), "the keyring's key is not asked for: \(viaSlot)")
            let removed = try await cli.run(["keeper", "remove", "secret-service", "--key-file", keyFile], environment: desktop.environment)
            #expect(removed.status == 0, "\(removed)")
            let gone = try await cli.run(["accounts", "list"], environment: desktop.environment)
            #expect(gone.status == 64 && gone.stderr.contains("holds no key"), "\(gone)")
            #expect(try await cli.run(["keeper", "remove", "secret-service", "--force"], environment: desktop.environment).status == 67)

            // Another vault's key file proves nothing: refused, nothing stored.
            let other = try await VaultCLI.keyFileVault()
            let wrong = try await cli.run(
                ["keeper", "add", "secret-service", "--key-file", try #require(other.environment["VAULT_KEY_FILE"])], environment: desktop.environment)
            #expect(wrong.status == 77, "\(wrong)")
            #expect(try await cli.run(["accounts", "list"], environment: desktop.environment).status == 64)
        }
    }

    @Test("passwd: the keyring's key follows a new key file, and is removed for a passphrase")
    func passwdUpdatesTheKeyring() async throws {
        try await Self.withDesktop { desktop in
            let cli = try VaultCLI()
            try #require(try await cli.run(["init", "--keeper", "secret-service", "--no-recovery"], environment: desktop.environment).status == 0)
            let newKey = cli.file("new.key")
            let changed = try await cli.run(["passwd", "--new-key-file", newKey.path], environment: desktop.environment)
            #expect(changed.status == 0 && changed.stdout.contains("keyring now holds the new key"), "\(changed)")
            #expect(try await cli.run(["accounts", "list"], environment: desktop.environment).status == 0, "opened from the keyring's new key")
            var passphrase = desktop.environment
            passphrase["VAULT_NEW_PASSPHRASE"] = "a passphrase long enough"
            let toPassphrase = try await cli.run(["passwd"], environment: passphrase)
            #expect(toPassphrase.status == 0 && toPassphrase.stdout.contains("Removed the old key"), "\(toPassphrase)")
            let entries = try await Self.slots(cli, desktop)
            #expect(entries.count == 1 && entries.first?["kind"] as? String == "passphrase", "a passphrase vault, no slot: \(entries)")
            var opening = desktop.environment
            opening["VAULT_PASSPHRASE"] = "a passphrase long enough"
            #expect(try await cli.run(["accounts", "list"], environment: opening).status == 0)
        }
    }

    @Test("remove --force takes away only an item that opens this vault: a stale key stays, and the way to clear it is named")
    func forceRemovesOnlyWhatOpens() async throws {
        try await Self.withDesktop { desktop in
            var cli = try await VaultCLI.keyFileVault()
            let keyFile = try #require(cli.environment["VAULT_KEY_FILE"])
            cli.environment["VAULT_KEY_FILE"] = nil
            // An item for this vault's id whose key opens nothing (left by another tool, or stale).
            let stale = Base64URL.encode((0..<32).map { UInt8($0) })
            let stored = try desktop.run(
                "/usr/bin/secret-tool",
                ["store", "--label=stale", "xdg:schema", "org.credentialvault.VaultKey", "application", "credentialvault", "vault", try Self.vaultID(cli)],
                input: stale)
            try #require(stored.status == 0, "secret-tool store")
            let refused = try await cli.run(["keeper", "remove", "secret-service", "--force"], environment: desktop.environment)
            #expect(refused.status == 77 && refused.stderr.contains("secret-tool clear"), "\(refused)")
            #expect(try desktop.lookup(vaultID: try Self.vaultID(cli)) == stale, "nothing was removed")
            #expect(try await cli.run(["accounts", "list"], environment: desktop.environment).status == 77, "the stale key opens nothing")
            #expect(try await cli.run(["accounts", "list", "--key-file", keyFile]).status == 0)
        }
    }

    @Test(
        "a passphrase vault with a keyring slot and a key-file slot: each opens it with no passphrase; passwd seals both again; away from the keyring passwd is refused, nothing changed"
    )
    func passphraseVaultWithSlots() async throws {
        try await Self.withDesktop { desktop in
            var cli = try VaultCLI()
            cli.environment["VAULT_PASSPHRASE"] = "the first passphrase"
            try #require(try await cli.run(["init", "--kdf", "interactive"]).status == 0)
            let recovery = cli.file("ci.key")
            let added = try await cli.run(["keeper", "add", "secret-service"], environment: desktop.environment)
            #expect(added.status == 0 && added.stdout.contains("slot 1"), "\(added)")
            let addedFile = try await cli.run(["keeper", "add", "key-file", recovery.path], environment: desktop.environment)
            #expect(addedFile.status == 0 && addedFile.stdout.contains("slot 2"), "\(addedFile)")
            #expect(FileProbe.mode(recovery) == 0o600 && FileProbe.bytes(recovery).count == 32)
            var bare = cli
            bare.environment["VAULT_PASSPHRASE"] = nil
            // No passphrase anywhere and no terminal: the keyring's slot opens it.
            #expect(try await bare.run(["accounts", "list"], environment: desktop.environment).status == 0)
            #expect(try await bare.run(["accounts", "list", "--key-file", recovery.path]).status == 0)
            let status = try await bare.run(["status"])
            #expect(status.stdout.contains("slot 1 (secret-service") && status.stdout.contains("slot 2 (\(recovery.path))"), "\(status)")

            // Away from the desktop the keyring's slot cannot be sealed again: refused, nothing changed.
            var away = cli
            away.environment["VAULT_NEW_PASSPHRASE"] = "the second passphrase"
            let before = FileProbe.bytes(cli.vault)
            let refused = try await away.run(["passwd"], environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"])
            #expect(refused.status == 64 && refused.stderr.contains("slot 1") && refused.stderr.contains("keeper remove 1"), "\(refused)")
            #expect(FileProbe.bytes(cli.vault) == before)

            let changed = try await away.run(["passwd"], environment: desktop.environment)
            #expect(changed.status == 0 && changed.stdout.contains("Sealed key slots 1, 2 again"), "\(changed)")
            #expect(try await bare.run(["accounts", "list"], environment: desktop.environment).status == 0, "the keyring's slot still opens")
            #expect(try await bare.run(["accounts", "list", "--key-file", recovery.path]).status == 0, "the key file's slot still opens")
            let oldFile = cli.file("old-pass")
            try Data("the first passphrase".utf8).write(to: oldFile)
            #expect(try await bare.run(["accounts", "list", "--passphrase-file", oldFile.path]).status == 77, "the old passphrase opens nothing")

            // Removing the keyring's slot takes its item away; the key file's stays.
            let removed = try await bare.run(["keeper", "remove", "secret-service", "--key-file", recovery.path], environment: desktop.environment)
            #expect(removed.status == 0 && removed.stdout.contains("Removed its key from the desktop keyring"), "\(removed)")
            #expect(try desktop.lookup(vaultID: try Self.vaultID(cli)) == nil)
            #expect(try await bare.run(["accounts", "list", "--key-file", recovery.path]).status == 0)
        }
    }

    /// `keeper list --json`, parsed.
    static func slots(_ cli: VaultCLI, _ desktop: Desktop) async throws -> [[String: Any]] {
        let listed = try await cli.run(["keeper", "list", "--json"], environment: desktop.environment)
        return try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]], "\(listed)")
    }

    static func vaultID(_ cli: VaultCLI) throws -> String {
        let url = cli.vault
        return try Vault.inspect(at: url).vaultID
    }

    @Test("the agent of a keyring-kept vault unlocks again from the keyring after a lock, with no key sent")
    func agentUnlocksFromTheKeyring() async throws {
        try await Self.withDesktop { desktop in
            var cli = try VaultCLI()
            let runtime = cli.file("run")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            cli.environment["XDG_RUNTIME_DIR"] = runtime.path
            for (name, value) in desktop.environment where name != "XDG_RUNTIME_DIR" { cli.environment[name] = value }
            try #require(try await cli.run(["init", "--keeper", "secret-service", "--no-recovery"]).status == 0)
            let started = try await cli.run(["agent", "start"])
            try #require(started.status == 0, "\(started)")
            do {
                #expect(try await cli.run(["lock"]).status == 0)
                let unlocked = try await cli.run(["unlock", "--no-prompt"])
                #expect(unlocked.status == 0, "\(unlocked)")
                let status = try await cli.run(["agent", "status", "--json"]).jsonObject()
                #expect(status["locked"] as? Bool == false, "\(status)")
            } catch {
                _ = try? await cli.run(["agent", "stop"])
                throw error
            }
            _ = try await cli.run(["agent", "stop"])
        }
    }

    @Test("a locked keyring whose unlock prompt cannot be shown: refused at once, saying it is locked (not 'no key'); nothing opened")
    func lockedKeyring() async throws {
        try await Self.withDesktop { desktop in
            let cli = try VaultCLI()
            let created = try await cli.run(["init", "--keeper", "secret-service", "--no-recovery"], environment: desktop.environment)
            try #require(created.status == 0, "\(created)")
            let locked = try desktop.run(
                "/usr/bin/dbus-send",
                [
                    "--session", "--dest=org.freedesktop.secrets", "--print-reply", "/org/freedesktop/secrets",
                    "org.freedesktop.Secret.Service.Lock", "array:objpath:/org/freedesktop/secrets/collection/login",
                ])
            try #require(locked.status == 0, "locking the login keyring")
            let start = ContinuousClock.now
            let refused = try await cli.run(["accounts", "list"], environment: desktop.environment)
            #expect(refused.status == 64 && refused.stderr.contains("keyring is locked"), "\(refused)")
            #expect(ContinuousClock.now - start < .seconds(30), "not left waiting on a prompt")
        }
    }
}
