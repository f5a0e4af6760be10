import AgentWire
import Foundation
import Testing
import VaultAgent
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `vault-lean`, the front installed as `vault`: it must say and do exactly what the full
/// command does, only faster when an agent serves the token.
@Suite("the lean client: same answers as the full command")
struct LeanClientTests {
    typealias World = AgentCommandTests.World

    /// Runs `arguments` through the full command and through the lean one, in the same
    /// environment, and expects the same standard output, standard error and exit status.
    @discardableResult
    static func same(_ world: World, _ arguments: [String], _ comment: Comment) async throws -> BuiltProgram.Output {
        let full = try await BuiltProgram.run(try BuiltProgram.url(named: "vault"), arguments, environment: world.environment, in: world.cli.directory)
        let lean = try await BuiltProgram.run(
            try BuiltProgram.url(named: "vault-lean"), arguments, environment: world.environment, in: world.cli.directory)
        #expect(lean.status == full.status, comment)
        #expect(lean.stdout == full.stdout, comment)
        #expect(lean.stderr == full.stderr, comment)
        return full
    }

    @Test("token, locked agent, unknown account, untrusted socket, no agent: the same stdout, stderr and exit status")
    func differential() async throws {
        try await AgentCommandTests.withWorld { world in
            #expect(try await world.start().status == 0)
            let token = try await Self.same(world, ["token"], "token from the agent")
            #expect(token.status == 0 && token.stdout.count > 10, "\(token.stderr)")
            #expect(try await Self.same(world, ["--vault", world.cli.vault.path, "token", "--account", "alice", "--min-ttl", "5m"], "options").status == 0)
            #expect(try await Self.same(world, ["token", "--account", "nobody"], "unknown account").status == 67)
            #expect(try await Self.same(world, ["token", "--min-ttl", "soon"], "a value the lean client does not parse").status == 64)
            #expect(try await Self.same(world, ["token", "--json"], "an option it hands over").status == 0)

            #expect(try await world.cli.run(["lock"]).status == 0)
            let locked = try await Self.same(world, ["token"], "locked agent")
            #expect(locked.status == 79, "\(locked)")

            // Something other than the agent's socket in its place: refused, nothing sent.
            let socket = try #require(try await world.status()["socket"] as? String)
            #expect(try await world.cli.run(["agent", "stop"]).status == 0)
            try Data().write(to: URL(fileURLWithPath: socket))
            let impostor = try await Self.same(world, ["token"], "impostor socket")
            #expect(impostor.status == 82 && impostor.stderr.contains("is not a socket"), "\(impostor)")
            try FileManager.default.removeItem(atPath: socket)

            let none = try await Self.same(world, ["token"], "no agent: the vault opened directly")
            #expect(none.status != 0 && none.stderr.contains("--key-file"), "\(none)")
        }
    }

    @Test("git's get through the helper name: token, no match, another user, locked agent (handed over with its input), too large")
    func gitGet() async throws {
        try await AgentCommandTests.withWorld { world in
            let bound = try await world.cli.run(
                ["accounts", "set-host", "alice", "git.example.test/team", "--username", "alice", "--key-file", world.keyFile.path])
            try #require(bound.status == 0, "\(bound)")
            #expect(try await world.start().status == 0)
            // The helper names as `make install` links them: one to each program.
            let full = world.cli.file("full/git-credential-vault")
            let lean = world.cli.file("lean/git-credential-vault")
            for (link, program) in [(full, "vault"), (lean, "vault-lean")] {
                try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
                try FileManager.default.createSymbolicLink(at: link, withDestinationURL: try BuiltProgram.url(named: program))
            }
            func same(_ input: String, _ comment: Comment) async throws -> BuiltProgram.Output {
                let fromFull = try await BuiltProgram.run(full, ["get"], environment: world.environment, stdin: input, in: world.cli.directory)
                let fromLean = try await BuiltProgram.run(lean, ["get"], environment: world.environment, stdin: input, in: world.cli.directory)
                #expect(fromLean.status == fromFull.status, comment)
                #expect(fromLean.stdout == fromFull.stdout, comment)
                #expect(fromLean.stderr == fromFull.stderr, comment)
                return fromFull
            }
            let matched = "protocol=https\nhost=git.example.test\npath=team/app.git\n\n"
            let answer = try await same(matched, "a bound host")
            #expect(answer.status == 0 && answer.stdout.hasPrefix("username=alice\npassword=") && answer.stdout.contains("password_expiry_utc="))
            #expect(try await same("protocol=https\r\nhost=git.example.test\r\npath=team/x.git\r\n\r\n", "CRLF lines").stdout == answer.stdout)
            #expect(try await same("protocol=https\nhost=git.example.test\npath=elsewhere/app.git\n", "a path not bound").stdout.isEmpty)
            #expect(try await same("protocol=https\nhost=other.example.test\n", "another host").stdout.isEmpty)
            #expect(try await same("protocol=https\nhost=git.example.test\npath=team/app.git\nusername=bob\n", "another user").stdout.isEmpty)
            #expect(try await same("host=git.example.test\n", "no protocol").stdout.isEmpty)
            let large = "protocol=https\nhost=git.example.test\nnote=" + String(repeating: "x", count: 70 * 1024) + "\n"
            #expect(try await same(large, "larger than 64 KiB").status == 64)

            #expect(try await world.cli.run(["lock"]).status == 0)
            let locked = try await same(matched, "locked agent: the full command answers, having read the same request")
            #expect(locked.status == 79, "\(locked)")
            #expect(try await same("protocol=https\nhost=other.example.test\n\n", "locked agent, a host the file binds nothing to").status == 0)
        }
    }

