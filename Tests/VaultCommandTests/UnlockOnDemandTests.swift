import AgentWire
import DevGateway
import Foundation
import Testing
import VaultAgent
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Unlock on demand: a locked agent asks for the passphrase through pinentry on the requester's
/// terminal. A scripted pinentry speaking Assuan plays the person (and the faults), and the real
/// `pinentry-tty` runs once under a pseudo-terminal with git driving the credential helper.
@Suite("unlock on demand through pinentry")
struct UnlockOnDemandTests {
    /// With a `%`, which Assuan sends escaped (`%25`): the agent must decode it to unlock.
    static let passphrase = "correct horse 100% battery"

    /// A passphrase vault with one account, an agent started with the scripted pinentry and
    /// then locked, and a pseudo-terminal standing for the requester's terminal.
    struct World {
        let gateway: DevGateway
        let cli: VaultCLI
        let pinentry: ScriptedPinentry
        let terminal: PseudoTerminal
        let passphraseFile: URL

        init(agentOptions: [String] = [], pinentry program: String? = nil) async throws {
            gateway = try await DevGateway.start()
            var cli = try VaultCLI()
            let runtime = cli.file("run")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            cli.environment["XDG_RUNTIME_DIR"] = runtime.path
            self.cli = cli
            passphraseFile = cli.file("passphrase")
            try Data(UnlockOnDemandTests.passphrase.utf8).write(to: passphraseFile)
            let credential = ["--passphrase-file", passphraseFile.path]
            try #require(try await cli.run(["init"] + credential).status == 0)
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
            let added = try await cli.run(
                [
                    "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                    "--subject", "alice", "--host", "git.example.test",
                ] + credential, stdin: AccountsAndTokenTests.tokenResponse(issued))
            try #require(added.status == 0, "\(added)")
            pinentry = try ScriptedPinentry(in: cli.directory)
            terminal = try PseudoTerminal()
            let started = try await cli.run(
                ["agent", "start", "--pinentry", program ?? pinentry.script.path] + credential + agentOptions)
            try #require(started.status == 0, "\(started)")
            try #require(try await cli.run(["lock"]).status == 0)
        }

        /// `vault ARGUMENTS` as a process whose terminal is ``terminal`` (`$VAULT_TTY`: the tests
        /// run without a controlling terminal) and that may be prompted.
        func run(_ arguments: [String], tty: String? = nil, program: String = "vault") async throws -> CommandResult {
            let environment = [
                "PATH": "/usr/bin:/bin", "HOME": cli.directory.url.path, "VAULT_PATH": cli.vault.path,
                "XDG_RUNTIME_DIR": cli.environment["XDG_RUNTIME_DIR"] ?? "", "VAULT_TTY": tty ?? terminal.path, "TERM": "xterm",
            ]
            let output = try await BuiltProgram.run(
                try BuiltProgram.url(named: program), arguments, environment: environment, stdin: "", in: cli.directory)
            return CommandResult(arguments: arguments, status: output.status, stdout: output.stdout, stderr: output.stderr)
        }

        var hello: AgentHello {
            get async throws {
                let socket = try #require(try await cli.run(["agent", "status", "--json"]).jsonObject()["socket"] as? String)
                return try await AgentClient(socket: URL(fileURLWithPath: socket)).hello()
            }
        }

        var locked: Bool {
            get async throws { try await cli.run(["agent", "status", "--json"]).jsonObject()["locked"] as? Bool ?? false }
        }

        /// The token the unlocked agent serves (unlocking it with the passphrase file first).
        func tokenUnlocked() async throws -> String {
            _ = try await cli.run(["unlock", "--passphrase-file", passphraseFile.path])
            return try await cli.run(["token"]).stdout.trimmingCharacters(in: .newlines)
        }

        func finish() async {
            _ = try? await cli.run(["agent", "stop"])
            await gateway.stop()
        }
    }

    static func withWorld(agentOptions: [String] = [], pinentry: String? = nil, _ body: (World) async throws -> Void) async throws {
        let world = try await World(agentOptions: agentOptions, pinentry: pinentry)
        do {
            try await body(world)
        } catch {
            await world.finish()
            throw error
        }
        await world.finish()
    }

