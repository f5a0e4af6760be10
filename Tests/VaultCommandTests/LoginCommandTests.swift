import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `vault login` as a user runs it, against the development gateway on loopback: the binary in
/// a child process, the test playing the user at the gateway.
@Suite("vault login: device code, browser, bare token, re-login, step-up, Ctrl-C")
struct LoginCommandTests {
    struct World {
        let gateway: DevGateway
        let cli: VaultCLI
        let key: URL

        init() async throws {
            gateway = try await DevGateway.start()
            await gateway.registerClient(id: "vault-cli")
            await gateway.setDeviceGrantSettings(interval: 1, lifetime: 600)
            var cli = try VaultCLI()
            key = cli.file("vault.key")
            cli.environment["VAULT_KEY_FILE"] = key.path
            self.cli = cli
            try #require(try await cli.run(["init", "--key-file", key.path]).status == 0)
        }

        var issuer: String { gateway.baseURL.absoluteString }

        /// Starts `vault ARGUMENTS` as a child that keeps running (its standard input open).
        func start(_ arguments: [String]) throws -> ChildProgram {
            try ChildProgram(
                try BuiltProgram.url(named: "vault"), arguments,
                environment: [
                    "PATH": "/usr/bin:/bin", "HOME": cli.directory.url.path, "VAULT_PATH": cli.vault.path, "VAULT_KEY_FILE": key.path,
                ])
        }

        /// Waits for the child's device authorization to reach the gateway; the user code it shows.
        func userCode() async throws -> String {
            #expect(await gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(60))) { $0.deviceAuthorizations >= 1 })
            return try #require(await gateway.pendingUserCodes().last)
        }

        func end(_ child: ChildProgram) async -> ChildProgram.Output {
            _ = await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { $0.exitStatus != nil }
            await child.kill()
            return child.output.value
        }

        func device(_ extra: [String] = []) -> [String] {
            ["login", "--issuer", issuer, "--client-id", "vault-cli", "--device"] + extra
        }
    }