    @Test("an agent of protocol 1 (an older build still running): both commands say so and name the fix")
    func olderAgent() async throws {
        try await AgentCommandTests.withWorld { world in
            #expect(try await world.start().status == 0)
            let socket = try #require(try await world.status()["socket"] as? String)
            #expect(try await world.cli.run(["agent", "stop"]).status == 0)
            // What a protocol-1 agent answers to a line that is not its JSON.
            let python = #"""
                import os, socket, sys
                log = open(sys.argv[2], "ab", buffering=0)
                server = socket.socket(socket.AF_UNIX); server.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o600); server.listen(8)
                print("listening", flush=True)
                while True:
                    connection, _ = server.accept()
                    data = connection.recv(65536)
                    log.write(b"request\n")
                    connection.sendall(b'{"v":1,"ok":false,"error":{"code":"malformed_request","exit":64,"message":"the request is not one JSON object of the agent protocol"}}\n')
                    connection.close()
                """#
            let log = world.cli.file("requests.log")
            let old = try ChildProgram(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", python, socket, log.path], environment: world.environment)
            #expect(await old.waitForLine { $0 == "listening" })
            let answer = try await Self.same(world, ["token"], "older agent")
            #expect(answer.status == 1 && answer.stderr.contains("`vault agent stop`, then `vault agent start`"), "\(answer)")
            // The full command asked once; the lean one asked once and handed over (once more).
            #expect(try String(contentsOf: log, encoding: .utf8).split(separator: "\n").count == 3)
            await old.kill()
        }
    }

    @Test("protocol 2: several requests on one connection, hello lists what the agent serves, an unknown version is answered and closed")
    func protocolTwo() async throws {
        try await AgentCommandTests.withWorld { world in
            #expect(try await world.start().status == 0)
            let socket = try #require(try await world.status()["socket"] as? String)
            let fd = try Self.connect(socket)
            defer { close(fd) }
            WireProtocol.setTimeouts(fd, seconds: 30)
            var hello = WireMessage()
            hello.append("op", "hello")
            guard case .frame(let served) = try WireProtocol.exchange(fd, hello, preface: true) else {
                Issue.record("no frame for hello")
                return
            }
            #expect(served.values("versions") == ["1", "2"])
            #expect(Set(served.values("op")).isSuperset(of: ["token", "credential", "status", "hello"]))
            var token = WireMessage()
            token.append("op", "token")
            for round in 1...3 {
                guard case .frame(let answer) = try WireProtocol.exchange(fd, token, preface: false) else {
                    Issue.record("round \(round): no frame")
                    return
                }
                #expect(answer["ok"] == "1" && answer["account"] != nil && (answer["token"]?.count ?? 0) > 10, "round \(round)")
            }
            var unknown = WireMessage()
            unknown.append("op", "fly")
            guard case .frame(let refused) = try WireProtocol.exchange(fd, unknown, preface: false) else {
                Issue.record("no frame for an unknown op")
                return
            }
            #expect(refused["ok"] == "0" && refused["error"] == "unknown_op")

            let future = try Self.connect(socket)
            defer { close(future) }
            WireProtocol.setTimeouts(future, seconds: 30)
            #expect(WireProtocol.writeAll(future, Array("CVAGENT/9\n".utf8) + token.frame()))
            guard case .frame(let version) = try WireProtocol.readAnswer(future) else {
                Issue.record("no frame for an unknown version")
                return
            }
            #expect(version["error"] == "unsupported_version" && version.values("versions") == ["1", "2"])
            guard case .closed = try WireProtocol.readAnswer(future) else {
                Issue.record("the connection stayed open")
                return
            }
        }
    }

    @Test("a linked AgentClient keeps its connection; when the agent restarts it reconnects once, and a failure is not resent")
    func keptConnection() async throws {
        try await AgentCommandTests.withWorld { world in
            #expect(try await world.start().status == 0)
            let socket = try #require(try await world.status()["socket"] as? String)
            let client = AgentClient(socket: URL(fileURLWithPath: socket), timeoutSeconds: 30)
            let first = try await client.token()
            #expect(try await client.token() == first)
            let pid = try #require(try await world.status()["pid"] as? Int)
            // A new agent: the kept connection is closed under the client.
            #expect(try await world.cli.run(["agent", "stop"]).status == 0)
            #expect(try await world.start().status == 0)
            #expect(try await world.status()["pid"] as? Int != pid)
            #expect(try await client.token() == first)
            // A failure comes back as the agent's answer, on the kept connection.
            #expect(try await world.cli.run(["lock"]).status == 0)
            await #expect(throws: AgentFailure.self) { _ = try await client.token() }
            let status = try await client.send(AgentRequest(.status))
            #expect(status.status?.locked == true)
        }
    }

    @Test("a protocol-2 message printed or dumped shows its keys, never a token or passphrase")
    func messageNeverShowsValues() {
        var message = WireMessage()
        message.append("op", "unlock")
        message.append("passphrase", "correct horse battery staple")
        message.append("token", "eyJ.secret-token.value")
        var dumped = ""
        dump(message, to: &dumped)
        for shown in ["\(message)", String(reflecting: message), dumped] {
            #expect(shown.contains("passphrase") && shown.contains("token"))
            #expect(!shown.contains("horse") && !shown.contains("secret-token") && !shown.contains("unlock"), "\(shown)")
        }
    }

    static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard var address = AgentTrust.address(path) else { throw POSIXError(.ENAMETOOLONG) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return fd
    }
}