    @Test("a locked agent asked for a token prompts once on the requester's terminal, naming the vault and the program; the token comes back")
    func promptsAndServes() async throws {
        try await Self.withWorld { world in
            world.pinentry.answer(["pin:\(Self.passphrase)"])
            let token = try await world.run(["token"])
            #expect(token.status == 0, "\(token)")
            #expect(try await !world.locked)
            let log = world.pinentry.log
            #expect(world.pinentry.starts == 1)
            // On the requester's terminal, told both ways pinentries take it.
            #expect(log.contains { $0.hasPrefix("started") && $0.contains("--ttyname \(world.terminal.path)") }, "\(log)")
            #expect(log.contains("OPTION ttyname=\(world.terminal.path)"))
            let description = try #require(log.first { $0.hasPrefix("SETDESC ") })
            #expect(description.contains(world.cli.vault.path))
            #expect(description.contains("vault (pid "), "the requesting program is named: \(description)")
            #expect(log.contains("GETPIN"))
            // The same token as the agent serves afterwards; the passphrase in no line pinentry got.
            #expect(try await world.cli.run(["token"]).stdout == token.stdout)
            #expect(!log.contains { $0.contains(Self.passphrase) })

            // The lean front passes the same terminal.
            #expect(try await world.cli.run(["lock"]).status == 0)
            world.pinentry.answer(["pin:\(Self.passphrase)"])
            let lean = try await world.run(["token"], program: "vault-lean")
            #expect(lean.status == 0, "\(lean)")
            #expect(lean.stdout == token.stdout)
            #expect(world.pinentry.starts == 2)
        }
    }

    @Test("Cancel is answered as locked at once; a requester with no terminal (cron) or --no-prompt is refused with no prompt")
    func cancelAndNoTerminal() async throws {
        try await Self.withWorld { world in
            world.pinentry.answer(["cancel"])
            let started = ContinuousClock.now
            let cancelled = try await world.run(["token"])
            #expect(cancelled.status == Exit.sessionLocked, "\(cancelled)")
            #expect(cancelled.stderr.contains("the passphrase prompt was cancelled"), "\(cancelled.stderr)")
            #expect(ContinuousClock.now - started < TestTimeScale.scaled(.seconds(5)))
            #expect(try await world.locked)
            #expect(world.pinentry.starts == 1)

            // No terminal and no display: the request says nowhere to ask (VaultCLI sets no tty).
            let cron = try await world.cli.run(["token"], environment: ["VAULT_NO_PROMPT": ""])
            #expect(cron.status == Exit.sessionLocked, "\(cron)")
            #expect(cron.stderr.contains("`vault unlock`"))
            let noPrompt = try await world.run(["token", "--no-prompt"])
            #expect(noPrompt.status == Exit.sessionLocked, "\(noPrompt)")
            let leanNoPrompt = try await world.run(["token", "--no-prompt"], program: "vault-lean")
            #expect(leanNoPrompt.status == Exit.sessionLocked, "\(leanNoPrompt)")
            #expect(world.pinentry.starts == 1, "nothing was shown for requests that cannot be asked")
        }
    }

    @Test("a wrong passphrase is asked again with its error after a delay; three wrong ones refuse (77) and the agent stays locked")
    func wrongPassphrases() async throws {
        try await Self.withWorld { world in
            world.pinentry.answer(["pin:wrong one", "pin:\(Self.passphrase)"])
            let retried = try await world.run(["token"])
            #expect(retried.status == 0, "\(retried)")
            let log = world.pinentry.log
            #expect(log.filter { $0 == "GETPIN" }.count == 2)
            #expect(log.contains { $0.hasPrefix("SETERROR ") && $0.contains("Wrong passphrase (1 of 3)") }, "\(log)")
            let stamps = world.pinentry.getpinTimes
            #expect(stamps.count == 2 && stamps[1] - stamps[0] >= 1, "the second attempt waited at least a second: \(stamps)")

            #expect(try await world.cli.run(["lock"]).status == 0)
            world.pinentry.answer(["pin:a", "pin:b", "pin:c", "pin:\(Self.passphrase)"])
            let refused = try await world.run(["token"])
            #expect(refused.status == Exit.wrongCredential, "\(refused)")
            #expect(refused.stderr.contains("3 wrong passphrases"), "\(refused.stderr)")
            #expect(try await world.locked)
        }
    }

