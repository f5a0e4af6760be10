import Foundation
import Testing
import VaultTestSupport

/// Issue 12, parts 2 and 3, through the built `vault`: where `accounts add` lets a credential
/// go, `--pin`, and the exit code of a pinning failure.
@Suite("vault accounts add and vault token: endpoints and pins", .timeLimit(.minutes(TestTimeScale.minutes(2))))
struct TransportCommandTests {
    static let lookAlikes = [
        "http://127.evil.example/token", "http://127.0.0.1.nip.io/token", "http://localhost.example/token",
        "http://0x7f.1/token", "http://127.1/token", "http://2130706433/token",
        "http://127.0.0.1@evil.example/token", "https://user:pw@id.example.com/token",
    ]

    /// A token response whose access token expires inside the 60 s leeway, so `vault token` refreshes.
    static let expiringTokens = #"{"access_token":"access-imported","token_type":"Bearer","expires_in":30,"refresh_token":"refresh-imported"}"#

    @Test(
        "accounts add refuses a look-alike host as token or revocation endpoint, exits 64 and stores nothing",
        arguments: lookAlikes)
    func lookAlikeRefused(_ endpoint: String) async throws {
        let fixture = try await AccountsAndTokenTests.Fixture()
        for endpoints in [
            ["--token-endpoint", endpoint],
            ["--token-endpoint", "https://id.example.test/token", "--revocation-endpoint", endpoint],
        ] {
            let result = try await fixture.run(
                ["accounts", "add", "--client-id", "vault-cli", "--subject", "alice"] + endpoints,
                stdin: Self.expiringTokens)
            #expect(result.status == Exit.usage, "\(result)")
            #expect(result.stderr.contains("is refused"), "\(result.stderr)")
        }
        #expect(try await fixture.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
    }

    @Test("a --ca-file that cannot be read or an unusable HTTPS_PROXY: exit 64 naming it; a missing SSL_CERT_FILE: a warning")
    func caFileAndProxySettings() async throws {
        let fixture = try await AccountsAndTokenTests.Fixture()
        let missing = try await fixture.run(["accounts", "list", "--ca-file", "/nonexistent/corp-ca.pem"])
        #expect(missing.status == Exit.usage, "\(missing)")
        #expect(missing.stderr.contains("/nonexistent/corp-ca.pem") && missing.stderr.contains("--ca-file"), "\(missing.stderr)")
        // SSL_CERT_FILE is set for every process, not asked for by this command: a warning.
        let fromEnvironment = try await fixture.cli.run(["accounts", "list"], environment: ["SSL_CERT_FILE": "/nonexistent/bundle.pem"])
        #expect(fromEnvironment.status == 0, "\(fromEnvironment)")
        #expect(fromEnvironment.stderr.contains("warning") && fromEnvironment.stderr.contains("SSL_CERT_FILE"), "\(fromEnvironment.stderr)")
        let socks = try await fixture.cli.run(["accounts", "list"], environment: ["HTTPS_PROXY": "socks5://me:hunter2@proxy:1080"])
        #expect(socks.status == Exit.usage, "\(socks)")
        #expect(socks.stderr.contains("HTTPS_PROXY") && !socks.stderr.contains("hunter2"), "\(socks.stderr)")
        #expect(try await fixture.cli.run(["accounts", "list"], environment: ["HTTPS_PROXY": "http://proxy.corp:3128"]).status == 0)
    }

    @Test("--pin: a malformed pin or pins on plain http exit 64 naming the rule; good pins are stored and shown")
    func pinOption() async throws {
        let chain = try TestChain()
        let fixture = try await AccountsAndTokenTests.Fixture()
        let base = ["accounts", "add", "--client-id", "vault-cli", "--subject", "alice"]

        let malformed = try await fixture.run(
            base + ["--token-endpoint", "https://id.example.test/token", "--pin", "sha256/abc="],
            stdin: Self.expiringTokens)
        #expect(malformed.status == Exit.usage, "\(malformed)")
        #expect(malformed.stderr.contains("sha256/ followed by the base64"), "\(malformed.stderr)")

        let plain = try await fixture.run(
            base + ["--token-endpoint", "http://127.0.0.1:9/token", "--pin", chain.leaf.pin],
            stdin: Self.expiringTokens)
        #expect(plain.status == Exit.usage, "\(plain)")
        #expect(plain.stderr.contains("must use https"), "\(plain.stderr)")
        #expect(try await fixture.run(["accounts", "list", "--json"]).jsonArray().isEmpty)

        let added = try await fixture.run(
            base + [
                "--token-endpoint", "https://id.example.test/token", "--json",
                "--pin", chain.leaf.pin, "--pin", chain.intermediate.pin,
            ],
            stdin: Self.expiringTokens)
        #expect(added.status == 0, "\(added)")
        let shown = try await fixture.run(["accounts", "show", "alice", "--json"]).jsonObject()
        let client = try #require(shown["client"] as? [String: Any])
        #expect(client["pins"] as? [String] == [chain.leaf.pin, chain.intermediate.pin])
    }

    @Test("vault token for a pinned account whose server presents another key exits 83, says so, and sends nothing")
    func pinningFailureExitCode() async throws {
        let chain = try TestChain()
        let server = try await LoopbackServer.start(
            tls: chain.serverIdentity, answer: .json(200, #"{"access_token":"never-issued","token_type":"Bearer"}"#))
        let fixture = try await AccountsAndTokenTests.Fixture()
        let added = try await fixture.run(
            [
                "accounts", "add", "--client-id", "vault-cli", "--subject", "alice", "--token-endpoint",
                server.url("/oauth/token").absoluteString, "--pin", TestChain.unrelatedPin,
            ],
            stdin: Self.expiringTokens)
        #expect(added.status == 0, "\(added)")

        for _ in 0..<2 {
            let token = try await fixture.run(["token"])
            #expect(token.status == Exit.pinningFailed, "\(token)")
            #expect(token.stderr.contains("did not present a pinned TLS key"), "\(token.stderr)")
            #expect(!token.allOutput.contains("access-imported") && !token.allOutput.contains("refresh-imported"))
        }
        #expect(await server.wait { $0.connections == 2 && $0.closedConnections == 2 })
        #expect(server.log.value.applicationBytes == 0, "not a byte of a request reached the server")
        await server.stop()
    }
}
