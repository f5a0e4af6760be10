import DevGateway
import Foundation
import GRDB
import Testing
import VaultStore
import VaultTestSupport

@Suite("vault accounts and vault token, against the development gateway")
struct AccountsAndTokenTests {
    /// A vault unlocked by a key file, named by VAULT_KEY_FILE for every command.
    struct Fixture {
        let cli: VaultCLI

        init() async throws {
            var cli = try VaultCLI()
            let key = cli.file("vault.key")
            cli.environment["VAULT_KEY_FILE"] = key.path
            self.cli = cli
            try #require(try await cli.run(["init", "--key-file", key.path]).status == 0)
        }

        func run(_ arguments: [String], stdin: String? = nil) async throws -> CommandResult {
            try await cli.run(arguments, stdin: stdin)
        }

        /// `vault accounts add` with a grant's token response on standard input.
        func add(_ tokens: IssuedTokens, gateway: DevGateway, subject: String, extra: [String] = []) async throws -> CommandResult {
            try await run(
                [
                    "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString,
                    "--revocation-endpoint", gateway.revocationEndpoint.absoluteString,
                    "--client-id", "vault-cli", "--subject", subject, "--label", "\(subject) at work",
                ] + extra,
                stdin: tokenResponse(tokens))
        }
    }

    static func tokenResponse(_ tokens: IssuedTokens) -> String {
        var fields = [
            "\"access_token\": \"\(tokens.accessToken)\"", "\"token_type\": \"\(tokens.tokenType)\"",
            "\"expires_in\": \(tokens.expiresIn)", "\"scope\": \"\(tokens.scope)\"",
        ]
        if let refresh = tokens.refreshToken { fields.append("\"refresh_token\": \"\(refresh)\"") }
        if let id = tokens.idToken { fields.append("\"id_token\": \"\(id)\"") }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    @Test("an imported sign-in is refreshed at the gateway by `vault token`, and only `vault token` prints a token")
    func importAndRefresh() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await Fixture()
        // 30 s is inside the 60 s leeway: the first `vault token` must refresh.
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli", accessTokenLifetime: .seconds(30))
        var transcripts: [CommandResult] = []

        let added = try await fixture.add(issued, gateway: gateway, subject: "alice")
        #expect(added.status == 0, "\(added)")
        #expect(added.stdout.contains("now active"))
        transcripts.append(added)

        let token = try await fixture.run(["token"])
        #expect(token.status == 0, "\(token)")
        let printed = token.stdout.trimmingCharacters(in: .newlines)
        #expect(!printed.isEmpty && printed != issued.accessToken, "the expiring token must have been refreshed")
        #expect(await gateway.tokenRequestCount() == 1)
        #expect(await gateway.presentedRefreshTokens() == [issued.refreshToken].compactMap { $0 })
        #expect(token.stderr.isEmpty, "\(token)")

        let again = try await fixture.run(["token", "--account", "alice"])
        #expect(again.status == 0, "\(again)")
        let rotated = await gateway.presentedRefreshTokens()
        #expect(rotated.count == 2, "the refreshed token also expires within the leeway, so it is refreshed with the rotated refresh token")

        for arguments in [
            ["accounts", "list"], ["accounts", "list", "--json"], ["accounts", "show", "alice"],
            ["accounts", "show", "--json"], ["status"], ["status", "--json"], ["sessions", "list"],
            ["sessions", "list", "--json"], ["export", "--redacted", "--json"], ["verify"], ["verify", "--json"],
            ["devices", "list", "--json"], ["notifications", "list", "--json"],
        ] {
            let result = try await fixture.run(arguments)
            #expect(result.status == 0, "\(result)")
            transcripts.append(result)
        }
        let secrets =
            [issued.accessToken, printed, again.stdout.trimmingCharacters(in: .newlines)]
            + [issued.refreshToken, issued.idToken].compactMap { $0 } + rotated
        for transcript in transcripts {
            for secret in secrets {
                #expect(!transcript.allOutput.contains(secret), "a token appeared in the output of vault \(transcript.arguments)")
            }
        }

        let listed = try #require(try await fixture.run(["accounts", "list", "--json"]).jsonArray().first)
        let tokens = try #require(listed["tokens"] as? [String: Any])
        #expect((tokens["access_token"] as? [String: Any])?["present"] as? Bool == true)
        #expect((tokens["access_token"] as? [String: Any])?["expires_at"] is String)
        #expect((tokens["refresh_token"] as? [String: Any])?["present"] as? Bool == true)
        #expect(listed["subject"] as? String == "alice")
        #expect(listed["label"] as? String == "alice at work")
        #expect(listed["status"] as? String == "active")
        #expect(listed["active"] as? Bool == true)
        await gateway.stop()
    }