    @Test("two processes asking a locked agent at once: one prompt, both answered; the waiting one is told the agent is still at it")
    func oneQuestionForMany() async throws {
        try await Self.withWorld { world in
            world.pinentry.answer(["hold:\(Self.passphrase)"])
            async let first = world.run(["token"])
            #expect(await world.pinentry.waitForGetpin(), "the first request's prompt is up")
            // The second request, on the wire, with a terminal: it waits for the same prompt.
            let status = try await world.cli.run(["agent", "status", "--json"]).jsonObject()
            let socket = try #require(status["socket"] as? String)
            let fd = try #require(Self.connect(socket))
            defer { close(fd) }
            var request = WireMessage()
            request.append("op", "token")
            RequesterTerminal(tty: world.terminal.path, termType: "xterm").append(to: &request)
            #expect(WireProtocol.writeAll(fd, WireProtocol.preface + request.frame()))
            let interim = try #require(Self.readFrame(fd))
            #expect(interim["ok"] == WireProtocol.interimOK, "an interim answer while the prompt is up")
            world.pinentry.release()
            let answer = try #require(try WireProtocol.readAnswer(fd).frameValue)
            #expect(answer["ok"] == "1")
            let token = try await first
            #expect(token.status == 0, "\(token)")
            #expect(answer["token"] == token.stdout.trimmingCharacters(in: .newlines))
            #expect(world.pinentry.starts == 1, "one prompt however many asked")
        }
    }

    @Test("unlocked another way while a prompt is up: the prompt is ended and the waiting request served")
    func unlockedElsewhereDuringPrompt() async throws {
        try await Self.withWorld { world in
            world.pinentry.answer(["hold:wrong"])
            async let waiting = world.run(["token"])
            #expect(await world.pinentry.waitForGetpin(), "the prompt is up")
            let unlocked = try await world.cli.run(["unlock", "--passphrase-file", world.passphraseFile.path])
            #expect(unlocked.status == 0, "\(unlocked)")
            let token = try await waiting
            #expect(token.status == 0, "\(token)")
            #expect(try await !world.locked)
        }
    }

    @Test("pinentry crashing, answering garbage or never answering: each answered as locked, and the next prompt works")
    func pinentryFaults() async throws {
        try await Self.withWorld(agentOptions: ["--pinentry-timeout", "1s"]) { world in
            world.pinentry.answer(["crash"])
            let crashed = try await world.run(["token"])
            #expect(crashed.status == Exit.sessionLocked, "\(crashed)")
            #expect(crashed.stderr.contains("ended without an answer"), "\(crashed.stderr)")

            world.pinentry.answer(["garbage"])
            let garbage = try await world.run(["token"])
            #expect(garbage.status == Exit.sessionLocked, "\(garbage)")
            #expect(garbage.stderr.contains("not Assuan"), "\(garbage.stderr)")
            #expect(!garbage.stderr.contains("HELLO"), "what the program sent is not repeated")

            world.pinentry.answer(["hang"])
            let hung = try await world.run(["token"])
            #expect(hung.status == Exit.sessionLocked, "\(hung)")
            #expect(hung.stderr.contains("no passphrase was typed within 1 s"), "\(hung.stderr)")

            // Silent from the start (no greeting): bounded the same way.
            _ = FileManager.default.createFile(atPath: world.pinentry.silentFile.path, contents: Data())
            let silent = try await world.run(["token"])
            #expect(silent.status == Exit.sessionLocked, "\(silent)")
            #expect(silent.stderr.contains("no passphrase was typed within 1 s"), "\(silent.stderr)")
            try FileManager.default.removeItem(at: world.pinentry.silentFile)

            world.pinentry.answer(["pin:\(Self.passphrase)"])
            let served = try await world.run(["token"])
            #expect(served.status == 0, "\(served)")
        }
    }

