import DevGateway
import Foundation
import GRDB
import Testing
import VaultStore
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `vault agent` end to end with the built binary: a real daemon, a real Unix socket.
@Suite("vault agent, lock, unlock, token through the agent, exec")
struct AgentCommandTests {
    /// A key-file vault with one account imported from the gateway; the key file named only
    /// when the agent starts (and for `--no-agent`), never in the commands' environment.
    struct World {
        let gateway: DevGateway
        let cli: VaultCLI
        let keyFile: URL

        init(accessTokenLifetime: Duration = .seconds(3600)) async throws {
            gateway = try await DevGateway.start()
            // A runtime directory of this test's own: agents of tests running side by side
            // never share a socket directory (and one test may open its up on purpose).
            var cli = try VaultCLI()
            let runtime = cli.file("run")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            cli.environment["XDG_RUNTIME_DIR"] = runtime.path
            self.cli = cli
            keyFile = cli.file("vault.key")
            let credential = ["--key-file", keyFile.path]
            try #require(try await cli.run(["init"] + credential).status == 0)
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli", accessTokenLifetime: accessTokenLifetime)
            let added = try await cli.run(
                [
                    "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                    "--subject", "alice",
                ] + credential, stdin: AccountsAndTokenTests.tokenResponse(issued))
            try #require(added.status == 0, "\(added)")
        }

        func start(_ extra: [String] = []) async throws -> CommandResult {
            let result = try await cli.run(["agent", "start", "--key-file", keyFile.path] + extra)
            if result.status != 0 && result.status != 73 { Issue.record("agent start: \(result)") }
            return result
        }

        /// Stops the agent whatever happened in the test.
        func finish() async {
            _ = try? await cli.run(["agent", "stop"])
            await gateway.stop()
        }

        /// The environment of a `vault` child started by hand.
        var environment: [String: String] {
            [
                "PATH": "/usr/bin:/bin", "HOME": cli.directory.url.path, "VAULT_PATH": cli.vault.path,
                "XDG_RUNTIME_DIR": cli.environment["XDG_RUNTIME_DIR"] ?? "",
            ]
        }

        func status() async throws -> [String: Any] {
            try await cli.run(["agent", "status", "--json"]).jsonObject()
        }
    }

    static func withWorld(accessTokenLifetime: Duration = .seconds(3600), _ body: (World) async throws -> Void) async throws {
        let world = try await World(accessTokenLifetime: accessTokenLifetime)
        do {
            try await body(world)
        } catch {
            await world.finish()
            throw error
        }
        await world.finish()
    }

