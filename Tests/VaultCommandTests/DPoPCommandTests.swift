import DevGateway
import Foundation
import Testing
import VaultCrypto
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
        let login = try await Self.signInDPoPClient(cli, at: gateway)
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
        #expect(try await cli.run(["accounts", "list"]).stdout.contains("[client, DPoP]"))

        // git and docker cannot send proofs: binding a host is refused, saying why.
        let host = try await cli.run(["accounts", "set-host", "indexer", "git.example.test"])
        #expect(host.status == 64 && host.stderr.contains("DPoP"), "\(host)")
        #expect(!out.stderr.contains("PRIVATE KEY") && !login.stdout.contains("PRIVATE KEY"))
    }

    @Test("with an agent, the agent signs: a script with no key gets a proof and its token the API takes; locked, nothing is printed")
    func agentSigns() async throws {
        let gateway = try await DevGateway.start()
        defer { Task { await gateway.stop() } }
        var cli = try await VaultCLI.keyFileVault()
        let runtime = cli.file("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        cli.environment["XDG_RUNTIME_DIR"] = runtime.path
        _ = try await Self.signInDPoPClient(cli, at: gateway)
        let keyFile = try #require(cli.environment["VAULT_KEY_FILE"])
        let started = try await cli.run(["agent", "start", "--key-file", keyFile])
        try #require(started.status == 0, "\(started)")
        // From here on the commands have no key: only the agent can sign.
        var script = cli
        script.environment["VAULT_KEY_FILE"] = nil
        do {
            let api = gateway.baseURL.appendingPathComponent("api/profile")
            let out = try await script.run(["dpop-proof", "GET", api.absoluteString, "--json"])
            #expect(out.status == 0, "\(out)")
            let object = try out.jsonObject()
            let token = try #require(object["token"] as? String)
            let proof = try #require(object["proof"] as? String)
            #expect(object["type"] as? String == "DPoP" && object["account"] as? String != nil)
            let http = NIOTransport(timeout: .seconds(10))
            var headers = HTTPHeaderFields()
            headers["Authorization"] = "DPoP \(token)"
            headers["DPoP"] = proof
            #expect(try await http.send(HTTPRequest(method: .get, url: api, headers: headers)).status == 200)

            // A proof for a request that presents no token: no ath; then bad input refused before the agent is asked.
            let bare = try await script.run(["dpop-proof", "POST", api.absoluteString, "--no-token"])
            #expect(bare.status == 0, "\(bare)")
            let claims = try Self.claims(bare.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(claims["ath"] == nil && claims["htm"] as? String == "POST" && claims["htu"] as? String == api.absoluteString)
            #expect(try await script.run(["dpop-proof", "G T", api.absoluteString]).status == 64)
            #expect(try await script.run(["dpop-proof", "GET", "ftp://example.test/x"]).status == 64)
            let userInURL = try await script.run(["dpop-proof", "GET", "https://user:pw@example.test/x"])
            #expect(userInURL.status == 64 && userInURL.stderr.contains("user name or password"), "\(userInURL)")

            // Locked: refused as a locked agent is, nothing on standard output.
            #expect(try await script.run(["lock"]).status == 0)
            let locked = try await script.run(["dpop-proof", "GET", api.absoluteString, "--json"])
            #expect(locked.status == 79 && locked.stdout.isEmpty, "\(locked)")
            #expect(!locked.stderr.contains("PRIVATE KEY"))
        } catch {
            _ = try? await cli.run(["agent", "stop"])
            throw error
        }
        _ = try await cli.run(["agent", "stop"])
    }

    /// `indexer`, a client_secret_post client of `gateway`, signed in with `--dpop`.
    static func signInDPoPClient(_ cli: VaultCLI, at gateway: DevGateway) async throws -> CommandResult {
        try await gateway.registerServiceClient(id: "indexer", authentication: .clientSecretPost("indexer-secret"))
        let secret = cli.file("secret")
        try Data("indexer-secret".utf8).write(to: secret)
        chmod(secret.path, 0o600)
        let login = try await cli.run([
            "login", "--client-credentials", "--dpop", "--issuer", gateway.baseURL.absoluteString, "--client-id", "indexer",
            "--client-auth", "client_secret_post", "--client-secret-file", secret.path,
        ])
        try #require(login.status == 0, "\(login)")
        return login
    }

    /// The claims of a compact JWS, decoded without checking anything.
    static func claims(_ jws: String) throws -> [String: Any] {
        let segments = jws.split(separator: ".", omittingEmptySubsequences: false)
        try #require(segments.count == 3)
        let bytes = try #require(Base64URL.decode(segments[1]))
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }
}