    @Test("no pinentry installed: the message says what to install; a terminal that is gone or not a terminal is never written to")
    func missingPinentryAndBadTerminals() async throws {
        try await Self.withWorld(pinentry: "/nonexistent/pinentry") { world in
            let missing = try await world.run(["token"])
            #expect(missing.status == Exit.sessionLocked, "\(missing)")
            #expect(missing.stderr.contains("apt install pinentry-curses"), "\(missing.stderr)")
            // It does not claim it can prompt (so `vault unlock` asks on its own terminal, as before).
            #expect(try await world.hello.features == ["targets"])
        }
        try await Self.withWorld { world in
            #expect(try await world.hello.features == ["targets", "pinentry"])
            let gone = try await world.run(["token"], tty: "/dev/pts/99999")
            #expect(gone.status == Exit.sessionLocked, "\(gone)")
            #expect(gone.stderr.contains("/dev/pts/99999 is gone or not a terminal"), "\(gone.stderr)")
            let file = world.cli.file("not-a-tty")
            try Data("keep me\n".utf8).write(to: file)
            let notTerminal = try await world.run(["token"], tty: file.path)
            #expect(notTerminal.status == Exit.sessionLocked, "\(notTerminal)")
            #expect(try String(contentsOf: file, encoding: .utf8) == "keep me\n")
            #expect(world.pinentry.starts == 0)
        }
    }

