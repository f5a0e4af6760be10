import DevGateway
import Foundation
import VaultOAuth

// MARK: - Daemons: the client credentials grant (RFC 6749 §4.4)

extension CommandLineChapter {
    /// Two daemons on machine A sign in as clients, with no person: one with a secret sent in
    /// the form body, one with a key made in the vault whose public half is registered while
    /// the login waits. Their tokens are the clients' own; a secret on the command line is
    /// refused. No secret or token is ever printed.
    static func clients(gateway: DevGateway, machine: Machine, narrator: Narrator) async throws {
        narrator.chapter("Daemons without a person: `vault login --client-credentials`")
        try await gateway.registerServiceClient(id: "backup-daemon", authentication: .clientSecretPost("demo-backup-secret"))
        let secretFile = machine.directory.appending(path: "backup-daemon.secret")
        try Data("demo-backup-secret\n".utf8).write(to: secretFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secretFile.path)
        let issuer = gateway.baseURL.absoluteString
        _ = try await machine.run(
            [
                "login", "--client-credentials", "--issuer", issuer, "--client-id", "backup-daemon", "--client-auth", "client_secret_post",
                "--client-secret-file", secretFile.path,
            ], narrator: narrator)
        try await whoami(gateway: gateway, machine: machine, account: "backup-daemon", narrator: narrator)

        narrator.say("(report-job signs with a key the vault makes: the login waits until the provider knows its public half)")
        let jwk = machine.directory.appending(path: "report-job.jwk")
        narrator.say(
            "machine \(machine.name)> vault login --client-credentials --issuer \(issuer) --client-id report-job --generate-client-key --jwk-out \(jwk.lastPathComponent)"
        )
        let login = Task {
            try await machine.run(
                [
                    "login", "--client-credentials", "--issuer", issuer, "--client-id", "report-job", "--generate-client-key",
                    "--jwk-out", jwk.path, "--registration-timeout", "1m",
                ], narrator: narrator, show: false)
        }
        var published: String?
        for _ in 0..<600 where published == nil {
            published = (try? String(contentsOf: jwk, encoding: .utf8)).flatMap { $0.hasSuffix("\n") ? $0 : nil }
            if published == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let published else {
            login.cancel()
            narrator.say("  the login wrote no public key")
            return
        }
        narrator.say("  (the operator registers \(jwk.lastPathComponent) with the provider)")
        try await gateway.registerServiceClient(id: "report-job", authentication: .privateKeyJWT(jwks: Data(published.utf8)))
        let result = try await login.value
        for line in (result.stderr + result.stdout).split(separator: "\n") { narrator.say("  \(line)") }
        try await whoami(gateway: gateway, machine: machine, account: "report-job", narrator: narrator)
        _ = try await machine.run(["accounts", "client-key", "report-job"], narrator: narrator)

        let refused = try await machine.run(
            ["login", "--client-credentials", "--issuer", issuer, "--client-id", "backup-daemon", "--client-secret", "demo-backup-secret"],
            narrator: narrator, show: false)
        narrator.say("machine \(machine.name)> vault login --client-credentials … --client-secret <the secret>")
        let message = refused.stderr.split(separator: "\n").first { $0.contains("client secret") } ?? ""
        narrator.say("  exit \(refused.status): \(message)")
        narrator.say("  the secret in that output: \(refused.stderr.contains("demo-backup-secret") ? "repeated (wrong!)" : "not repeated")")
        _ = try await machine.run(["accounts", "list"], narrator: narrator)
        try await boundTokens(gateway: gateway, machine: machine, secretFile: secretFile, narrator: narrator)
    }

    /// A daemon whose tokens are bound to a key the vault keeps (RFC 9449): its token with a
    /// proof is taken, the same token copied and sent as a bearer token is refused.
    private static func boundTokens(gateway: DevGateway, machine: Machine, secretFile: URL, narrator: Narrator) async throws {
        narrator.chapter("Tokens bound to the vault's key: `vault login --dpop`")
        try await gateway.registerServiceClient(id: "sync-daemon", authentication: .clientSecretPost("demo-backup-secret"))
        _ = try await machine.run(
            [
                "login", "--client-credentials", "--dpop", "--issuer", gateway.baseURL.absoluteString, "--client-id", "sync-daemon",
                "--client-auth", "client_secret_post", "--client-secret-file", secretFile.path,
            ], narrator: narrator)
        let api = gateway.baseURL.appendingPathComponent("api/profile")
        narrator.say("machine \(machine.name)> vault dpop-proof GET \(api.absoluteString) --json   (token and proof to variables, not shown)")
        let out = try await machine.run(["dpop-proof", "GET", api.absoluteString, "--json"], narrator: narrator, show: false)
        let object = (try? JSONSerialization.jsonObject(with: Data(out.stdout.utf8)) as? [String: Any]) ?? [:]
        guard let token = object["token"] as? String, let proof = object["proof"] as? String else {
            narrator.say("  exit \(out.status): \(out.stderr)")
            return
        }
        let http = NIOTransport(timeout: .seconds(10))
        var headers = HTTPHeaderFields()
        headers["Authorization"] = "DPoP \(token)"
        headers["DPoP"] = proof
        narrator.say(
            "  GET /api/profile with the token and its proof → HTTP \(try await http.send(HTTPRequest(method: .get, url: api, headers: headers)).status)")
        var stolen = HTTPHeaderFields()
        stolen["Authorization"] = "Bearer \(token)"
        let refused = try await http.send(HTTPRequest(method: .get, url: api, headers: stolen))
        narrator.say(
            "  the same token copied and sent as a bearer token → HTTP \(refused.status) (\(refused.headers["WWW-Authenticate"]?.contains("invalid_token") == true ? "invalid_token" : "?"))"
        )
        let host = try await machine.run(["accounts", "set-host", "sync-daemon", "git.demo.test"], narrator: narrator, show: false)
        narrator.say("machine \(machine.name)> vault accounts set-host sync-daemon git.demo.test")
        narrator.say("  exit \(host.status): \(host.stderr.split(separator: "\n").last ?? "")")
    }

    /// `vault token --account ACCOUNT` (not shown), then who the gateway's API says holds it.
    private static func whoami(gateway: DevGateway, machine: Machine, account: String, narrator: Narrator) async throws {
        narrator.say("machine \(machine.name)> vault token --account \(account)   (printed to a variable, not shown)")
        let token = try await machine.run(["token", "--account", account], narrator: narrator, show: false)
        guard token.status == 0 else {
            narrator.say("  exit \(token.status): \(token.stderr)")
            return
        }
        var headers = HTTPHeaderFields()
        headers["Authorization"] = "Bearer \(token.stdout.trimmingCharacters(in: .newlines))"
        let answer = try await NIOTransport(timeout: .seconds(10)).send(
            HTTPRequest(method: .get, url: gateway.baseURL.appendingPathComponent("api/profile"), headers: headers))
        let body = (try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any]) ?? [:]
        narrator.say("  GET /api/profile with it → HTTP \(answer.status), sub \(body["sub"] as? String ?? "?")")
    }
}
