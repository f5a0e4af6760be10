import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 34, item 2 at the command line: `vault login --client-credentials` with a secret file,
/// a key file or a key made in the vault, `vault accounts client-key` and its rollover.
@Suite("vault login --client-credentials and accounts client-key")
struct ClientCredentialsCommandTests {
    struct World {
        let gateway: DevGateway
        let cli: VaultCLI

        init() async throws {
            gateway = try await DevGateway.start()
            cli = try await VaultCLI.keyFileVault()
        }

        var issuer: String { gateway.baseURL.absoluteString }

        func run(_ arguments: [String], stdin: String? = nil) async throws -> CommandResult { try await cli.run(arguments, stdin: stdin) }

        /// A file only its owner can read, holding `text`.
        func privateFile(_ name: String, _ text: String, mode: mode_t = 0o600) throws -> URL {
            let url = cli.file(name)
            try Data(text.utf8).write(to: url)
            chmod(url.path, mode)
            return url
        }

        func login(_ clientID: String, _ extra: [String]) async throws -> CommandResult {
            try await run(["login", "--client-credentials", "--issuer", issuer, "--client-id", clientID] + extra)
        }

        /// Waits (bounded) for a file a running command writes.
        func contents(of url: URL) async throws -> String {
            for _ in 0..<600 {
                if let text = try? String(contentsOf: url, encoding: .utf8), text.hasSuffix("\n") { return text }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw CancellationError()
        }
    }

    @Test("a secret from a file, sent as Basic or in the body: the client's token is printed, and the account says it is a client's")
    func secretMethods() async throws {
        let world = try await World()
        defer { Task { await world.gateway.stop() } }
        try await world.gateway.registerServiceClient(id: "basic-daemon", authentication: .clientSecretBasic("basic-secret-1"))
        try await world.gateway.registerServiceClient(id: "post-daemon", authentication: .clientSecretPost("post-secret-1"))
        let basic = try await world.login("basic-daemon", ["--client-secret-file", try world.privateFile("basic", "basic-secret-1\n").path])
        #expect(
            basic.status == 0 && basic.stdout.contains("client_secret_basic") && basic.stdout.contains("obtained again with the client's credentials"),
            "\(basic)")
        let post = try await world.login(
            "post-daemon", ["--client-auth", "client_secret_post", "--client-secret-file", try world.privateFile("post", "post-secret-1").path, "--json"])
        #expect(post.status == 0, "\(post)")
        let account = try #require(try post.jsonObject()["account"] as? [String: Any])
        #expect(account["grant"] as? String == "client_credentials" && account["has_client_secret"] as? Bool == true)
        #expect((account["client"] as? [String: Any])?["authentication"] as? String == "client_secret_post")
        let token = try await world.run(["token", "--account", "post-daemon"])
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token)")
        #expect(await world.gateway.stats().clientCredentialsGrants == 2, "the token printed is the one the sign-in obtained")
        let list = try await world.run(["accounts", "list"])
        #expect(list.stdout.contains("[client]"))
        for output in [basic, post, token, list] { #expect(!output.stdout.contains("secret-1") && !output.stderr.contains("secret-1")) }

        // A wrong secret: refused by the provider, nothing stored, the secret not repeated.
        let wrong = try await world.login("basic-daemon", ["--client-secret-file", try world.privateFile("wrong", "not-the-secret-77").path])
        #expect(wrong.status == 76 && wrong.stderr.contains("invalid_client") && !wrong.stderr.contains("not-the-secret-77"), "\(wrong)")
        #expect(try await world.run(["accounts", "list", "--json"]).jsonArray().count == 2)
    }

    @Test("a client secret on the command line is refused before anything is sent, and not repeated")
    func secretInArgvRefused() async throws {
        let world = try await World()
        defer { Task { await world.gateway.stop() } }
        let refused = try await world.login("basic-daemon", ["--client-secret", "argv-secret-31337"])
        #expect(refused.status == 64 && refused.stderr.contains("--client-secret-file"), "\(refused)")
        #expect(!refused.stderr.contains("argv-secret-31337") && !refused.stdout.contains("argv-secret-31337"))
        #expect(await world.gateway.tokenRequestCount() == 0)
    }