    @Test(
        "a requester of another uid is refused before any prompt",
        .enabled(if: AgentCommandTests.canActAsAnotherUser, "needs root, setpriv and python3 to act as another uid"))
    func otherUserNeverPrompts() async throws {
        try await Self.withWorld { world in
            world.pinentry.answer(["pin:\(Self.passphrase)"])
            let socket = try #require(try await world.cli.run(["agent", "status", "--json"]).jsonObject()["socket"] as? String)
            let directory = URL(fileURLWithPath: socket).deletingLastPathComponent()
            let opened = [world.cli.directory.url, directory.deletingLastPathComponent(), directory]
            for step in opened { chmod(step.path, 0o711) }
            chmod(socket, 0o666)
            var request = WireMessage()
            request.append("op", "token")
            RequesterTerminal(tty: world.terminal.path, termType: "xterm").append(to: &request)
            let bytes = (WireProtocol.preface + request.frame()).map { String($0) }.joined(separator: ",")
            let python =
                "import socket,sys\ns=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(30)\ntry: s.sendall(bytes([\(bytes)]))\nexcept OSError: pass\nprint(s.recv(65536).decode(errors='replace'))"
            let output = try await BuiltProgram.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", python, socket],
                environment: ["PATH": "/usr/bin:/bin"], stdin: "", in: world.cli.directory)
            for step in opened { chmod(step.path, 0o700) }
            #expect(output.stdout.contains("peer_refused"), "\(output.status) \(output.stdout) \(output.stderr)")
            #expect(world.pinentry.starts == 0)
            #expect(try await world.locked)
        }
    }

    @Test("`vault unlock` at a terminal has the agent ask through pinentry: no passphrase typed here, none sent")
    func unlockThroughPinentry() async throws {
        try await Self.withWorld { world in
            world.pinentry.answer(["pin:\(Self.passphrase)"])
            let unlocked = try await world.run(["unlock"])
            #expect(unlocked.status == 0, "\(unlocked)")
            #expect(world.pinentry.log.contains("GETPIN"))
            #expect(try await !world.locked)
            // Already unlocked: nothing asked.
            #expect(try await world.run(["unlock"]).status == 0)
            #expect(world.pinentry.starts == 1)
            // Cancel at `vault unlock`: it says so and fails.
            #expect(try await world.cli.run(["lock"]).status == 0)
            world.pinentry.answer(["cancel"])
            let cancelled = try await world.run(["unlock"])
            #expect(cancelled.status == Exit.sessionLocked, "\(cancelled)")
            #expect(cancelled.stderr.contains("cancelled"))
        }
    }

    @Test(
        "the real pinentry-tty under a pseudo-terminal: `git credential fill` through the helper prompts once and git gets the token",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/pinentry-tty") && FileManager.default.isExecutableFile(atPath: "/usr/bin/git")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/script"),
            "needs pinentry-tty, git and script (`make test` installs them)"))
    func realPinentryTTY() async throws {
        try await Self.withWorld(pinentry: "/usr/bin/pinentry-tty") { world in
            let config = world.cli.file("gitconfig")
            let helper = world.cli.file("git-credential-vault")
            try FileManager.default.createSymbolicLink(at: helper, withDestinationURL: try BuiltProgram.url(named: "vault-lean"))
            try Data("[credential]\n\thelper = \(helper.path)\n".utf8).write(to: config)
            // `script` gives git a pseudo-terminal as its controlling terminal; what this test
            // writes reaches that terminal, as typing would.
            let child = try ChildProgram(
                URL(fileURLWithPath: "/usr/bin/script"), ["-q", "-e", "-c", "git credential fill", "/dev/null"],
                environment: [
                    "PATH": "/usr/bin:/bin", "HOME": world.cli.directory.url.path, "VAULT_PATH": world.cli.vault.path,
                    "XDG_RUNTIME_DIR": world.cli.environment["XDG_RUNTIME_DIR"] ?? "", "GIT_CONFIG_GLOBAL": config.path,
                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb",
                ])
            child.write("protocol=https\nhost=git.example.test\n\n")
            let asked = await child.waitForLine { $0.contains("Type its passphrase") }
            #expect(asked, "pinentry-tty showed the prompt: \(child.output.value.lines)")
            child.write(Self.passphrase + "\n")
            let filled = await child.waitForLine { $0.hasPrefix("password=") }
            #expect(filled, "\(child.output.value.lines) \(child.output.value.standardError)")
            child.closeInput()
            let lines = try await child.finish()
            let token = try await world.cli.run(["token"]).stdout.trimmingCharacters(in: .newlines)
            #expect(lines.contains { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "password=\(token)" })
            #expect(lines.filter { $0.contains("Type its passphrase") }.count == 1, "one prompt")
        }
    }

    @Test("terminal fields with a control character or of excessive length are dropped before they reach pinentry")
    func terminalFieldsAreChecked() {
        var message = WireMessage()
        message.append("op", "token")
        message.append("tty", "/dev/pts/3\nOPTION evil")
        message.append("display", String(repeating: "x", count: RequesterTerminal.maximumFieldLength + 1))
        #expect(RequesterTerminal(message) == nil, "nothing usable is left to prompt on")
        message.append("wayland_display", "wayland-0")
        let terminal = RequesterTerminal(message)
        #expect(terminal?.tty == nil)
        #expect(terminal?.display == nil)
        #expect(terminal?.waylandDisplay == "wayland-0")
    }

    // MARK: - Helpers

    static func connect(_ socket: String) -> Int32? {
        let url = URL(fileURLWithPath: socket)
        return try? AgentTrust.connect(url.lastPathComponent, searching: AgentPlaces(only: url.deletingLastPathComponent().path)).fd
    }

    /// One frame, interim or not, read as it comes (a receive timeout bounds the wait).
    static func readFrame(_ fd: Int32) -> WireMessage? {
        WireProtocol.setTimeouts(fd, seconds: Int(TestTimeScale.factor * 20))
        func read(_ count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            var filled = 0
            while filled < count {
                let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, count - filled) }
                guard got > 0 else { return nil }
                filled += got
            }
            return bytes
        }
        guard let header = read(4) else { return nil }
        let length = Int(WireMessage.readLength(header, at: 0))
        guard let body = read(length) else { return nil }
        return try? WireMessage(body: body)
    }
}

extension WireProtocol.Answer {
    var frameValue: WireMessage? {
        if case .frame(let message) = self { return message }
        return nil
    }
}

/// A pinentry played by a shell script that speaks Assuan: every line it is sent goes to a log
/// (the test reads it; a passphrase is never sent *to* pinentry), and each `GETPIN` is answered
/// from a list: `pin:TEXT`, `hold:TEXT` (answers once ``release()`` is called), `cancel`,
/// `crash` (SIGSEGV), `garbage` (a line that is not Assuan) or `hang` (never answers).
struct ScriptedPinentry {
    let script: URL
    let logFile: URL
    let answersFile: URL
    let releaseFile: URL
    /// While it exists, the program never even greets.
    let silentFile: URL

