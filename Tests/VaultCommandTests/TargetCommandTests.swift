import AgentWire
import DevGateway
import Foundation
import Testing
import VaultAgent
import VaultTestSupport

/// Issue 34 at the command line: `vault token --resource --scope`, `exec`, the agent and the
/// credential helpers hand tokens for other APIs of the same identity service.
@Suite("vault token --resource, exec, the agent and set-host --resource")
struct TargetCommandTests {
    struct World {
        let gateway: DevGateway
        let cli: VaultCLI
        let keyFile: URL

        init() async throws {
            gateway = try await DevGateway.start()
            var cli = try VaultCLI()
            keyFile = cli.file("vault.key")
            cli.environment["VAULT_KEY_FILE"] = keyFile.path
            self.cli = cli
            try #require(try await cli.run(["init", "--key-file", keyFile.path]).status == 0)
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
            let added = try await cli.run(
                ["accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli", "--subject", "alice"],
                stdin: AccountsAndTokenTests.tokenResponse(issued))
            try #require(added.status == 0, "\(added)")
        }

        var files: String { gateway.resourceServer(named: "files") }

        func run(_ arguments: [String], stdin: String? = nil) async throws -> CommandResult { try await cli.run(arguments, stdin: stdin) }

        func finish() async {
            _ = try? await cli.run(["agent", "stop"])
            await gateway.stop()
        }
    }

    @Test("`vault token --resource URI --scope S` prints a token for that API, kept and served again, beside the account's own")
    func tokenForResource() async throws {
        let world = try await World()
        defer { Task { await world.finish() } }
        let own = try await world.run(["token"]).stdout
        let json = try await world.run(["token", "--resource", world.files, "--scope", "profile", "--json"])
        #expect(json.status == 0, "\(json)")
        let object = try json.jsonObject()
        let token = try #require(object["token"] as? String)
        #expect(object["resources"] as? [String] == [world.files] && object["scopes"] as? [String] == ["profile"])
        #expect(token + "\n" != own)
        let again = try await world.run(["token", "--scope", "profile", "--resource", world.files])
        #expect(again.stdout == token + "\n", "the kept token, asked in another order")
        #expect(await world.gateway.stats().resourceTokenRequests == 1)
        let plain = try await world.run(["token", "--json"])
        #expect(try plain.jsonObject()["resources"] as? [String] == [], "every documented key is present")
        #expect(try await world.run(["token"]).stdout == own)
    }

    @Test("a bad resource is a usage error before anything is sent; one the service refuses is exit 76 naming invalid_target")
    func refusals() async throws {
        let world = try await World()
        defer { Task { await world.finish() } }
        let fragment = try await world.run(["token", "--resource", "https://api.example.test/#x"])
        #expect(fragment.status == 64 && fragment.stderr.contains("fragment"), "\(fragment)")
        let unknown = try await world.run(["token", "--resource", "https://elsewhere.example.test/api"])
        #expect(unknown.status == 76 && unknown.stderr.contains("invalid_target"), "\(unknown)")
        #expect(unknown.stdout.isEmpty)
        #expect(try await world.run(["token"]).status == 0, "the account goes on")
        #expect(await world.gateway.stats().invalidTargetRefusals == 1)
    }

    @Test("the agent serves tokens for targets and echoes the target; exec puts one in the child's environment")
    func agentAndExec() async throws {
        let world = try await World()
        defer { Task { await world.finish() } }
        let started = try await world.run(["agent", "start", "--key-file", world.keyFile.path])
        try #require(started.status == 0, "\(started)")
        let direct = try await world.run(["token", "--resource", world.files, "--no-agent"])
        let served = try await world.run(["token", "--resource", world.files])
        #expect(served.status == 0 && served.stdout == direct.stdout, "the agent hands the same kept token: \(served)")
        let exec = try await world.run(["exec", "--resource", world.files, "--", "/bin/sh", "-c", "printf %s \"$ACCESS_TOKEN\""])
        #expect(exec.status == 0 && exec.stdout + "\n" == direct.stdout, "\(exec)")
        #expect(await world.gateway.stats().resourceTokenRequests == 1)
    }

    @Test("an agent that ignores the target (one that predates it) answers with another token: refused, nothing printed")
    func agentWithoutEcho() async throws {
        let world = try await World()
        defer { Task { await world.finish() } }
        // A runtime directory of the test's own, where the old agent listens.
        let runtime = world.cli.file("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        var cli = world.cli
        cli.environment["XDG_RUNTIME_DIR"] = runtime.path
        let places = AgentPlaces(environment: { $0 == "XDG_RUNTIME_DIR" ? runtime.path : nil })
        let directory = try #require(places.runtime.first)
        let server = try AgentServer(
            directory: URL(fileURLWithPath: directory), name: AgentPlaces.socketName(forVault: world.cli.vault.path),
            handler: { _, _ in AgentResponse(token: AgentToken(value: "own-token-of-an-old-agent", type: "Bearer", expiresAt: nil, account: "a", scopes: [])) },
            onRefusedPeer: { _ in })
        try await server.run()  // returns once it accepts connections
        let result: CommandResult
        do {
            result = try await cli.run(["token", "--resource", world.files])
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
        #expect(result.status == 1 && result.stderr.contains("predates tokens for resources"), "\(result)")
        #expect(!result.stdout.contains("own-token-of-an-old-agent") && !result.stderr.contains("own-token-of-an-old-agent"))
    }

    @Test(
        "`accounts set-host --resource`: git credential fill gets the token for that API; --own-token hands the account's own again",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/git"), "git is not installed (`make test` installs it)"))
    func hostBoundToResource() async throws {
        let world = try await World()
        defer { Task { await world.finish() } }
        let set = try await world.run(["accounts", "set-host", "alice", "git.example.test", "--resource", world.files])
        #expect(set.status == 0 && set.stdout.contains("a token for resource \(world.files)"), "\(set)")
        let expected = try await world.run(["token", "--resource", world.files]).stdout.trimmingCharacters(in: .newlines)
        let answer = try await world.run(["git-credential", "get"], stdin: "protocol=https\nhost=git.example.test\n\n")
        #expect(answer.stdout.contains("password=\(expected)\n"), "\(answer)")
        #expect(try await world.run(["accounts", "set-host", "alice", "git.example.test", "--own-token"]).status == 0)
        let own = try await world.run(["token"]).stdout.trimmingCharacters(in: .newlines)
        let after = try await world.run(["git-credential", "get"], stdin: "protocol=https\nhost=git.example.test\n\n")
        #expect(after.stdout.contains("password=\(own)\n"), "\(after)")
    }
}