    @Test("an imported key: refused while others can read its file, used once only its owner can; client-key prints its public half")
    func importedKey() async throws {
        let world = try await World()
        defer { Task { await world.gateway.stop() } }
        let key = ClientSigningKey.generate()
        try await world.gateway.registerServiceClient(id: "jwt-daemon", authentication: .privateKeyJWT(jwks: Data(key.publicJWK.utf8)))
        let file = try world.privateFile("key.pem", key.pemRepresentation, mode: 0o644)
        let open = try await world.login("jwt-daemon", ["--client-key-file", file.path])
        #expect(open.status == 82 && open.stderr.contains("chmod 600"), "\(open)")
        #expect(await world.gateway.tokenRequestCount() == 0, "nothing was sent with a key others could read")
        chmod(file.path, 0o600)
        let signedIn = try await world.login("jwt-daemon", ["--client-key-file", file.path])
        #expect(signedIn.status == 0 && signedIn.stdout.contains("private_key_jwt"), "\(signedIn)")
        let printed = try await world.run(["accounts", "client-key", "jwt-daemon", "--json"])
        #expect(try printed.jsonObject()["kid"] as? String == key.keyID, "\(printed)")
        let jwk = try printed.jsonObject()["jwk"] as? [String: String]
        #expect(!printed.stdout.contains("PRIVATE KEY") && jwk?["x"] != nil && jwk?["d"] == nil && jwk?["kid"] == key.keyID)
        #expect(try await world.run(["accounts", "client-key", "jwt-daemon"]).stdout == key.publicJWK + "\n")
        let notPEM = try world.privateFile("not.pem", "hello")
        let bad = try await world.login("jwt-daemon", ["--client-key-file", notPEM.path])
        #expect(bad.status == 64 && bad.stderr.contains("P-256"), "\(bad)")
    }

    @Test("a key made in the vault: its public JWK is written, the login waits until the provider knows it; a rollover does the same")
    func generatedKeyAndRollover() async throws {
        let world = try await World()
        defer { Task { await world.gateway.stop() } }
        // Registered with another key first: the login's first attempts are refused until the new one is added.
        try await world.gateway.registerServiceClient(
            id: "gen-daemon", authentication: .privateKeyJWT(jwks: Data(ClientSigningKey.generate().publicJWK.utf8)))
        let jwk = world.cli.file("gen.jwk")
        async let login = world.login("gen-daemon", ["--generate-client-key", "--jwk-out", jwk.path, "--registration-timeout", "1m"])
        let published = try await world.contents(of: jwk)
        try await world.gateway.setServiceClientKeys(id: "gen-daemon", jwks: Data(published.utf8))
        let result = try await login
        #expect(result.status == 0 && result.stderr.contains("Waiting up to"), "\(result)")
        let kid = try #require(try await world.run(["accounts", "client-key", "gen-daemon", "--json"]).jsonObject()["kid"] as? String)
        #expect(published.contains(kid))

        let next = world.cli.file("next.jwk")
        async let rotated = world.run(["accounts", "client-key", "gen-daemon", "--rotate", "--jwk-out", next.path, "--registration-timeout", "1m"])
        let nextJWK = try await world.contents(of: next)
        try await world.gateway.setServiceClientKeys(
            id: "gen-daemon", jwks: Data(#"{"keys":[\#(published.trimmingCharacters(in: .newlines)),\#(nextJWK.trimmingCharacters(in: .newlines))]}"#.utf8))
        let rollover = try await rotated
        #expect(rollover.status == 0 && rollover.stdout.contains("Rolled"), "\(rollover)")
        let newKid = try #require(try await world.run(["accounts", "client-key", "gen-daemon", "--json"]).jsonObject()["kid"] as? String)
        #expect(newKid != kid && nextJWK.contains(newKid))
        // The provider drops the old key; the client's next token comes with the new one.
        try await world.gateway.setServiceClientKeys(id: "gen-daemon", jwks: Data(nextJWK.utf8))
        let forced = try await world.run(["token", "--account", "gen-daemon", "--min-ttl", "2h"])
        #expect(forced.status == 0, "\(forced)")
    }

    @Test("a client's account cannot be exported: exit 89 saying why")
    func exportRefused() async throws {
        let world = try await World()
        defer { Task { await world.gateway.stop() } }
        try await world.gateway.registerServiceClient(id: "post-daemon", authentication: .clientSecretPost("post-secret-1"))
        let login = try await world.login(
            "post-daemon", ["--client-auth", "client_secret_post", "--client-secret-file", try world.privateFile("post", "post-secret-1").path])
        try #require(login.status == 0, "\(login)")
        let other = try await VaultCLI.keyFileVault()
        let recipient = try await other.run(["recipient"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let export = try await world.run(["sessions", "export", "--to", recipient])
        #expect(export.status == 89 && export.stderr.contains("client"), "\(export)")
    }
}