    init(in directory: TemporaryDirectory) throws {
        silentFile = directory.file("pinentry.silent")
        script = directory.file("pinentry-scripted")
        logFile = directory.file("pinentry.log")
        answersFile = directory.file("pinentry.answers")
        releaseFile = directory.file("pinentry.release")
        let text = """
            #!/bin/bash
            log='\(logFile.path)'; answers='\(answersFile.path)'; release='\(releaseFile.path)'
            echo "started $$ args: $*" >> "$log"
            [ -e '\(silentFile.path)' ] && exec sleep 1000
            echo "OK Pleased to meet you"
            n=$(grep -c '^GETPIN' "$log" 2>/dev/null || true)
            while IFS= read -r line; do
              echo "$line" >> "$log"
              case "$line" in
                GETPIN*)
                  echo "getpin-at $(date +%s.%N)" >> "$log"
                  n=$((n+1)); a=$(sed -n "${n}p" "$answers")
                  case "$a" in
                    pin:*) p="${a#pin:}"; printf 'D %s\\nOK\\n' "${p//%/%25}";;
                    hold:*) while [ ! -e "$release" ]; do sleep 0.05; done; p="${a#hold:}"; printf 'D %s\\nOK\\n' "${p//%/%25}";;
                    cancel) echo "ERR 83886179 Operation cancelled <Pinentry>";;
                    crash) kill -SEGV $$;;
                    garbage) echo "HELLO THERE";;
                    hang) exec sleep 1000;;
                    *) echo "ERR 83886179 no answer scripted <Pinentry>";;
                  esac;;
                BYE*) echo OK; exit 0;;
                *) echo OK;;
              esac
            done

            """
        try Data(text.utf8).write(to: script)
        chmod(script.path, 0o755)
    }

    /// The answers to the next `GETPIN`s (counted over the whole log, across prompts).
    func answer(_ answers: [String]) {
        let done = log.filter { $0 == "GETPIN" }.count
        let padding = Array(repeating: "unused", count: done)
        try? Data((padding + answers).joined(separator: "\n").appending("\n").utf8).write(to: answersFile)
    }

    func release() {
        _ = FileManager.default.createFile(atPath: releaseFile.path, contents: Data())
    }

    /// The script's log as written so far. Read as bytes and decoded leniently: the script may be
    /// mid-line, and `String(contentsOf:encoding:)` leaks its read buffer when the decoding
    /// fails (LeakSanitizer caught it in FoundationEssentials' readBytesFromFile).
    var log: [String] {
        String(decoding: FileManager.default.contents(atPath: logFile.path) ?? Data(), as: UTF8.self)
            .split(separator: "\n").map(String.init).filter { !$0.hasPrefix("getpin-at ") }
    }

    var starts: Int { log.filter { $0.hasPrefix("started ") }.count }

    /// When each `GETPIN` arrived (seconds since 1970, as the script's clock said).
    var getpinTimes: [Double] {
        ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            $0.hasPrefix("getpin-at ") ? Double($0.dropFirst("getpin-at ".count)) : nil
        }
    }

    /// Waits (bounded) until a `GETPIN` is in the log: the prompt is up.
    func waitForGetpin() async -> Bool {
        let deadline = ContinuousClock.now + TestTimeScale.scaled(.seconds(30))
        while ContinuousClock.now < deadline {
            if log.contains("GETPIN") { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}

/// A pseudo-terminal pair, the master held open by the test: its slave's path stands for the
/// requester's terminal (a character device owned by this user).
final class PseudoTerminal: Sendable {
    let master: Int32
    let path: String

    init() throws {
        // posix_openpt, grantpt and unlockpt need _XOPEN_SOURCE, which Swift's Glibc module does
        // not define: their Linux equivalents. grantpt has nothing to do with devpts.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw CocoaError(.fileNoSuchFile) }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        // TIOCSPTLCK (_IOW('T', 0x31, int)) and TIOCGPTN (_IOR('T', 0x30, unsigned int)), which
        // Swift does not import (function-like macros).
        guard ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            close(master)
            throw CocoaError(.fileNoSuchFile)
        }
        self.master = master
        path = "/dev/pts/\(number)"
    }

    deinit { close(master) }
}