    @Test("a session a timeout locked behind the agent: the message names the command, and one `vault unlock` resumes agent and session")
    func unlockResumesLockedSessions() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let before = try await world.cli.run(["token"])
            #expect(before.status == 0, "\(before)")
            // What an idle timeout does, without waiting for one: the session is locked in the file.
            let vault = try Vault.open(at: world.cli.vault, credential: .keyFile(world.keyFile))
            let id = try #require(try vault.accounts.activeID())
            _ = try vault.sessions.transition(for: id) { session, _ in
                session.state = .locked
                session.endReason = "idle_timeout"
            }
            vault.close()
            let locked = try await world.cli.run(["token"])
            #expect(locked.status == 79, "\(locked)")
            #expect(locked.stderr.contains("`vault sessions unlock`") || locked.stderr.contains("`vault unlock`"), "\(locked.stderr)")
            #expect(try await world.cli.run(["lock"]).status == 0)
            let stillLocked = try await world.cli.run(["token"])
            #expect(stillLocked.stderr.contains("`vault unlock` (it also resumes the sessions a timeout locked)"), "\(stillLocked.stderr)")
            let unlocked = try await world.cli.run(["unlock", "--key-file", world.keyFile.path])
            #expect(unlocked.status == 0, "\(unlocked)")
            let after = try await world.cli.run(["token"])
            #expect(after.status == 0, "one unlock brought back the agent and the session: \(after)")
        }
    }

    @Test("started once, the agent serves tokens with no credential anywhere; lock and unlock; a second start is refused")
    func tokensWithoutPassphrase() async throws {
        try await Self.withWorld { world in
            let started = try await world.start()
            #expect(started.status == 0, "\(started)")
            #expect(started.stdout.contains("socket"))
            let token = try await world.cli.run(["token"])  // no VAULT_PASSPHRASE, no file, no terminal
            #expect(token.status == 0, "\(token)")
            let direct = try await world.cli.run(["token", "--no-agent", "--key-file", world.keyFile.path])
            #expect(direct.stdout == token.stdout)
            let json = try await world.cli.run(["token", "--json"]).jsonObject()
            #expect(json["token"] as? String == token.stdout.trimmingCharacters(in: .newlines))
            #expect(json["expires_at"] is String)

            #expect(try await world.start().status == 73)

            #expect(try await world.cli.run(["lock"]).status == 0)
            let locked = try await world.cli.run(["token"])
            #expect(locked.status == 79, "\(locked)")
            #expect(locked.stderr.contains("vault unlock"))
            #expect(locked.stdout.isEmpty)
            #expect(try await world.cli.run(["unlock", "--key-file", world.keyFile.path]).status == 0)
            #expect(try await world.cli.run(["token"]).stdout == token.stdout)
        }
    }

    @Test("--lock-after: the agent drops its keys after that long without use")
    func lockAfter() async throws {
        try await Self.withWorld { world in
            // In the foreground, as systemd runs it: it says on standard error when it locks.
            let agent = try ChildProgram(
                try BuiltProgram.url(named: "vault"),
                ["agent", "run", "--key-file", world.keyFile.path, "--lock-after", "1s"],
                environment: world.environment)
            #expect(await agent.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.standardError.contains("serving") })
            // The agent's own timer runs on real time (from the unlock, its last use): the test
            // waits for its report, bounded. (Serving a token meanwhile is not asserted: on a
            // loaded machine a second can pass before the request arrives.)
            #expect(
                await agent.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.standardError.contains("locked: no use") },
                "\(agent.output.value.standardError)")
            let locked = try await world.status()
            #expect(locked["locked"] as? Bool == true && locked["account_state"] is NSNull, "a locked agent tells no state: \(locked)")
            #expect(try await world.cli.run(["token"]).status == 79)
            await agent.kill()
        }
    }

    @Test("a killed agent leaves a stale socket: commands fall back to the vault, and a new agent replaces it")
    func staleSocket() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let status = try await world.status()
            #expect(status["account_state"] as? String == "active_signed_in" && status["active_account"] is String, "\(status)")
            let sensitive = try await world.cli.run(["token", "--sensitive"])
            #expect(sensitive.status == 0, "the agent recorded the sensitive action and served the token: \(sensitive)")
            let pid = try #require(status["pid"] as? Int)
            kill(pid_t(pid), SIGKILL)
            let fallback = try await world.cli.run(["token", "--key-file", world.keyFile.path])
            #expect(fallback.status == 0, "\(fallback)")
            #expect(try await world.start().status == 0)
            #expect(try await world.cli.run(["token"]).status == 0)
        }
    }

    @Test("malformed, oversized and cut-off requests get an error or a closed connection; the agent keeps serving")
    func badRequests() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let socket = try #require(try await world.status()["socket"] as? String)
            let malformed = try RawSocket.exchange(socket, Data("this is not json\n".utf8))
            #expect(malformed.contains("malformed_request"), "\(malformed)")
            let version = try RawSocket.exchange(socket, Data(#"{"v": 99, "op": "token"}"#.utf8 + [0x0A]))
            #expect(version.contains("unsupported_version"))
            let huge = try RawSocket.exchange(socket, Data(repeating: 0x61, count: 70 * 1024))
            #expect(huge.contains("request_too_large"))
            let cut = try RawSocket.exchange(socket, Data(#"{"v": 1, "op": "tok"#.utf8), closeAfterWrite: true)
            #expect(cut.isEmpty)
            #expect(try await world.cli.run(["token"]).status == 0)
        }
    }

    @Test("agent start with $VAULT_PASSPHRASE: the detached agent unlocks with it, though hardening took it out of the starter's environment")
    func startWithPassphraseFromTheEnvironment() async throws {
        var cli = try VaultCLI(environment: ["VAULT_PASSPHRASE": "agent passphrase"])
        let runtime = cli.file("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        cli.environment["XDG_RUNTIME_DIR"] = runtime.path
        try #require(try await cli.run(["init"]).status == 0)
        let started = try await cli.run(["agent", "start"])
        #expect(started.status == 0, "\(started)")
        let status = try await cli.run(["agent", "status", "--json"])
        #expect(try status.jsonObject()["locked"] as? Bool == false, "\(status)")
        _ = try? await cli.run(["agent", "stop"])
    }

    /// Acting as another uid needs root, setpriv and python3 (`make test` installs the tools; CI runs as root).
    static let canActAsAnotherUser =
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    @Test(
        "a client of another uid is refused (SO_PEERCRED) even when the socket is reachable",
        .enabled(if: canActAsAnotherUser, "needs root, setpriv and python3 to act as another uid"))
    func otherUser() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let socket = try #require(try await world.status()["socket"] as? String)
            // Open the way on purpose, as a misconfiguration would: the uid check still holds, and
            // the refusal comes before the agent reads a byte (so the client only listens).
            let directory = URL(fileURLWithPath: socket).deletingLastPathComponent()
            let opened = [world.cli.directory.url, directory.deletingLastPathComponent(), directory]
            for step in opened { chmod(step.path, 0o711) }
            chmod(socket, 0o666)
            defer { for step in opened { chmod(step.path, 0o700) } }
            let python = #"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(30); print(s.recv(65536).decode())"#
            let output = try await BuiltProgram.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", python, socket],
                environment: ["PATH": "/usr/bin:/bin"], stdin: "", in: world.cli.directory)
            #expect(output.stdout.contains("peer_refused"), "\(output.status) \(output.stdout) \(output.stderr)")
            #expect(!output.stdout.contains("\"token\""))
        }
    }

    @Test("the vault replaced under a running agent: it refuses and locks itself, never serving the old key")
    func vaultReplaced() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let copy = world.cli.file("copy.db")
            #expect(try await world.cli.run(["backup", copy.path]).status == 0)
            try FileManager.default.removeItem(at: world.cli.vault)
            try FileManager.default.moveItem(at: copy, to: world.cli.vault)
            let refused = try await world.cli.run(["token"])
            #expect(refused.status == 66, "\(refused)")
            #expect(refused.stderr.contains("replaced"))
            #expect(try await world.status()["locked"] as? Bool == true)
        }
    }

    @Test("an older copy written over the vault in place under a running agent that saw a later write: it refuses")
    func olderCopyInPlace() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let older = world.cli.file("older.db")
            #expect(try await world.cli.run(["backup", older.path]).status == 0)
            // A write after the copy, then a token through the agent, which reads the vault as it is now.
            let policy = try await world.cli.run(["accounts", "set-policy", "alice", "--idle-timeout", "30m", "--key-file", world.keyFile.path])
            #expect(policy.status == 0, "\(policy)")
            #expect(try await world.cli.run(["token"]).status == 0)
            // The older copy written over the file in place (same inode, SQLite's backup API), as a
            // restore or a sync tool would: nothing inside the file can tell, the agent can.
            let source = try DatabaseQueue(path: older.path)
            let target = try DatabaseQueue(path: world.cli.vault.path)
            try source.backup(to: target)
            try source.close()
            try target.close()
            let refused = try await world.cli.run(["token"])
            #expect(refused.status == Exit.damaged, "\(refused)")
            #expect(refused.stdout.isEmpty)
            #expect(refused.stderr.contains("went back from write"), "\(refused.stderr)")
        }
    }

    @Test("rotate-key while the agent serves: it drops the stale keys, says `locked (key changed)`, and `vault unlock` works again")
    func keyRotatedUnderTheAgent() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            #expect(try await world.cli.run(["token"]).status == 0)
            let rotated = try await world.cli.run(["rotate-key", "--key-file", world.keyFile.path])
            #expect(rotated.status == 0, "\(rotated)")
            // The next request finds out; no wedged agent that says it is unlocked.
            let refused = try await world.cli.run(["token"])
            #expect(refused.status == 79, "\(refused)")
            #expect(refused.stderr.contains("locked (key changed)"), "\(refused.stderr)")
            let status = try await world.status()
            #expect(status["locked"] as? Bool == true)
            #expect(status["lock_reason"] as? String == "key_changed")
            #expect(try await world.cli.run(["agent", "status"]).stdout.contains("locked (key changed"))
            let unlocked = try await world.cli.run(["unlock", "--key-file", world.keyFile.path])
            #expect(unlocked.status == 0, "\(unlocked)")
            #expect(try await world.status()["locked"] as? Bool == false)
            #expect(try await world.cli.run(["token"]).status == 0)

            // Rotated again with no request in between: `status` alone tells the truth.
            #expect(try await world.cli.run(["rotate-key", "--key-file", world.keyFile.path]).status == 0)
            #expect(try await world.status()["lock_reason"] as? String == "key_changed")
            let stopped = try await world.cli.run(["agent", "stop"])
            #expect(stopped.status == 0, "\(stopped)")
            #expect(try await world.cli.run(["agent", "status"]).status == 67, "stop returned once the agent was gone")
        }
    }

    @Test("exec --env: the loader's and shells' variables are refused, a set one needs --replace; the command gets descriptors 0-2 only")
    func execEnvironmentAndDescriptors() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let token = try await world.cli.run(["token"]).stdout.trimmingCharacters(in: .newlines)
            try #require(!token.isEmpty)
            for name in ["PATH", "LD_PRELOAD", "HOME", "IFS", "BASH_ENV", "GCONV_PATH"] {
                let refused = try await world.cli.run(["exec", "--env", name, "--", "/usr/bin/env"])
                #expect(refused.status == 64, "\(name): \(refused)")
                #expect(!refused.stdout.contains(token) && !refused.stderr.contains(token), "\(name): the command ran, or the token was shown")
            }
            var cli = world.cli
            cli.environment["MY_TOKEN"] = "already here"
            let taken = try await cli.run(["exec", "--env", "MY_TOKEN", "--", "/bin/sh", "-c", #"printf %s "$MY_TOKEN""#])
            #expect(taken.status == 64, "\(taken)")
            let replaced = try await cli.run(["exec", "--env", "MY_TOKEN", "--replace", "--", "/bin/sh", "-c", #"printf %s "$MY_TOKEN""#])
            #expect(replaced.status == 0, "\(replaced)")
            #expect(replaced.stdout == (try await world.cli.run(["token"]).stdout.trimmingCharacters(in: .newlines)))
            // The shell looks at its own descriptors (stat, no directory opened): the agent's
            // connection and the vault's files stay behind.
            let listed = try await world.cli.run([
                "exec", "--", "/bin/sh", "-c", #"i=0; while [ $i -lt 64 ]; do [ -e /proc/$$/fd/$i ] && printf '%s ' $i; i=$((i+1)); done"#,
            ])
            #expect(listed.status == 0, "\(listed)")
            #expect(listed.stdout == "0 1 2 ", "\(listed.stdout)")
        }
    }

    @Test(
        "an idle agent checking grants every 2 s learns of an administrator's revocation with no request: `events --follow` shows it, `vault token` exits 80 without asking the server"
    )
    func idleAgentNoticesRevocation() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start(["--check-grants", "2s"]).status == 0)
            let follow = try ChildProgram(
                try BuiltProgram.url(named: "vault"), ["events", "--follow", "-n", "0", "--key-file", world.keyFile.path], environment: world.environment)
            defer { kill(follow.processIdentifier, SIGKILL) }
            #expect(await world.gateway.revokeGrants(subject: "alice") == 1)
            #expect(await follow.waitForLine(timeout: TestTimeScale.scaled(.seconds(20))) { $0.contains("revoked") }, "\(follow.output.value)")
            let asked = await world.gateway.tokenRequestCount()
            let refused = try await world.cli.run(["token"])
            #expect(refused.status == 80 && refused.stderr.contains("revoked"), "\(refused)")
            #expect(await world.gateway.tokenRequestCount() == asked, "`vault token` asked the server nothing")
        }
    }

    @Test("a forced logout the identity service explains (a password change) is named by `vault token` and `vault events`")
    func forcedLogoutNamed() async throws {
        try await Self.withWorld(accessTokenLifetime: .seconds(1)) { world in
            #expect(await world.gateway.revokeGrants(subject: "alice", as: .passwordChanged) == 1)
            let refused = try await world.cli.run(["token", "--no-agent", "--key-file", world.keyFile.path])
            #expect(refused.status == 80, "\(refused)")
            #expect(refused.stderr.contains("the password was changed or expired") && refused.stderr.contains("AADSTS50133"), "\(refused.stderr)")
            let events = try await world.cli.run(["events", "--key-file", world.keyFile.path])
            #expect(events.stdout.contains("revoked") && events.stdout.contains("reason=password_changed"), "\(events)")
        }
    }

    @Test("exec: the command gets the token in --env, its status is ours, and a signal reaches it")
    func exec() async throws {
        try await Self.withWorld { world in
            #expect(try await world.start().status == 0)
            let token = try await world.cli.run(["token"]).stdout.trimmingCharacters(in: .newlines)
            let ran = try await world.cli.run(["exec", "--env", "TOK", "--", "/bin/sh", "-c", #"printf %s "$TOK"; exit 7"#])
            #expect(ran.status == 7)
            #expect(ran.stdout == token)

            let child = try ChildProgram(
                try BuiltProgram.url(named: "vault"),
                ["exec", "--", "/bin/sh", "-c", #"trap 'exit 42' TERM; echo ready; while :; do sleep 1; done"#],
                environment: world.environment)
            #expect(await child.waitForLine(timeout: TestTimeScale.scaled(.seconds(60))) { $0 == "ready" })
            kill(child.processIdentifier, SIGTERM)
            #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.exitStatus != nil })
            #expect(child.output.value.exitStatus == 42)
        }
    }
}

/// Talks to the agent's socket byte by byte, as a broken or hostile client would.
enum RawSocket {
    static func exchange(_ path: String, _ bytes: Data, closeAfterWrite: Bool = false) throws -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        _ = [UInt8](bytes).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if closeAfterWrite { shutdown(fd, Int32(SHUT_WR)) }
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            received += buffer.prefix(count)
        }
        return String(decoding: received, as: UTF8.self)
    }
}
