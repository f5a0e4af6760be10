import Foundation
import Synchronization
import Testing
import VaultProcess
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 36's TPM keeper with the real parts: `swtpm` as the TPM, reached through tpm2-tss's
/// swtpm TCTI (`$VAULT_TPM2_TCTI`), which `vault` loads when a TPM slot is first used; PCRs
/// extended and lockout settings changed with tpm2-tools.
@Suite("a key slot sealed to the TPM (tpm2-tss, swtpm)")
struct TPM2KeeperTests {
    /// A software TPM listening on a Unix socket; stopped by ``stop()``. A second one at the
    /// same socket with another state directory is another TPM.
    final class SoftwareTPM: Sendable {
        let socket: URL
        let process: pid_t
        private let stopped = Atomic<Bool>(false)

        init(in directory: TemporaryDirectory, state: String = "tpm-state") throws {
            let stateDirectory = directory.file(state)
            try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true)
            socket = directory.file("tpm.sock")
            unlink(socket.path)
            unlink(socket.path + ".ctrl")
            let null = open("/dev/null", O_RDWR)
            defer { close(null) }
            process = try Spawn.start(
                URL(fileURLWithPath: "/usr/bin/swtpm"),
                [
                    "socket", "--tpm2", "--tpmstate", "dir=\(stateDirectory.path)", "--server", "type=unixio,path=\(socket.path)",
                    "--ctrl", "type=unixio,path=\(socket.path).ctrl", "--flags", "not-need-init,startup-clear",
                ],
                environment: ["PATH": "/usr/bin:/bin"], input: null, output: null, error: null)
            // Serving once a command gets an answer (the socket file alone is not proof).
            let deadline = ContinuousClock.now + TestTimeScale.scaled(.seconds(10))
            while try tool("tpm2_getrandom", ["8"]) != 0 {
                guard ContinuousClock.now < deadline else {
                    stop()
                    throw SoftwareTPMDidNotStart()
                }
                usleep(20_000)
            }
        }

        struct SoftwareTPMDidNotStart: Error {}

        var tcti: String { "swtpm:path=\(socket.path)" }

        /// Runs a tpm2-tools program against this TPM; its exit status.
        func tool(_ name: String, _ arguments: [String]) throws -> Int32 {
            let null = open("/dev/null", O_RDWR)
            defer { close(null) }
            let pid = try Spawn.start(
                URL(fileURLWithPath: "/usr/bin/\(name)"), ["-T", tcti] + arguments, environment: ["PATH": "/usr/bin:/bin", "TSS2_LOG": "all+NONE"],
                input: null, output: null, error: null)
            return Spawn.waitBlocking(pid).shellStatus
        }

