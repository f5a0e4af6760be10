import DevGateway
import Foundation
import GRDB
import Testing
import VaultTestSupport

/// Issue 12's first finding, as an attacker with write access to the vault file (and no key)
/// would try it: point the account at another server and make its token look expired, so
/// `vault token` would send the refresh token there.
@Suite("vault token on a vault edited without the key")
struct IntegrityTests {
    @Test("an edited token endpoint and expiry: vault token sends nothing anywhere and exits 65 naming the column; verify names both")
    func editedEndpointSendsNothing() async throws {
        let gateway = try await DevGateway.start()
        let decoy = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        #expect(
            try await fixture.add(
                await gateway.issueGrant(subject: "alice", clientID: "vault-cli"),
                gateway: gateway, subject: "alice"
            ).status == 0)

        try RawDatabase.execute(fixture.cli.vault, "UPDATE accounts SET token_endpoint = ?", [decoy.tokenEndpoint.absoluteString])
        try RawDatabase.execute(fixture.cli.vault, "UPDATE tokens SET access_expires_at = 0")

        let token = try await fixture.run(["token"])
        #expect(token.status == Exit.damaged, "\(token)")
        #expect(token.stdout.isEmpty)
        #expect(token.stderr.contains("accounts.token_endpoint") || token.stderr.contains("tokens.access_expires_at"), "\(token.stderr)")
        #expect(await decoy.stats().tokenRequests == 0, "no request reached the other server")
        #expect(await gateway.stats().tokenRequests == 0)

        let verify = try await fixture.run(["verify"])
        #expect(verify.status == Exit.damaged, "\(verify)")
        #expect(verify.stdout.contains("column token_endpoint"), "\(verify.stdout)")
        #expect(verify.stdout.contains("column access_expires_at"), "\(verify.stdout)")
        await decoy.stop()
        await gateway.stop()
    }

    @Test("a refresh token wiped to NULL and an expiry pushed to the year 2100 are both named by verify")
    func nullAndFarFutureAreFound() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        #expect(
            try await fixture.add(
                await gateway.issueGrant(subject: "alice", clientID: "vault-cli"),
                gateway: gateway, subject: "alice"
            ).status == 0)
        try RawDatabase.execute(fixture.cli.vault, "UPDATE tokens SET refresh_token = NULL, access_expires_at = 4102444800000")
        let verify = try await fixture.run(["verify", "--json"])
        #expect(verify.status == Exit.damaged, "\(verify)")
        let damaged = try #require(try verify.jsonObject()["damaged"] as? [[String: Any]])
        #expect(Set(damaged.compactMap { $0["column"] as? String }) == ["refresh_token", "access_expires_at"], "\(damaged)")
        await gateway.stop()
    }

    @Test(
        "accounts add refuses plain http to a host that only looks like this machine, and stores nothing",
        arguments: [
            "http://127.evil.example/token", "http://127.0.0.1.nip.io/token", "http://localhost.example/token",
            "http://0x7f.1/token", "http://127.0.0.1@evil.example/token",
        ])
    func lookAlikeHostRefusedAtImport(_ endpoint: String) async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        let result = try await fixture.run(
            ["accounts", "add", "--token-endpoint", endpoint, "--client-id", "vault-cli", "--subject", "alice"],
            stdin: AccountsAndTokenTests.tokenResponse(await gateway.issueGrant(subject: "alice", clientID: "vault-cli")))
        #expect(result.status == Exit.usage, "\(result)")
        #expect(result.stderr.contains("refused"), "\(result.stderr)")
        #expect(try await fixture.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
        await gateway.stop()
    }
}
