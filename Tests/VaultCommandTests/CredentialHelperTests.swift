import DevGateway
import Foundation
import Testing
import VaultTestSupport

/// The git and docker credential helpers with the built binary; git itself drives its helper.
@Suite("vault git-credential and docker-credential")
struct CredentialHelperTests {
    struct World {
        let gateway: DevGateway
        let cli: VaultCLI

        init() async throws {
            gateway = try await DevGateway.start()
            // A key file, not a passphrase: no Argon2id in every helper call of a suite that
            // runs beside CPU-bound ones.
            var cli = try VaultCLI()
            cli.environment["VAULT_KEY_FILE"] = cli.file("vault.key").path
            self.cli = cli
            try #require(try await cli.run(["init", "--key-file", cli.file("vault.key").path]).status == 0)
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
            let added = try await cli.run(
                [
                    "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli", "--subject", "alice",
                    "--host", "git.example.test/team", "--host", "https://Registry.Example.test:5000/",
                ],
                stdin: AccountsAndTokenTests.tokenResponse(issued))
            try #require(added.status == 0, "\(added)")
        }

        var token: String {
            get async throws { try await cli.run(["token"]).stdout.trimmingCharacters(in: .newlines) }
        }

        func helper(_ arguments: [String], _ input: String) async throws -> CommandResult {
            try await cli.run(arguments, stdin: input)
        }
    }