        /// Stops swtpm once (a second call does nothing: its pid may belong to another child by then).
        func stop() {
            guard !stopped.exchange(true, ordering: .relaxed) else { return }
            kill(process, SIGTERM)
            _ = Spawn.waitBlocking(process)
        }
    }

    static func withTPM(_ body: (SoftwareTPM, VaultCLI) async throws -> Void) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm"), "make test-deps installs swtpm")
        var cli = try VaultCLI()
        let tpm = try SoftwareTPM(in: cli.directory)
        cli.environment["VAULT_TPM2_TCTI"] = tpm.tcti
        cli.environment["VAULT_PASSPHRASE"] = "the owner's passphrase"
        do {
            try #require(try await cli.run(["init", "--kdf", "interactive"]).status == 0)
            try await body(tpm, cli)
        } catch {
            tpm.stop()
            throw error
        }
        tpm.stop()
    }

    @Test("a TPM slot opens the vault with no passphrase; passwd seals it again; a fresh TPM opens nothing and the passphrase still does")
    func slotOpensOnThisTPMOnly() async throws {
        try await Self.withTPM { tpm, cli in
            let sealed = cli.file("vault.tpm2")
            let added = try await cli.run(["keeper", "add", "tpm2", sealed.path])
            #expect(added.status == 0 && added.stdout.contains("slot 1"), "\(added)")
            #expect(FileProbe.mode(sealed) == 0o600)
            var bare = cli
            bare.environment["VAULT_PASSPHRASE"] = nil
            #expect(try await bare.run(["accounts", "list"]).status == 0, "opened by the TPM alone")

            var change = cli
            change.environment["VAULT_NEW_PASSPHRASE"] = "the owner's second passphrase"
            let changed = try await change.run(["passwd", "--keep-keys"])
            #expect(changed.status == 0 && changed.stdout.contains("Sealed key slot 1 again"), "\(changed)")
            #expect(try await bare.run(["accounts", "list"]).status == 0, "the TPM slot still opens")

            // The vault and its sealed key taken to another machine: another TPM.
            tpm.stop()
            let other = try SoftwareTPM(in: cli.directory, state: "another-tpm")
            defer { other.stop() }
            let refused = try await bare.run(["accounts", "list"])
            #expect(refused.status == 64 && refused.stderr.contains("does not belong to this TPM") && refused.stderr.contains("slot 0"), "\(refused)")
            var owner = bare
            owner.environment["VAULT_PASSPHRASE"] = "the owner's second passphrase"
            #expect(try await owner.run(["accounts", "list"]).status == 0, "the recovery route")
        }
    }

    @Test("a PIN and a PCR policy: the right PIN opens; a wrong one is refused, then the TPM locks out; a changed PCR opens nothing")
    func pinAndPCRs() async throws {
        try await Self.withTPM { tpm, cli in
            // Two tries before the lockout, so the test sees it.
            try #require(
                try tpm.tool("tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=2", "--recovery-time=600", "--lockout-recovery-time=600"]) == 0)
            let sealed = cli.file("vault.tpm2")
            let added = try await cli.run(
                ["keeper", "add", "tpm2", sealed.path, "--tpm2-pin", "--tpm2-pcrs", "16"], environment: ["VAULT_NEW_TPM2_PIN": "4711"])
            #expect(added.status == 0, "\(added)")
            var bare = cli
            bare.environment["VAULT_PASSPHRASE"] = nil
            #expect(try await bare.run(["accounts", "list"], environment: ["VAULT_TPM2_PIN": "4711"]).status == 0)
            let noPIN = try await bare.run(["accounts", "list"])
            #expect(noPIN.status == 64 && noPIN.stderr.contains("needs its PIN"), "\(noPIN)")
            let wrong = try await bare.run(["accounts", "list"], environment: ["VAULT_TPM2_PIN": "1234"])
            #expect(wrong.status == 64 && wrong.stderr.contains("refused the PIN"), "\(wrong)")
            var lockedOut = wrong
            for _ in 0..<3 where !lockedOut.stderr.contains("lockout") {
                lockedOut = try await bare.run(["accounts", "list"], environment: ["VAULT_TPM2_PIN": "1234"])
            }
            #expect(lockedOut.stderr.contains("dictionary-attack lockout"), "\(lockedOut)")
            // The lockout lifted by its owner; then a PCR the key is sealed to moves.
            try #require(try tpm.tool("tpm2_dictionarylockout", ["--clear-lockout"]) == 0)
            #expect(try await bare.run(["accounts", "list"], environment: ["VAULT_TPM2_PIN": "4711"]).status == 0)
            try #require(try tpm.tool("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ab", count: 32)]) == 0)
            let moved = try await bare.run(["accounts", "list"], environment: ["VAULT_TPM2_PIN": "4711"])
            #expect(moved.status == 64 && moved.stderr.contains("PCRs no longer hold"), "\(moved)")
            // Recovery: the passphrase, then a new slot sealed to the PCRs as they are now.
            #expect(try await cli.run(["keeper", "remove", "tpm2"]).status == 0)
            let again = try await cli.run(
                ["keeper", "add", "tpm2", cli.file("vault2.tpm2").path, "--tpm2-pin", "--tpm2-pcrs", "16"], environment: ["VAULT_NEW_TPM2_PIN": "4711"])
            #expect(again.status == 0, "\(again)")
            #expect(try await bare.run(["accounts", "list"], environment: ["VAULT_TPM2_PIN": "4711"]).status == 0)
        }
    }

    @Test("no TPM to reach: keeper add says so, naming /dev/tpmrm0 and group tss, and creates nothing")
    func noTPM() async throws {
        var cli = try VaultCLI()
        cli.environment["VAULT_PASSPHRASE"] = "the owner's passphrase"
        try #require(try await cli.run(["init", "--kdf", "interactive"]).status == 0)
        cli.environment["VAULT_TPM2_TCTI"] = "swtpm:path=\(cli.file("no-tpm.sock").path)"
        let sealed = cli.file("vault.tpm2")
        let refused = try await cli.run(["keeper", "add", "tpm2", sealed.path])
        #expect(refused.status != 0 && refused.stderr.contains("no TPM here") && refused.stderr.contains("group tss"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: sealed.path))
        let status = try await cli.run(["status", "--json"]).jsonObject()
        #expect((status["key_slots"] as? [Any])?.count == 1, "no slot was added: \(status)")
    }

    @Test("a sealed key that opens another vault, or a slot pointing at /dev/zero: the passphrase is asked instead, nothing hangs")
    func staleOrForgedSealedKey() async throws {
        try await Self.withTPM { tpm, cli in
            let sealed = cli.file("vault.tpm2")
            try #require(try await cli.run(["keeper", "add", "tpm2", sealed.path]).status == 0)
            // Another vault's sealed key (same TPM) put where this slot's was.
            var other = try VaultCLI()
            other.environment["VAULT_TPM2_TCTI"] = tpm.tcti
            other.environment["VAULT_PASSPHRASE"] = "another owner"
            try #require(try await other.run(["init", "--kdf", "interactive"]).status == 0)
            let otherSealed = other.file("vault.tpm2")
            try #require(try await other.run(["keeper", "add", "tpm2", otherSealed.path]).status == 0)
            try FileManager.default.removeItem(at: sealed)
            try FileManager.default.copyItem(at: otherSealed, to: sealed)
            var bare = cli
            bare.environment["VAULT_PASSPHRASE"] = nil
            let stale = try await bare.run(["accounts", "list"])
            #expect(stale.status == 64 && stale.stderr.contains("asking for the passphrase") && stale.stderr.contains("no passphrase"), "\(stale)")
            #expect(try await cli.run(["accounts", "list"]).status == 0, "the passphrase opens it")

            // The slot's path edited in the file (no key needed) to a device that never ends.
            let edited = try Self.editLabel(of: cli.vault, to: "/dev/zero")
            try #require(edited)
            let start = ContinuousClock.now
            let forged = try await bare.run(["accounts", "list"])
            #expect(forged.status == 64 && forged.stderr.contains("not a TPM-sealed key of this user"), "\(forged)")
            #expect(ContinuousClock.now - start < TestTimeScale.scaled(.seconds(20)))
        }
    }

    /// Sets every key slot's label in the vault file, as someone without the key could.
    static func editLabel(of vault: URL, to label: String) throws -> Bool {
        let null = open("/dev/null", O_RDWR)
        defer { close(null) }
        let pid = try Spawn.start(
            URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('UPDATE key_slots SET label=?', (sys.argv[2],)); c.commit()", vault.path,
                label,
            ],
            environment: ["PATH": "/usr/bin:/bin"], input: null, output: null, error: null)
        return Spawn.waitBlocking(pid).shellStatus == 0
    }
}
