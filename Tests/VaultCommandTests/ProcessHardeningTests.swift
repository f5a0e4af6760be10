import DevGateway
import Foundation
import Testing
import VaultTestSupport

/// The `vault` process, looked at from outside while it runs: it cannot dump core, and the
/// passphrases it was given in its environment are gone from it.
@Suite("The vault process hardens itself")
struct ProcessHardeningTests {
    /// Made-up passphrases; the test asserts they are absent.
    static let passphrase = "made up passphrase for hardening 9Tq"
    static let newPassphrase = "made up new passphrase for hardening 3Vw"

    /// The soft core size limit in `/proc/PID/limits`, as text ("0", "unlimited", …).
    static func coreLimit(of pid: Int32) -> String? {
        let text = String(decoding: FileProbe.bytes(URL(fileURLWithPath: "/proc/\(pid)/limits")), as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Max core file size") }) else { return nil }
        return line.dropFirst("Max core file size".count).split(separator: " ").first.map(String.init)
    }

    /// Raises this process's soft core limit to `bytes` for `body` (its children inherit it),
    /// then puts it back. Returns nil when the hard limit does not allow it.
    static func withCoreLimit<T>(_ bytes: rlim_t, _ body: () async throws -> T) async rethrows -> T? {
        var saved = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &saved) == 0, saved.rlim_max >= bytes else { return nil }
        var raised = rlimit(rlim_cur: bytes, rlim_max: saved.rlim_max)
        guard setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &raised) == 0 else { return nil }
        defer { _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &saved) }
        return try await body()
    }

    @Test("a running `vault token` is not dumpable and holds no passphrase in its environment")
    func runningVaultIsHardened() async throws {
        let gateway = try await DevGateway.start()
        let cli = try VaultCLI(environment: ["VAULT_PASSPHRASE": Self.passphrase])
        #expect(try await cli.run(["init"]).status == 0)
        // 30 s is inside the 60 s leeway: `vault token` must refresh, and waits for the gateway.
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli", accessTokenLifetime: .seconds(30))
        let added = try await cli.run(
            [
                "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                "--subject", "alice",
            ],
            stdin: AccountsAndTokenTests.tokenResponse(issued))
        #expect(added.status == 0, "\(added)")
        await gateway.holdTokenResponses()

        let environment = [
            "PATH": "/usr/bin:/bin", "HOME": cli.directory.url.path, "VAULT_PATH": cli.vault.path,
            "VAULT_PASSPHRASE": Self.passphrase, "VAULT_NEW_PASSPHRASE": Self.newPassphrase,
            "HARDENING_TEST_MARKER": "still-here",
        ]
        // The child starts with a core limit above 0 (inherited from here), so a 0 in its
        // /proc/PID/limits is its own doing.
        let started = try await Self.withCoreLimit(4096) {
            try ChildProgram(try BuiltProgram.url(named: "vault"), ["token"], environment: environment)
        }
        let child = try #require(started, "the hard core limit does not allow a child with a core limit above 0")
        #expect(
            await gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(60))) { $0.tokenRequests >= 1 },
            "`vault token` never asked the gateway")
        let pid = child.processIdentifier

        // prctl(PR_SET_DUMPABLE, 0) comes first and the core limit is set only once it succeeded,
        // so a limit of 0 says both happened. (Linux shows dumpability nowhere in /proc for
        // root, which owns every /proc/PID file anyway; for another user the files turn root's.)
        #expect(Self.coreLimit(of: pid) == "0", "the running vault may still dump core")
        if geteuid() != 0 {
            let owner = (try? FileManager.default.attributesOfItem(atPath: "/proc/\(pid)/environ"))?[.ownerAccountID] as? NSNumber
            #expect(
                owner?.intValue == 0,
                "a dumpable process's /proc/PID/environ belongs to its user")
        }

        // What the kernel shows of its environment: the passphrases overwritten, the rest intact.
        let environ = FileProbe.bytes(URL(fileURLWithPath: "/proc/\(pid)/environ"))
        if environ.isEmpty {
            #expect(geteuid() != 0, "root can read /proc/PID/environ")  // others cannot: non-dumpable
        } else {
            let text = String(decoding: environ, as: UTF8.self)
            #expect(text.contains("HARDENING_TEST_MARKER=still-here"), "the environment was read")
            #expect(
                SecretTrace.firstFound(of: [Self.passphrase, Self.newPassphrase], in: text) == nil,
                "a passphrase is still in the running vault's environment")
        }

        await gateway.releaseTokenResponses()
        let lines = try await child.finish()
        #expect(lines.count == 1 && lines.first != issued.accessToken, "a refreshed access token was printed")
        await gateway.stop()
    }
}