    @Test(
        "git credential fill asks `vault git-credential`, which answers the token, its user name and expiry for the set host and path",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/git"), "git is not installed (`make test` installs it)"))
    func gitFill() async throws {
        let world = try await World()
        let config = world.cli.file("gitconfig")
        let vault = try BuiltProgram.url(named: "vault").path
        try Data("[credential]\n\thelper = !\(vault) git-credential\n\tuseHttpPath = true\n".utf8).write(to: config)
        let environment = [
            "PATH": "/usr/bin:/bin", "HOME": world.cli.directory.url.path, "VAULT_PATH": world.cli.vault.path,
            "VAULT_KEY_FILE": world.cli.file("vault.key").path, "GIT_CONFIG_GLOBAL": config.path, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
        ]
        let filled = try await BuiltProgram.run(
            URL(fileURLWithPath: "/usr/bin/git"), ["credential", "fill"], environment: environment,
            stdin: "protocol=https\nhost=git.example.test\npath=team/app.git\n\n", in: world.cli.directory)
        #expect(filled.status == 0, "\(filled.stderr)")
        let token = try await world.token
        #expect(filled.stdout.contains("username=oauth2\n"))
        #expect(filled.stdout.contains("password=\(token)\n"))
        // Another path of that host is not the account's: git finds no credential.
        let other = try await BuiltProgram.run(
            URL(fileURLWithPath: "/usr/bin/git"), ["credential", "fill"], environment: environment,
            stdin: "protocol=https\nhost=git.example.test\npath=elsewhere/app.git\n\n", in: world.cli.directory)
        #expect(other.status != 0)
        #expect(!other.stdout.contains(token))
        await world.gateway.stop()
    }

    @Test("a path is matched as the server resolves it: `..`, `.`, repeated slashes and percent-encoding; a path climbing above its root matches nothing")
    func pathsAreNormalisedBeforeMatching() async throws {
        let world = try await World()
        let token = try await world.token
        func answer(_ path: String) async throws -> String {
            try await world.helper(["git-credential", "get"], "protocol=https\nhost=git.example.test\npath=\(path)\n\n").stdout
        }
        // Outside the account's `team` prefix, however it is written.
        for path in [
            "team/../other/repo.git", "team/%2e%2e/other/repo.git", "team/%2E%2E%2Fother/repo.git", "./team/../../team/repo.git", "team%2f..%2f..%2fteam",
            "team/%252e%252e/other",
        ] {
            #expect(!(try await answer(path)).contains(token), "\(path) got the token bound to git.example.test/team")
        }
        // Inside it, however it is written.
        for path in ["team/app.git", "team//app.git", "./team/./app.git", "other/../team/app.git", "%74eam/app.git"] {
            #expect(try await answer(path).contains("password=\(token)\n"), "\(path) is inside git.example.test/team")
        }
        await world.gateway.stop()
    }

    @Test("get answers password_expiry_utc; unknown hosts and plain http off this machine get no answer; store is ignored")
    func gitProtocol() async throws {
        let world = try await World()
        let answer = try await world.helper(["git-credential", "get"], "protocol=https\nhost=git.example.test\npath=team\n\n")
        #expect(answer.status == 0)
        #expect(answer.stdout.contains("password_expiry_utc="))
        for request in ["protocol=https\nhost=unknown.example.test\n\n", "protocol=http\nhost=git.example.test\npath=team\n\n"] {
            let none = try await world.helper(["git-credential", "get"], request)
            #expect(none.status == 0)
            #expect(none.stdout.isEmpty, "\(request)")
        }
        let before = try await world.token
        let stored = try await world.helper(["git-credential", "store"], "protocol=https\nhost=git.example.test\nusername=x\npassword=y\n\n")
        #expect(stored.status == 0)
        #expect(try await world.token == before, "a credential the vault did not issue is not stored")
        let answered = try await world.helper(["git-credential", "get"], "protocol=https\nhost=git.example.test\npath=team\n\n")
        #expect(answered.stdout.contains("password=\(before)\n") && !answered.stdout.contains("password=y\n"))
        await world.gateway.stop()
    }

    @Test("erase of the token we gave counts as a refused token: the next get has a refreshed one; erase of another does nothing")
    func eraseRefreshes() async throws {
        let world = try await World()
        let first = try await world.token
        let before = await world.gateway.stats().tokenRequests
        _ = try await world.helper(["git-credential", "erase"], "protocol=https\nhost=git.example.test\npath=team\nusername=oauth2\npassword=not-ours\n\n")
        #expect(await world.gateway.stats().tokenRequests == before)
        let erased = try await world.helper(
            ["git-credential", "erase"], "protocol=https\nhost=git.example.test\npath=team\nusername=oauth2\npassword=\(first)\n\n")
        #expect(erased.status == 0, "\(erased)")
        #expect(await world.gateway.stats().tokenRequests == before + 1)
        #expect(try await world.token != first)
        await world.gateway.stop()
    }

    @Test("docker: get answers JSON for the registry, not found (exit 1) for others, list names every host; docker-credential-vault works too")
    func docker() async throws {
        let world = try await World()
        let token = try await world.token
        let got = try await world.helper(["docker-credential", "get"], "https://registry.example.test:5000\n")
        #expect(got.status == 0, "\(got)")
        let object = try got.jsonObject()
        #expect(object["Secret"] as? String == token)
        #expect(object["Username"] as? String == "oauth2")
        let missing = try await world.helper(["docker-credential", "get"], "registry.other.test\n")
        #expect(missing.status == 1)
        #expect(missing.stdout.contains("credentials not found in native keychain"))
        let list = try await world.helper(["docker-credential", "list"], "")
        #expect(try list.jsonObject().keys.sorted() == ["https://git.example.test/team", "https://registry.example.test:5000"])

        let link = world.cli.file("docker-credential-vault")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: try BuiltProgram.url(named: "vault"))
        let linked = try await BuiltProgram.run(
            link, ["get"],
            environment: [
                "PATH": "/usr/bin:/bin", "HOME": world.cli.directory.url.path, "VAULT_PATH": world.cli.vault.path,
                "VAULT_KEY_FILE": world.cli.file("vault.key").path,
            ], stdin: "registry.example.test:5000\n", in: world.cli.directory)
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(linked.stdout.contains(token))
        await world.gateway.stop()
    }

    @Test("a host belongs to one account: giving it to a second is refused; set-host gives another host with its own user name")
    func oneHostOneAccount() async throws {
        let world = try await World()
        let issued = await world.gateway.issueGrant(subject: "bob", clientID: "vault-cli")
        _ = try await world.cli.run(
            [
                "accounts", "add", "--token-endpoint", world.gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                "--subject", "bob",
            ], stdin: AccountsAndTokenTests.tokenResponse(issued))
        let taken = try await world.cli.run(["accounts", "set-host", "bob", "git.example.test/team"])
        #expect(taken.status == 73, "\(taken)")
        #expect(try await world.cli.run(["accounts", "set-host", "bob", "git.example.test/other", "--username", "bob"]).status == 0)
        let bobs = try await world.helper(["git-credential", "get"], "protocol=https\nhost=git.example.test\npath=other/x.git\n\n")
        #expect(bobs.stdout.contains("username=bob\n"))
        await world.gateway.stop()
    }
}
