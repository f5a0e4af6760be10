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

        /// The front run under `name` (a link to `vault-lean`, as `make install` puts it beside
        /// `vault`: it hands the helper over to the full command), with only the environment a
        /// helper started by git or docker would have.
        func installed(_ name: String, _ arguments: [String], _ input: String) async throws -> BuiltProgram.Output {
            let link = cli.file(name)
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: try BuiltProgram.url(named: "vault-lean"))
            return try await BuiltProgram.run(
                link, arguments,
                environment: [
                    "PATH": "/usr/bin:/bin", "HOME": cli.directory.url.path, "VAULT_PATH": cli.vault.path,
                    "VAULT_KEY_FILE": cli.file("vault.key").path,
                ], stdin: input, in: cli.directory)
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

        let linked = try await world.installed("docker-credential-vault", ["get"], "registry.example.test:5000\n")
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(linked.stdout.contains(token))
        await world.gateway.stop()
    }

    /// bob, a second account of the gateway, with no host yet.
    static func addBob(_ world: World) async throws {
        let issued = await world.gateway.issueGrant(subject: "bob", clientID: "vault-cli")
        let added = try await world.cli.run(
            [
                "accounts", "add", "--token-endpoint", world.gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                "--subject", "bob",
            ], stdin: AccountsAndTokenTests.tokenResponse(issued))
        try #require(added.status == 0, "\(added)")
    }

    @Test("accounts share a host told apart by user name: username= picks one, without it the default answers; --default moves it")
    func sharedHost() async throws {
        let world = try await World()
        try await Self.addBob(world)
        let request = "protocol=https\nhost=git.example.test\npath=team/repo.git\n"
        let same = try await world.cli.run(["accounts", "set-host", "bob", "git.example.test/team"])
        #expect(same.status == 73, "two accounts answering as oauth2 on one host cannot be told apart: \(same)")
        #expect(same.stderr.contains("another user name"), "\(same.stderr)")
        #expect(try await world.cli.run(["accounts", "set-host", "alice", "git.example.test/team", "--username", "alice"]).status == 0)
        let bobBound = try await world.cli.run(["accounts", "set-host", "bob", "git.example.test/team", "--username", "bob"])
        #expect(bobBound.status == 0, "\(bobBound)")
        #expect(bobBound.stdout.contains("(not its default)"), "\(bobBound.stdout)")
        // Adding bob made him the active account: each token by name.
        let alice = try await world.cli.run(["token", "--account", "alice"]).stdout.trimmingCharacters(in: .newlines)
        let bob = try await world.cli.run(["token", "--account", "bob"]).stdout.trimmingCharacters(in: .newlines)
        #expect(alice != bob)

        let byDefault = try await world.helper(["git-credential", "get"], request + "\n")
        #expect(byDefault.stdout.contains("username=alice\npassword=\(alice)\n"), "the first account bound is the default: \(byDefault)")
        let asBob = try await world.helper(["git-credential", "get"], request + "username=bob\n\n")
        #expect(asBob.stdout.contains("username=bob\npassword=\(bob)\n"), "\(asBob)")
        let asCarol = try await world.helper(["git-credential", "get"], request + "username=carol\n\n")
        #expect(asCarol.status == 0 && asCarol.stdout.isEmpty, "no account answers as carol: \(asCarol)")

        #expect(try await world.cli.run(["accounts", "set-host", "bob", "git.example.test/team", "--username", "bob", "--default"]).status == 0)
        let moved = try await world.helper(["git-credential", "get"], request + "\n")
        #expect(moved.stdout.contains("username=bob\npassword=\(bob)\n"), "\(moved)")
        let list = try await world.helper(["docker-credential", "list"], "")
        #expect(try list.jsonObject()["https://git.example.test/team"] as? String == "bob", "\(list)")

        let before = await world.gateway.stats().tokenRequests
        let erased = try await world.helper(["git-credential", "erase"], request + "username=bob\npassword=\(bob)\n\n")
        #expect(erased.status == 0, "\(erased)")
        #expect(await world.gateway.stats().tokenRequests == before + 1, "bob's token, refused, is refreshed")
        #expect(try await world.cli.run(["token", "--account", "alice"]).stdout == alice + "\n", "alice's is not")
        await world.gateway.stop()
    }

    @Test("a request the vault binds nothing to is answered without the key: no passphrase asked, nothing on standard error")
    func notFoundWithoutTheKey() async throws {
        let world = try await World()
        try await Self.addBob(world)
        #expect(try await world.cli.run(["accounts", "set-host", "bob", "git.example.test/team", "--username", "bob"]).status == 0)
        let noKey = ["VAULT_KEY_FILE": ""]
        for request in [
            "protocol=https\nhost=unknown.example.test\n\n", "protocol=https\nhost=git.example.test\npath=team\nusername=carol\n\n",
            "protocol=https\nhost=git.example.test\npath=elsewhere\n\n",
        ] {
            let git = try await world.cli.run(["git-credential", "get"], stdin: request, environment: noKey)
            #expect(git.status == 0 && git.stdout.isEmpty && git.stderr.isEmpty, "\(request): \(git)")
        }
        let docker = try await world.cli.run(["docker-credential", "get"], stdin: "registry.other.test\n", environment: noKey)
        #expect(docker.status == 1 && docker.stdout == "credentials not found in native keychain\n" && docker.stderr.isEmpty, "\(docker)")
        // A bound host needs the key: the failure is on standard output, where docker reads it.
        let bound = try await world.cli.run(["docker-credential", "get"], stdin: "registry.example.test:5000\n", environment: noKey)
        #expect(bound.status == 1 && bound.stdout.contains("VAULT_KEY_FILE"), "\(bound)")
        let gitBound = try await world.cli.run(
            ["git-credential", "get"], stdin: "protocol=https\nhost=git.example.test\npath=team\n\n", environment: noKey)
        #expect(gitBound.status != 0 && gitBound.stderr.contains("VAULT_KEY_FILE"), "\(gitBound)")
        await world.gateway.stop()
    }

    @Test("docker: store takes only what get answers and says how tokens get in; erase refreshes; every failure is on standard output")
    func dockerStoreErase() async throws {
        let world = try await World()
        let got = try await world.helper(["docker-credential", "get"], "registry.example.test:5000\n")
        let answer = try got.jsonObject()
        let token = try #require(answer["Secret"] as? String)
        let foreign = try await world.helper(
            ["docker-credential", "store"], #"{"ServerURL":"registry.example.test:5000","Username":"oauth2","Secret":"not-a-vault-token"}"#)
        #expect(foreign.status == 1 && foreign.stdout.contains("`vault login --host registry.example.test:5000`"), "\(foreign)")
        let unbound = try await world.helper(["docker-credential", "store"], #"{"ServerURL":"registry.other.test","Username":"me","Secret":"s"}"#)
        #expect(unbound.status == 1 && unbound.stdout.contains("handed to no account"), "\(unbound)")
        let own = try await world.helper(
            ["docker-credential", "store"], #"{"ServerURL":"registry.example.test:5000","Username":"oauth2","Secret":"\#(token)"}"#)
        #expect(own.status == 0 && own.stdout.isEmpty, "docker login with the vault's own token: \(own)")

        let before = await world.gateway.stats().tokenRequests
        let erased = try await world.helper(["docker-credential", "erase"], "registry.example.test:5000\n")
        #expect(erased.status == 0, "\(erased)")
        #expect(await world.gateway.stats().tokenRequests == before + 1)
        #expect(try await world.token != token)
        let eraseUnbound = try await world.helper(["docker-credential", "erase"], "registry.other.test\n")
        #expect(eraseUnbound.status == 1 && eraseUnbound.stdout == "credentials not found in native keychain\n", "\(eraseUnbound)")
        let unknown = try await world.helper(["docker-credential", "version-2"], "")
        #expect(unknown.status == 1 && unknown.stdout.contains("get, store, erase or list"), "\(unknown)")

        // Installed as git-credential-vault, git runs it with the operation alone.
        let linked = try await world.installed("git-credential-vault", ["get"], "protocol=https\nhost=git.example.test\npath=team\n\n")
        #expect(linked.status == 0 && linked.stdout.contains("username=oauth2\npassword="), "\(linked.stderr)")
        await world.gateway.stop()
    }
}