    @Test("a confidential client's secret file is used for the refresh and never shown")
    func confidentialClient() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await Fixture()
        let secretFile = fixture.cli.file("client-secret")
        try Data("s3cr3t-client-value\n".utf8).write(to: secretFile)
        let issued = await gateway.issueGrant(
            subject: "svc", clientID: "vault-cli", clientSecret: "s3cr3t-client-value",
            accessTokenLifetime: .seconds(5))
        let added = try await fixture.add(issued, gateway: gateway, subject: "svc", extra: ["--client-secret-file", secretFile.path])
        #expect(added.status == 0, "\(added)")
        let token = try await fixture.run(["token"])
        #expect(token.status == 0, "\(token)")
        #expect(await gateway.tokenRequestCount() == 1)
        let shown = try await fixture.run(["accounts", "show", "--json"])
        #expect(!shown.allOutput.contains("s3cr3t-client-value"))
        #expect(try shown.jsonObject()["has_client_secret"] as? Bool == true)
        await gateway.stop()
    }

    @Test("accounts list, show, switch and remove")
    func manageAccounts() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await Fixture()
        #expect(try await fixture.add(await gateway.issueGrant(subject: "alice", clientID: "vault-cli"), gateway: gateway, subject: "alice").status == 0)
        #expect(try await fixture.add(await gateway.issueGrant(subject: "bob", clientID: "vault-cli"), gateway: gateway, subject: "bob").status == 0)

        var accounts = try await fixture.run(["accounts", "list", "--json"]).jsonArray()
        #expect(accounts.map { $0["subject"] as? String } == ["alice", "bob"])
        #expect(accounts.map { $0["active"] as? Bool } == [false, true], "the last import is active")
        #expect(accounts.map { $0["account_state"] as? String } == ["active_signed_in", "active_signed_in"], "both signed in: \(accounts)")
        let aliceID = try #require(accounts.first?["id"] as? String)

        let switched = try await fixture.run(["accounts", "switch", String(aliceID.prefix(8))])
        #expect(switched.status == 0, "\(switched)")
        accounts = try await fixture.run(["accounts", "list", "--json"]).jsonArray()
        #expect(accounts.map { $0["active"] as? Bool } == [true, false])
        #expect(try await fixture.run(["status", "--json"]).jsonObject()["active_account_id"] as? String == aliceID)

        let shown = try await fixture.run(["accounts", "show"])
        #expect(shown.status == 0)
        #expect(shown.stdout.contains(aliceID) && shown.stdout.contains("(active)"))
        #expect(shown.stdout.contains("access token present, expires in"))

        let unconfirmed = try await fixture.run(["accounts", "remove", "bob"])
        #expect(unconfirmed.status == Exit.usage, "\(unconfirmed)")
        #expect(unconfirmed.stderr.contains("--yes"))

        let removed = try await fixture.run(["accounts", "remove", "bob", "--yes"])
        #expect(removed.status == 0, "\(removed)")
        #expect(await gateway.stats().revocationRequests == 1, "bob's refresh token was revoked at the gateway")
        accounts = try await fixture.run(["accounts", "list", "--json"]).jsonArray()
        #expect(accounts.map { $0["subject"] as? String } == ["alice"])

        let unknown = try await fixture.run(["accounts", "show", "nobody"])
        #expect(unknown.status == Exit.noRecord, "\(unknown)")
        await gateway.stop()
    }

    @Test("token exits 80 after the session is ended or the grant revoked, 79 while locked, and works again after unlock")
    func tokenExitCodes() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await Fixture()
        #expect(
            try await fixture.add(
                await gateway.issueGrant(subject: "alice", clientID: "vault-cli"), gateway: gateway,
                subject: "alice", extra: ["--idle-timeout", "1m"]
            ).status == 0)
        // The idle deadline passes while no process runs: a process holding the passphrase moves
        // it into the past instead of waiting, as the next process judges stored deadlines on its
        // own clock. (Through the library: an edit of the file without the key is tampering.)
        let vault = try Vault.open(at: fixture.cli.vault, credential: .keyFile(fixture.cli.file("vault.key")))
        let account = try #require(try vault.accounts.activeID())
        var session = try #require(try vault.sessions.current(for: account))
        session.idleDeadline = Date().addingTimeInterval(-5)
        try vault.sessions.update(session)
        vault.close()
        let locked = try await fixture.run(["token"])
        #expect(locked.status == Exit.sessionLocked, "\(locked)")
        #expect(locked.stderr.contains("locked"))
        #expect(locked.stdout.isEmpty)
        let unlocked = try await fixture.run(["sessions", "unlock"])
        #expect(unlocked.status == 0 && unlocked.stdout.contains("Unlocked 1 session"), "\(unlocked)")
        #expect(try await fixture.run(["token"]).status == 0)

        let ended = try await fixture.run(["sessions", "end"])
        #expect(ended.status == 0, "\(ended)")
        let afterEnd = try await fixture.run(["token"])
        #expect(afterEnd.status == Exit.sessionEnded, "\(afterEnd)")
        let sessions = try await fixture.run(["sessions", "list", "--json"]).jsonArray()
        #expect(sessions.first?["state"] as? String == "expired")
        #expect(sessions.first?["end_reason"] as? String == "ended_by_user")

        // A new import whose grant the server then revokes: the refresh is refused.
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli", accessTokenLifetime: .seconds(1))
        #expect(try await fixture.add(issued, gateway: gateway, subject: "alice").status == 0)
        _ = await gateway.revokeGrants(subject: "alice")
        let revoked = try await fixture.run(["token"])
        #expect(revoked.status == Exit.sessionEnded, "\(revoked)")
        #expect(revoked.stderr.contains("revoked"))
        await gateway.stop()
    }

    @Test("accounts add refuses input that is not a token response")
    func addRejectsBadInput() async throws {
        let fixture = try await Fixture()
        let base = ["accounts", "add", "--token-endpoint", "https://id.example.test/oauth/token", "--client-id", "c"]
        let notJSON = try await fixture.run(base, stdin: "access_token=abc")
        #expect(notJSON.status == Exit.usage, "\(notJSON)")
        let missing = try await fixture.run(base, stdin: #"{"token_type": "Bearer"}"#)
        #expect(missing.status == Exit.usage)
        #expect(missing.stderr.contains("access_token"))
        let badURL = try await fixture.run(["accounts", "add", "--token-endpoint", "ftp://x", "--client-id", "c"], stdin: "{}")
        #expect(badURL.status == Exit.usage)
        #expect(try await fixture.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
    }

    @Test("two imports naming no user: two accounts, none replaced by a guess, and the command says so")
    func importsWithoutSubjectNeverReplace() async throws {
        let fixture = try await Fixture()
        let base = ["accounts", "add", "--token-endpoint", "https://id.example.test/oauth/token", "--client-id", "c"]
        let alice = try await fixture.run(base, stdin: #"{"access_token": "alice-at", "token_type": "Bearer", "refresh_token": "alice-rt"}"#)
        #expect(alice.status == 0, "\(alice)")
        #expect(alice.stdout.contains("--subject"), "the command says how to replace on purpose")
        let bob = try await fixture.run(base, stdin: #"{"access_token": "bob-at", "token_type": "Bearer", "refresh_token": "bob-rt"}"#)
        #expect(bob.status == 0, "\(bob)")
        let accounts = try await fixture.run(["accounts", "list", "--json"]).jsonArray()
        #expect(accounts.count == 2, "alice's account was not replaced by bob's tokens")
        #expect(Set(accounts.compactMap { $0["subject"] as? String }).count == 2)
    }

    @Test("--lifetime none is accepted; set-policy changes an existing account and its open session")
    func lifetimeNoneAndSetPolicy() async throws {
        let fixture = try await Fixture()
        let base = ["accounts", "add", "--token-endpoint", "https://id.example.test/oauth/token", "--client-id", "c", "--subject", "alice"]
        let added = try await fixture.run(base + ["--lifetime", "none"], stdin: #"{"access_token": "a", "token_type": "Bearer"}"#)
        #expect(added.status == 0, "\(added)")
        let shown = try await fixture.run(["accounts", "show", "alice", "--json"]).jsonObject()
        let policy = try #require(shown["policy"] as? [String: Any])
        #expect(policy["absolute_lifetime_seconds"] is NSNull)
        #expect(policy["activity"] as? String == "any")

        let changed = try await fixture.run([
            "accounts", "set-policy", "alice", "--lifetime", "2h", "--idle-timeout", "none",
            "--activity", "interactive", "--json",
        ])
        #expect(changed.status == 0, "\(changed)")
        let after = try #require(try changed.jsonObject()["policy"] as? [String: Any])
        #expect(after["absolute_lifetime_seconds"] as? Int == 7200)
        #expect(after["idle_timeout_seconds"] is NSNull)
        #expect(after["activity"] as? String == "interactive")
        let sessions = try await fixture.run(["sessions", "list", "--json"]).jsonArray()
        #expect(sessions.first?["absolute_deadline"] is String, "the open session's deadline follows the new lifetime")
        #expect(sessions.first?["idle_deadline"] is NSNull)

        let nothing = try await fixture.run(["accounts", "set-policy", "alice"])
        #expect(nothing.status == Exit.usage)

        // Sensitive actions (schema 17): a cap shorter than the lifetime is refused; then
        // `vault token --sensitive` starts the lifetime again, up to the cap.
        let short = try await fixture.run(["accounts", "set-policy", "alice", "--sensitive-cap", "1h"])
        #expect(short.status == Exit.usage && short.stderr.contains("at least the absolute lifetime"), "\(short)")
        let capped = try await fixture.run(["accounts", "set-policy", "alice", "--sensitive-cap", "1d", "--refresh-lifetime", "90d", "--json"])
        #expect(capped.status == 0, "\(capped)")
        let policyNow = try #require(try capped.jsonObject()["policy"] as? [String: Any])
        #expect(policyNow["sensitive_cap_seconds"] as? Int == 86_400 && policyNow["refresh_lifetime_seconds"] as? Int == 90 * 86_400)
        // Read in milliseconds (JSON shows whole seconds): sign-in + 2 h before, now + 2 h after.
        let deadlineSQL = "SELECT absolute_deadline FROM sessions ORDER BY session_id DESC LIMIT 1"
        let before = try #require(try RawDatabase.int(fixture.cli.vault, deadlineSQL))
        let token = try await fixture.run(["token", "--sensitive"])
        #expect(token.status == 0, "\(token)")
        let after2 = try #require(try RawDatabase.int(fixture.cli.vault, deadlineSQL))
        #expect(after2 > before, "the sensitive action moved the absolute deadline: \(before) -> \(after2)")
    }
}