    @Test("--device: the code and where to enter it are shown, the user approves, the account is stored verified and `vault token` works")
    func deviceLogin() async throws {
        let world = try await World()
        let child = try world.start(world.device())
        let code = try await world.userCode()
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.standardError.contains(code) })
        #expect(child.output.value.standardError.contains("/device"))
        #expect(await world.gateway.approveDeviceCode(userCode: code, subject: "alice"))
        let output = await world.end(child)
        #expect(output.exitStatus == 0, "\(output.standardError)")
        #expect(output.lines.contains { $0.contains("Signed in as alice") }, "\(output.lines)")
        let list = try await world.cli.run(["accounts", "list", "--json"])
        let accounts = try list.jsonArray()
        #expect(accounts.map { $0["subject"] as? String } == ["alice"])
        let token = try await world.cli.run(["token"])
        #expect(token.status == 0, "\(token)")
        await world.gateway.stop()
    }

    @Test("a provider without a revocation endpoint: the sign-in says up front that signing out cannot end it there")
    func noRevocationSaidUpFront() async throws {
        let world = try await World()
        await world.gateway.setDiscovery(DiscoverySettings(omit: ["revocation_endpoint"]))
        let child = try world.start(world.device(["--json"]))
        let code = try await world.userCode()
        #expect(await world.gateway.approveDeviceCode(userCode: code, subject: "alice"))
        let output = await world.end(child)
        #expect(output.exitStatus == 0, "\(output.standardError)")
        #expect(output.standardError.contains("publishes no revocation endpoint"), "\(output.standardError)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.lines.joined(separator: "\n").utf8)) as? [String: Any])
        let revocation = try #require(json["revocation"] as? [String: Any])
        #expect(revocation["available"] as? Bool == false)
        await world.gateway.stop()
    }

    @Test("a provider that publishes no device authorization endpoint: the error names the option that gives it")
    func missingDeviceEndpointNamesTheOption() async throws {
        let world = try await World()
        await world.gateway.setDiscovery(DiscoverySettings(omit: ["device_authorization_endpoint"]))
        let refused = try await world.cli.run(world.device())
        #expect(refused.status == 64, "\(refused)")
        #expect(refused.stderr.contains("--device-authorization-endpoint"), "\(refused.stderr)")
        let given = try world.start(world.device(["--device-authorization-endpoint", world.gateway.deviceAuthorizationEndpoint.absoluteString]))
        let code = try await world.userCode()
        #expect(await world.gateway.approveDeviceCode(userCode: code, subject: "alice"))
        let output = await world.end(given)
        #expect(output.exitStatus == 0, "\(output.standardError)")
        await world.gateway.stop()
    }

    @Test("--device: Ctrl-C while waiting stops cleanly (exit 130), nothing stored")
    func interrupted() async throws {
        let world = try await World()
        let child = try world.start(world.device())
        _ = try await world.userCode()
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.standardError.contains("Ctrl-C") })
        kill(child.processIdentifier, SIGINT)
        let output = await world.end(child)
        #expect(output.exitStatus == 130, "\(output.standardError)")
        #expect(output.standardError.contains("nothing was stored"))
        let list = try await world.cli.run(["accounts", "list", "--json"])
        #expect(try list.jsonArray().isEmpty)
        await world.gateway.stop()
    }

    @Test("--device: the user declines (exit 85) or the code expires (exit 86); nothing stored", arguments: [true, false])
    func declinedOrExpired(declined: Bool) async throws {
        let world = try await World()
        let child = try world.start(world.device())
        let code = try await world.userCode()
        if declined {
            #expect(await world.gateway.denyDeviceCode(userCode: code))
        } else {
            #expect(await world.gateway.expireDeviceCode(userCode: code))
        }
        let output = await world.end(child)
        #expect(output.exitStatus == (declined ? 85 : 86), "\(output.standardError)")
        #expect(try await world.cli.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
        await world.gateway.stop()
    }

    @Test("--browser --no-open: the URL is printed alone on a line of standard error; following it signs in")
    func browserLogin() async throws {
        let world = try await World()
        await world.gateway.signInBrowserUser("bob")
        let child = try world.start(["login", "--issuer", world.issuer, "--client-id", "vault-cli", "--browser", "--no-open"])
        #expect(
            await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { output in
                output.standardError.split(separator: "\n").contains { $0.hasPrefix("http://") && !$0.contains(" ") }
            })
        let line = try #require(child.output.value.standardError.split(separator: "\n").first { $0.hasPrefix("http://") && !$0.contains(" ") })
        let url = try #require(URL(string: String(line)))
        let page = try await Self.browse(url)  // the browser: follows the redirect to 127.0.0.1
        #expect(page.contains("close this tab"), "\(page)")
        let output = await world.end(child)
        #expect(output.exitStatus == 0, "\(output.standardError)")
        #expect(output.lines.contains { $0.contains("Signed in as bob") })
        await world.gateway.stop()
    }

    @Test("--redirect-uri: the provider's registered loopback URI is used, kept with the account, and used again by --account")
    func registeredRedirectURI() async throws {
        let world = try await World()
        await world.gateway.signInBrowserUser("bob")
        func signIn(_ arguments: [String]) async throws -> (String, ChildProgram.Output) {
            let child = try world.start(arguments + ["--browser", "--no-open"])
            #expect(
                await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { output in
                    output.standardError.split(separator: "\n").contains { $0.hasPrefix("http://") && !$0.contains(" ") }
                })
            let line = try #require(child.output.value.standardError.split(separator: "\n").first { $0.hasPrefix("http://") && !$0.contains(" ") })
            let url = try #require(URLComponents(string: String(line)))
            let redirect = try #require(url.queryItems?.first { $0.name == "redirect_uri" }?.value)
            _ = try await Self.browse(try #require(url.url))
            return (redirect, await world.end(child))
        }
        let (first, signedIn) = try await signIn(["login", "--issuer", world.issuer, "--client-id", "vault-cli", "--redirect-uri", "http://[::1]/oauth/cb"])
        #expect(signedIn.exitStatus == 0, "\(signedIn.standardError)")
        #expect(first.wholeMatch(of: /http:\/\/\[::1\]:[0-9]+\/oauth\/cb/) != nil, "\(first)")
        let account = try #require(try await world.cli.run(["accounts", "list", "--json"]).jsonArray().first?["id"] as? String)
        let (again, signedInAgain) = try await signIn(["login", "--account", account])
        #expect(signedInAgain.exitStatus == 0, "\(signedInAgain.standardError)")
        #expect(again.hasPrefix("http://[::1]:") && again.hasSuffix("/oauth/cb"), "the account's redirect URI, not the default: \(again)")

        let refused = try await world.cli.run(["login", "--issuer", world.issuer, "--client-id", "vault-cli", "--redirect-uri", "http://example.com/cb"])
        #expect(refused.status == 64, "\(refused)")
        #expect(refused.stderr.contains("127.0.0.1, [::1] or localhost"), "\(refused.stderr)")
        await world.gateway.stop()
    }

    @Test(
        "--browser with a launcher that never returns, or fails: the sign-in goes on, and a failed launcher is told",
        arguments: [true, false])
    func browserLauncherHangsOrFails(hangs: Bool) async throws {
        let world = try await World()
        await world.gateway.signInBrowserUser("bob")
        // A fake xdg-open first on PATH: one that stays until the test ends (or its directory is
        // gone, or 10 min passed: never left behind), or one that fails.
        let bin = world.cli.file("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: false)
        let release = world.cli.file("release")
        let script =
            hangs
            ? "#!/bin/sh\ni=0\nwhile [ ! -e '\(release.path)' ] && [ -d '\(bin.path)' ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i+1)); done\n"
            : "#!/bin/sh\nexit 3\n"
        try Data(script.utf8).write(to: bin.appending(path: "xdg-open"))
        chmod(bin.appending(path: "xdg-open").path, 0o755)
        defer { _ = FileManager.default.createFile(atPath: release.path, contents: nil) }
        let child = try ChildProgram(
            try BuiltProgram.url(named: "vault"), ["login", "--issuer", world.issuer, "--client-id", "vault-cli", "--browser"],
            environment: [
                "PATH": "\(bin.path):/usr/bin:/bin", "HOME": world.cli.directory.url.path, "VAULT_PATH": world.cli.vault.path,
                "VAULT_KEY_FILE": world.key.path, "DISPLAY": ":99",
            ])
        #expect(
            await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { output in
                output.standardError.split(separator: "\n").contains { $0.hasPrefix("http://") && !$0.contains(" ") }
            })
        if !hangs {
            #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.standardError.contains("xdg-open exited 3") })
        }
        let line = try #require(child.output.value.standardError.split(separator: "\n").first { $0.hasPrefix("http://") && !$0.contains(" ") })
        let page = try await Self.browse(try #require(URL(string: String(line))))
        #expect(page.contains("Signed in"), "\(page)")
        let output = await world.end(child)
        #expect(output.exitStatus == 0, "\(output.standardError)")
        await world.gateway.stop()
    }

    @Test("a sign-in whose code the provider no longer accepts (invalid_grant) says so, not that a refresh token expired")
    func codeRefused() async throws {
        let world = try await World()
        await world.gateway.failNextTokenRequests(
            1, with: TokenFault(status: 400, error: "invalid_grant", body: #"{"error":"invalid_grant","error_description":"the device_code was already used"}"#)
        )
        let child = try world.start(world.device())
        let output = await world.end(child)
        #expect(output.exitStatus != 0)
        #expect(output.standardError.contains("no longer accepts this sign-in's code"), "\(output.standardError)")
        #expect(!output.standardError.contains("refresh token"), "\(output.standardError)")
        #expect(try await world.cli.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
        await world.gateway.stop()
    }

    @Test("--account: signing in as another user is refused (exit 88) and the account keeps its session")
    func wrongUser() async throws {
        let world = try await World()
        var child = try world.start(world.device())
        #expect(await world.gateway.approveDeviceCode(userCode: try await world.userCode(), subject: "alice"))
        #expect(await world.end(child).exitStatus == 0)
        let before = try await world.cli.run(["sessions", "list", "--json"]).stdout

        child = try world.start(["login", "--account", "alice", "--device"])
        #expect(await world.gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(60))) { $0.deviceAuthorizations >= 2 })
        let code = try #require(await world.gateway.pendingUserCodes().last)
        #expect(await world.gateway.approveDeviceCode(userCode: code, subject: "bob"))
        let output = await world.end(child)
        #expect(output.exitStatus == 88, "\(output.standardError)")
        #expect(output.standardError.contains("signed in as bob"))
        #expect(try await world.cli.run(["sessions", "list", "--json"]).stdout == before)
        await world.gateway.stop()
    }

    @Test("an ID token with a bad signature: exit 87 naming the check, nothing stored")
    func badIDToken() async throws {
        let world = try await World()
        await world.gateway.corruptNextIDTokens(1, with: .badSignature)
        let child = try world.start(world.device())
        #expect(await world.gateway.approveDeviceCode(userCode: try await world.userCode(), subject: "alice"))
        let output = await world.end(child)
        #expect(output.exitStatus == 87, "\(output.standardError)")
        #expect(output.standardError.contains("signature"))
        #expect(try await world.cli.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
        await world.gateway.stop()
    }

    @Test("`vault token --max-auth-age`: an old authentication exits 84 naming the step-up; a recent one prints the token")
    func stepUp() async throws {
        let world = try await World()
        // The provider's clock says alice authenticated ten minutes ago.
        await world.gateway.setClock { Date().addingTimeInterval(-600) }
        let child = try world.start(world.device())
        #expect(await world.gateway.approveDeviceCode(userCode: try await world.userCode(), subject: "alice"))
        #expect(await world.end(child).exitStatus == 0)
        let refused = try await world.cli.run(["token", "--max-auth-age", "5m"])
        #expect(refused.status == 84, "\(refused)")
        #expect(refused.stderr.contains("--max-age 0"))
        #expect(refused.stdout.isEmpty)
        let allowed = try await world.cli.run(["token", "--max-auth-age", "15m"])
        #expect(allowed.status == 0, "\(allowed)")
        await world.gateway.stop()
    }

    @Test("--with-token: a bare access token on standard input becomes an account without refresh; `vault token` prints it")
    func withToken() async throws {
        let world = try await World()
        let token = "bare-token-0123456789"
        let added = try await world.cli.run(
            [
                "login", "--issuer", world.issuer, "--client-id", "vault-cli", "--with-token",
                "--expires-in", "3600",
            ], stdin: token + "\n")
        #expect(added.status == 0, "\(added)")
        #expect(!added.allOutput.contains(token))
        let printed = try await world.cli.run(["token"])
        #expect(printed.stdout == token + "\n")
        await world.gateway.stop()
    }

    @Test("accounts add verifies an imported ID token against the issuer's keys: a sound one marks the subject verified, a forged one is refused")
    func importVerifies() async throws {
        let world = try await World()
        let sound = await world.gateway.issueGrant(subject: "erin", clientID: "vault-cli")
        let added = try await world.cli.run(
            [
                "accounts", "add", "--token-endpoint", world.gateway.tokenEndpoint.absoluteString,
                "--client-id", "vault-cli", "--json",
            ], stdin: AccountsAndTokenTests.tokenResponse(sound))
        #expect(added.status == 0, "\(added)")
        let account = try added.jsonObject()
        #expect(account["subject"] as? String == "erin")
        #expect(account["subject_source"] as? String == "verified")

        await world.gateway.corruptNextIDTokens(1, with: .badSignature)
        let forged = await world.gateway.issueGrant(subject: "mallory", clientID: "vault-cli")
        let refused = try await world.cli.run(
            [
                "accounts", "add", "--token-endpoint", world.gateway.tokenEndpoint.absoluteString,
                "--client-id", "vault-cli",
            ], stdin: AccountsAndTokenTests.tokenResponse(forged))
        #expect(refused.status == 87, "\(refused)")
        #expect(refused.stderr.contains("signature"))
        #expect(try await world.cli.run(["accounts", "list", "--json"]).jsonArray().count == 1)

        // A token whose own `iss` names another server (with keys of its choosing) is not
        // checked against them: imported through this token endpoint, its subject stays unverified.
        let elsewhere = try await DevGateway.start()
        let foreign = await elsewhere.issueGrant(subject: "mallory", clientID: "vault-cli")
        let unvouched = try await world.cli.run(
            [
                "accounts", "add", "--token-endpoint", world.gateway.tokenEndpoint.absoluteString,
                "--client-id", "vault-cli", "--json",
            ], stdin: AccountsAndTokenTests.tokenResponse(foreign))
        #expect(unvouched.status == 0, "\(unvouched)")
        #expect(try unvouched.jsonObject()["subject_source"] as? String == "unverified")
        await elsewhere.stop()
        await world.gateway.stop()
    }

    /// A browser: GETs `url` and follows redirects; the last page's text.
    static func browse(_ url: URL) async throws -> String {
        let transport = NIOTransport(timeout: TestTimeScale.scaled(.seconds(30)))
        var next = url
        for _ in 0..<5 {
            let response = try await transport.send(HTTPRequest(method: .get, url: next))
            guard (300..<400).contains(response.status), let location = response.headers["Location"],
                let target = URL(string: location, relativeTo: next)?.absoluteURL
            else {
                return String(decoding: response.body, as: UTF8.self)
            }
            next = target
        }
        return ""
    }
}
