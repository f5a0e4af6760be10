import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 35 so far at the command line: `vault login --dpop`, `vault dpop-proof`, and what a
/// DPoP-bound account refuses.
@Suite("vault login --dpop and vault dpop-proof")
struct DPoPCommandTests {
    @Test("a proof from `vault dpop-proof --json` and its token are accepted by the API; the token alone as Bearer is not")
    func proofForScripts() async throws {
        let gateway = try await DevGateway.start()
        defer { Task { await gateway.stop() } }
        let cli = try await VaultCLI.keyFileVault()
        try await gateway.registerServiceClient(id: "indexer", authentication: .clientSecretPost("indexer-secret"))
        let secret = cli.file("secret")
        try Data("indexer-secret".utf8).write(to: secret)
        chmod(secret.path, 0o600)
        let login = try await cli.run([
            "login", "--client-credentials", "--dpop", "--issuer", gateway.baseURL.absoluteString, "--client-id", "indexer",
            "--client-auth", "client_secret_post", "--client-secret-file", secret.path,
        ])
        try #require(login.status == 0, "\(login)")
        let api = gateway.baseURL.appendingPathComponent("api/profile")
        let out = try await cli.run(["dpop-proof", "GET", api.absoluteString + "?page=2", "--json"])
        #expect(out.status == 0, "\(out)")
        let object = try out.jsonObject()
        let token = try #require(object["token"] as? String)
        let proof = try #require(object["proof"] as? String)
        #expect(object["type"] as? String == "DPoP")
        let http = NIOTransport(timeout: .seconds(10))
        var headers = HTTPHeaderFields()
        headers["Authorization"] = "DPoP \(token)"
        headers["DPoP"] = proof
        #expect(try await http.send(HTTPRequest(method: .get, url: api, headers: headers)).status == 200)
        // The same proof again is a replay; the token as a bearer token is refused.
        #expect(try await http.send(HTTPRequest(method: .get, url: api, headers: headers)).status == 401)
        var bearer = HTTPHeaderFields()
        bearer["Authorization"] = "Bearer \(token)"
        #expect(try await http.send(HTTPRequest(method: .get, url: api, headers: bearer)).status == 401)
        #expect(try await cli.run(["token", "--json"]).jsonObject()["type"] as? String == "DPoP")
        let shown = try await cli.run(["accounts", "show", "indexer", "--json"]).jsonObject()
        #expect(shown["dpop_bound"] as? Bool == true)
        #expect(try await cli.run(["accounts", "show", "indexer"]).stdout.contains("DPoP (RFC 9449)"))

        // git and docker cannot send proofs: binding a host is refused, saying why.
        let host = try await cli.run(["accounts", "set-host", "indexer", "git.example.test"])
        #expect(host.status == 64 && host.stderr.contains("DPoP"), "\(host)")
        #expect(!out.stderr.contains("PRIVATE KEY") && !login.stdout.contains("PRIVATE KEY"))
    }
}
