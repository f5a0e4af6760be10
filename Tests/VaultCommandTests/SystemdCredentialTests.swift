import DevGateway
import Foundation
import Testing
import VaultProcess
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 36's systemd keeper: `vault init --systemd-creds` seals a new key with the real
/// `systemd-creds` (run as root, as for a system service, against this host's credential
/// secret); a service finds it decrypted in `$CREDENTIALS_DIRECTORY`, as systemd puts it there.
@Suite("the vault key as a systemd credential")
struct SystemdCredentialTests {
    static let program = "/usr/bin/systemd-creds"

    /// Runs a program (posix_spawn, as the suite starts every child); its exit status.
    static func run(_ program: String, _ arguments: [String]) throws -> Int32 {
        let null = open("/dev/null", O_RDWR)
        defer { close(null) }
        let pid = try Spawn.start(URL(fileURLWithPath: program), arguments, environment: ["PATH": "/usr/bin:/bin"], input: null, output: null, error: null)
        return Spawn.waitBlocking(pid).shellStatus
    }

    /// What systemd does for `LoadCredentialEncrypted=vault.key:FILE`: the credential decrypted
    /// into a directory of the service's own, the file readable by its user alone.
    static func credentialsDirectory(for sealed: URL, in cli: VaultCLI, name: String = "creds") throws -> URL {
        let directory = cli.file(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let target = directory.appending(path: "vault.key")
        try #require(try run(program, ["decrypt", "--name=vault.key", sealed.path, target.path]) == 0, "systemd-creds decrypt")
        chmod(target.path, 0o400)
        return directory
    }

    @Test("init seals a new key and writes none in the clear; a service given the credential opens the vault with no key file")
    func sealedKeyOpensInTheService() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program), "systemd-creds is installed by .ci/run")
        let cli = try VaultCLI()
        let sealed = cli.file("vault.key.cred")
        let created = try await cli.run(["init", "--systemd-creds", sealed.path, "--systemd-creds-key", "host"])
        try #require(created.status == 0, "\(created)")
        #expect(created.stdout.contains("LoadCredentialEncrypted=vault.key:\(sealed.path)"))
        // Nothing but the vault and the sealed credential: no key file was written anywhere here.
        let written = try FileManager.default.contentsOfDirectory(atPath: cli.directory.url.path).filter { !$0.hasPrefix(".") }
        #expect(Set(written).isSubset(of: ["vault.db", "vault.db-wal", "vault.db-shm", "vault.key.cred"]), "\(written)")
        let status = try await cli.run(["status", "--json"]).jsonObject()
        #expect((status["credential"] as? [String: Any])?["kind"] as? String == "key_file", "\(status)")

        // Without the credential: refused, naming the ways a key-file vault is opened.
        let without = try await cli.run(["accounts", "list"])
        #expect(without.status == 64 && without.stderr.contains("vault.key") && without.stderr.contains("LoadCredentialEncrypted"), "\(without)")

        // As the service: $CREDENTIALS_DIRECTORY holds the decrypted credential.
        let directory = try Self.credentialsDirectory(for: sealed, in: cli)
        let service = ["CREDENTIALS_DIRECTORY": directory.path]
        let listed = try await cli.run(["accounts", "list"], environment: service)
        #expect(listed.status == 0, "\(listed)")
        #expect(try await cli.run(["verify"], environment: service).status == 0)
    }

    @Test("a credential of another vault, or one others can read: refused, saying which, nothing opened")
    func wrongOrExposedCredential() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program), "systemd-creds is installed by .ci/run")
        let cli = try VaultCLI()
        let sealed = cli.file("a.cred")
        try #require(try await cli.run(["init", "--systemd-creds", sealed.path, "--systemd-creds-key", "host"]).status == 0)
        var other = try VaultCLI()
        other.environment["VAULT_PATH"] = other.vault.path
        let otherSealed = other.file("b.cred")
        try #require(try await other.run(["init", "--systemd-creds", otherSealed.path, "--systemd-creds-key", "host"]).status == 0)

        let foreign = try Self.credentialsDirectory(for: otherSealed, in: cli, name: "foreign")
        let wrong = try await cli.run(["accounts", "list"], environment: ["CREDENTIALS_DIRECTORY": foreign.path])
        #expect(wrong.status == 77 && wrong.stderr.contains("wrong key (from the systemd credential vault.key"), "\(wrong)")

        let exposed = try Self.credentialsDirectory(for: sealed, in: cli, name: "exposed")
        chmod(exposed.appending(path: "vault.key").path, 0o644)
        let refused = try await cli.run(["accounts", "list"], environment: ["CREDENTIALS_DIRECTORY": exposed.path])
        #expect(refused.status == 82 && refused.stderr.contains("accessible by other users"), "\(refused)")
        // Group bits with no ACL behind them: refused the same way.
        chmod(exposed.appending(path: "vault.key").path, 0o440)
        #expect(try await cli.run(["accounts", "list"], environment: ["CREDENTIALS_DIRECTORY": exposed.path]).status == 82)
    }

    @Test("a service of another user: systemd's root-owned 0400 credential with a read ACL for that user (mode 0440) is taken")
    func credentialWithAnACL() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program), "systemd-creds is installed by .ci/run")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/setfacl"), "make test-deps installs acl")
        let cli = try VaultCLI()
        let sealed = cli.file("vault.key.cred")
        try #require(try await cli.run(["init", "--systemd-creds", sealed.path, "--systemd-creds-key", "host"]).status == 0)
        let directory = try Self.credentialsDirectory(for: sealed, in: cli)
        let file = directory.appending(path: "vault.key")
        // What systemd's write_credential does for User=: 0400, then an ACL entry for the user.
        try #require(try Self.run("/usr/bin/setfacl", ["-m", "u:nobody:r", file.path]) == 0)
        #expect(FileProbe.mode(file) == 0o440, "the ACL mask shows in the group bits")
        let listed = try await cli.run(["accounts", "list"], environment: ["CREDENTIALS_DIRECTORY": directory.path])
        #expect(listed.status == 0, "\(listed)")

        // A sealed file that exists already is never overwritten, and no vault is made.
        let again = try VaultCLI()
        try Data("keep".utf8).write(to: again.file("taken.cred"))
        let clash = try await again.run(["init", "--systemd-creds", again.file("taken.cred").path])
        #expect(clash.status == 73 && !FileManager.default.fileExists(atPath: again.vault.path), "\(clash)")
        #expect(try String(contentsOf: again.file("taken.cred"), encoding: .utf8) == "keep")
        #expect(try await again.run(["init", "--systemd-creds", again.file("x.cred").path, "--key-file", again.file("k").path]).status == 64)
    }

    @Test("the agent run as the service unlocks from the credential, and again after a lock with no key sent")
    func agentFromTheCredential() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program), "systemd-creds is installed by .ci/run")
        let gateway = try await DevGateway.start()
        defer { Task { await gateway.stop() } }
        var cli = try VaultCLI()
        let runtime = cli.file("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        cli.environment["XDG_RUNTIME_DIR"] = runtime.path
        let sealed = cli.file("vault.key.cred")
        try #require(try await cli.run(["init", "--systemd-creds", sealed.path, "--systemd-creds-key", "host"]).status == 0)
        var service = cli
        service.environment["CREDENTIALS_DIRECTORY"] = try Self.credentialsDirectory(for: sealed, in: cli).path
        let issued = await gateway.issueGrant(subject: "svc", clientID: "vault-cli")
        let added = try await service.run(
            ["accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli", "--subject", "svc"],
            stdin: AccountsAndTokenTests.tokenResponse(issued))
        try #require(added.status == 0, "\(added)")
        let started = try await service.run(["agent", "start"])
        try #require(started.status == 0, "\(started)")
        do {
            // A client outside the service (no credential) is served by the agent.
            #expect(try await cli.run(["token"]).status == 0)
            #expect(try await cli.run(["lock"]).status == 0)
            #expect(try await cli.run(["token"]).status == 79)
            let unlocked = try await cli.run(["unlock", "--no-prompt"])
            #expect(unlocked.status == 0, "the agent unlocks with its own credential: \(unlocked)")
            #expect(try await cli.run(["token"]).status == 0)
        } catch {
            _ = try? await cli.run(["agent", "stop"])
            throw error
        }
        _ = try await cli.run(["agent", "stop"])
    }

    @Test(
        "a passphrase vault gains a systemd-creds slot: the service opens it with no passphrase, its agent unlocks from it, and passwd as root seals it again")
    func slotForAService() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program), "systemd-creds is installed by .ci/run")
        var cli = try VaultCLI()
        let runtime = cli.file("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        cli.environment["XDG_RUNTIME_DIR"] = runtime.path
        cli.environment["VAULT_PASSPHRASE"] = "the admin's passphrase"
        try #require(try await cli.run(["init", "--kdf", "interactive"]).status == 0)
        let sealed = cli.file("vault.key.cred")
        let added = try await cli.run(["keeper", "add", "systemd-creds", sealed.path, "--systemd-creds-key", "host"])
        #expect(added.status == 0 && added.stdout.contains("LoadCredentialEncrypted=vault.key:\(sealed.path)"), "\(added)")
        var service = cli
        service.environment["VAULT_PASSPHRASE"] = nil
        service.environment["CREDENTIALS_DIRECTORY"] = try Self.credentialsDirectory(for: sealed, in: cli).path
        #expect(try await service.run(["accounts", "list"]).status == 0)

        // passwd (root, no service credential at hand): the sealed file is opened with systemd-creds.
        var admin = cli
        admin.environment["VAULT_NEW_PASSPHRASE"] = "the admin's second passphrase"
        let changed = try await admin.run(["passwd", "--keep-keys"])
        #expect(changed.status == 0 && changed.stdout.contains("Sealed key slot 1 again"), "\(changed)")
        #expect(try await service.run(["accounts", "list"]).status == 0, "the service's slot still opens")

        let started = try await service.run(["agent", "start"])
        try #require(started.status == 0, "\(started)")
        do {
            let status = try await cli.run(["agent", "status", "--json"]).jsonObject()
            #expect(status["unlocked_by_slot"] as? Int == 1, "\(status)")
            #expect(try await cli.run(["lock"]).status == 0)
            var bare = cli
            bare.environment["VAULT_PASSPHRASE"] = nil
            let unlocked = try await bare.run(["unlock", "--no-prompt"])
            #expect(unlocked.status == 0 && unlocked.stdout.contains("keeper"), "the agent unlocks with its slot's key: \(unlocked)")
        } catch {
            _ = try? await cli.run(["agent", "stop"])
            throw error
        }
        _ = try await cli.run(["agent", "stop"])
    }
}
