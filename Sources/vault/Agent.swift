import AgentWire
import ArgumentParser
import Foundation
import VaultAgent
import VaultCrypto
import VaultSession
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

extension VaultCommand {
    struct Agent: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "agent",
            abstract: "Unlock the vault once and serve tokens to every command and tool of this user.",
            discussion: """
                The agent holds the vault's keys in locked memory and runs the session service \
                (refreshes, timeouts, events) for the vault; `vault token` and the other commands \
                then ask it over a Unix socket instead of deriving the key each time. Its socket is \
                agent-<id>.sock in $XDG_RUNTIME_DIR/credentialvault/ when that directory is yours and \
                private, else /run/user/UID/credentialvault/, else \
                ~/.local/state/credentialvault/run-<machine>/ (home from the password database); \
                clients search them in that order. Both ends check the directory (yours, mode 700, not \
                a link), the socket and the peer's uid before a byte is sent. \
                It drops the keys after --lock-after without use (default 1h), on `vault lock`, and \
                when the session service locks a session; `vault unlock` unlocks it again.
                """,
            subcommands: [Run.self, Start.self, Stop.self, Status.self])

        struct Options: ParsableArguments {
            @Option(help: ArgumentHelp("Drop the keys after this long without a request, or `none`. Default 1h.", valueName: "duration"))
            var lockAfter: TimeLimit?

            @Option(
                help: ArgumentHelp(
                    "Ask for the passphrase through this pinentry program when a request finds the agent locked, or `none`.",
                    discussion:
                        "Default: $VAULT_PINENTRY, else `pinentry` on $PATH. It is shown on the requester's terminal or display; requests with neither (cron) are refused as locked at once.",
                    valueName: "program"))
            var pinentry: String?

            @Option(help: ArgumentHelp("How long a passphrase prompt waits for an answer. Default 2m.", valueName: "duration"))
            var pinentryTimeout: TimeLimit?

            @Option(
                name: .customLong("refresh-ahead"),
                help: ArgumentHelp(
                    "Refresh this account's token ahead of expiry, so no request waits for a refresh (repeatable; `all`: every account). "
                        + AccountReference.help, valueName: "account"))
            var refreshAhead: [String] = []

            @Option(
                help: ArgumentHelp(
                    "While unlocked, check every signed-in account's grant this often (RFC 7662 introspection where the provider offers it to this client, else a refresh), so a revocation is noticed with no request; `none`: never. Default 15m.",
                    valueName: "duration"))
            var checkGrants: TimeLimit?

            @Option(
                help: ArgumentHelp(
                    "Warn (event refresh_token_expiring, `vault status`) this long before a refresh token expires, when its expiry is known; `none`: never. Default 3d.",
                    valueName: "duration"))
            var warnRefreshExpiry: TimeLimit?

            /// The watch these options ask for.
            var watch: AgentWatch {
                AgentWatch(
                    refreshAhead: refreshAhead, checkInterval: checkGrants.map(\.duration) ?? .seconds(900),
                    refreshExpiryWarning: warnRefreshExpiry.map(\.duration) ?? .seconds(3 * 86_400))
            }

            var lockDuration: Duration? {
                guard let lockAfter else { return .seconds(3600) }
                return lockAfter.duration
            }

            func validate() throws {
                if let pinentryTimeout, pinentryTimeout.duration == nil {
                    throw ValidationError("--pinentry-timeout needs a duration: a prompt always ends")
                }
            }

            /// The pinentry the agent asks through (or why none).
            var pinentryProgram: Result<Pinentry, Pinentry.Unavailable> {
                Pinentry.find(
                    named: pinentry, timeout: pinentryTimeout?.duration ?? Pinentry.defaultTimeout, environment: ProcessInfo.processInfo.environment)
            }

            /// These options again, for the detached `agent run` that `agent start` starts.
            var arguments: [String] {
                var arguments: [String] = []
                if let lockAfter { arguments += ["--lock-after", lockAfter.duration.map { "\($0.components.seconds)s" } ?? "none"] }
                if let pinentry { arguments += ["--pinentry", pinentry] }
                if let seconds = pinentryTimeout?.duration?.components.seconds { arguments += ["--pinentry-timeout", "\(seconds)s"] }
                for account in refreshAhead { arguments += ["--refresh-ahead", account] }
                if let checkGrants { arguments += ["--check-grants", checkGrants.duration.map { "\($0.components.seconds)s" } ?? "none"] }
                if let warnRefreshExpiry {
                    arguments += ["--warn-refresh-expiry", warnRefreshExpiry.duration.map { "\($0.components.seconds)s" } ?? "none"]
                }
                return arguments
            }
        }

        struct Run: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "run", abstract: "Run the agent in the foreground (for systemd).")
            @OptionGroup var global: GlobalOptions
            @OptionGroup var credentials: CredentialOptions
            @OptionGroup var options: Options
            @Flag(help: .hidden) var daemon = false

            func run() async throws {
                let socket = try AgentSocket.path(forVault: global.url)
                let foreground = !daemon
                let host = AgentHost(
                    global: global, socket: socket, lockAfter: options.lockDuration, pinentry: options.pinentryProgram, watch: options.watch
                ) { line in
                    if foreground { Terminal.printError("vault agent: \(line)") }
                }
                // Unlock first: a wrong passphrase ends here, before anything listens.
                try await host.unlock { facts in try credentials.credential(for: facts) }
                let server: AgentServer
                do {
                    server = try AgentServer(
                        directory: socket.deletingLastPathComponent(), name: socket.lastPathComponent,
                        features: [AgentProtocol.targetsFeature] + ((try? host.pinentry.get()) != nil ? [AgentProtocol.pinentryFeature] : []),
                        handler: { request, peer in await host.handle(request, peer: peer) },
                        onRefusedPeer: { peer in
                            Terminal.printError("vault agent: refused a connection from uid \(peer.uid) (pid \(peer.pid))")
                        })
                } catch {
                    await host.lock(because: "could not listen")
                    throw error
                }
                do {
                    try await server.run()
                } catch {
                    await server.stop()
                    await host.lock(because: "could not listen")
                    throw CommandFailure(.storage, "the agent cannot serve its socket: \(error)")
                }
                let signals = Self.stopOnSignals { Task { await host.requestStop() } }
                if daemon {
                    // Detached: a session of its own, no terminal, nothing on the inherited streams.
                    setsid()
                    print("ready \(socket.path)")
                    Terminal.flushOutput()
                    let null = open("/dev/null", O_RDWR)
                    if null >= 0 {
                        dup2(null, STDIN_FILENO)
                        dup2(null, STDOUT_FILENO)
                        dup2(null, STDERR_FILENO)
                        close(null)
                    }
                } else {
                    Terminal.printError("vault agent: serving \(global.url.path) on \(socket.path)")
                }
                await host.waitForStop()
                // A prompt still up would outlive the agent on the user's terminal.
                await host.endPrompt()
                await server.stop()
                await host.lock(because: "stopped")
                for source in signals { source.cancel() }
            }

            /// SIGTERM and SIGINT stop the agent cleanly (the keys wiped, the socket removed).
            static func stopOnSignals(_ stop: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
                [SIGTERM, SIGINT, SIGHUP].map { number in
                    signal(number, SIG_IGN)
                    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                    source.setEventHandler(handler: stop)
                    source.resume()
                    return source
                }
            }
        }

        struct Start: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "start", abstract: "Start the agent in the background; returns once it serves.")
            @OptionGroup var global: GlobalOptions
            @OptionGroup var credentials: CredentialOptions
            @OptionGroup var options: Options

            func run() async throws {
                let client = AgentClient(vault: global.url)
                if await client.isRunning() {
                    throw CommandFailure(.alreadyExists, "an agent is already running for \(global.url.path)")
                }
                var arguments = ["agent", "run", "--daemon", "--vault", global.url.path]
                if let file = credentials.passphraseFile { arguments += ["--passphrase-file", file] }
                if let file = credentials.keyFile { arguments += ["--key-file", file] }
                arguments += options.arguments
                if global.verbose { arguments.append("--verbose") }
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
                process.arguments = arguments
                // ProcessHardening took $VAULT_PASSPHRASE out of this process's environment at
                // start; the agent gets it back the way it was given (and takes it out in turn).
                if credentials.passphraseFile == nil, credentials.keyFile == nil,
                    let passphrase = try ProcessHardening.passphrase(from: "VAULT_PASSPHRASE")
                {
                    var environment = ProcessInfo.processInfo.environment
                    environment["VAULT_PASSPHRASE"] = try passphrase.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                    process.environment = environment
                }
                let output = Pipe()
                process.standardOutput = output
                try process.run()
                // The agent prompts on the terminal if it must, then prints "ready PATH" and detaches.
                let line = Self.firstLine(output.fileHandleForReading)
                guard let line, line.hasPrefix("ready ") else {
                    process.waitUntilExit()
                    throw CommandFailure(
                        ExitStatus(rawValue: process.terminationStatus) ?? .failure,
                        "the agent did not start (exit \(process.terminationStatus)); run `vault agent run` to see why")
                }
                print("Agent started for \(global.url.path) (pid \(process.processIdentifier)); socket \(line.dropFirst("ready ".count))")
            }

            static func firstLine(_ handle: FileHandle) -> String? {
                var bytes: [UInt8] = []
                while true {
                    let chunk = handle.readData(ofLength: 1)
                    guard let byte = chunk.first else { break }
                    if byte == 0x0A { break }
                    bytes.append(byte)
                    if bytes.count > 4096 { break }
                }
                return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
            }
        }

        struct Stop: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(commandName: "stop", abstract: "Stop the vault's agent (its keys are wiped).")
            @OptionGroup var global: GlobalOptions

            func run() async throws {
                do {
                    _ = try await AgentCall.send(.stop, global: global)
                } catch let failure as CommandFailure where failure.code == .failure {
                    // The agent may stop before its answer is out ("did not answer"): what
                    // counts is whether it is gone, checked below.
                }
                // Exit 0 once the agent is gone (its socket answers no more), non-zero only
                // while it still runs.
                let client = AgentClient(vault: global.url, timeoutSeconds: 2)
                let deadline = ContinuousClock.now.advanced(by: .seconds(10))
                while await client.isRunning() {
                    guard ContinuousClock.now < deadline else {
                        throw CommandFailure(.failure, "the agent for \(global.url.path) is still running 10 s after `stop`")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
                print("Agent for \(global.url.path) stopped.")
            }
        }

        struct Status: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(commandName: "status", abstract: "Whether an agent serves the vault, and whether it is locked.")
            @OptionGroup var global: GlobalOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                guard let status = try await AgentCall.send(.status, global: global).status else {
                    throw CommandFailure(.failure, "the agent sent no status")
                }
                if output.json {
                    let json: JSONValue = [
                        "vault": .string(status.vault), "socket": .string(status.socket), "pid": .int(Int64(status.pid)),
                        "locked": .bool(status.locked), "lock_reason": status.lockReason.map(JSONValue.string) ?? .null,
                        "unlocked_by_slot": .number(status.unlockedBy),
                        "lock_after_seconds": .number(status.lockAfter),
                        "last_use": .date(status.lastUse.map(Date.init(timeIntervalSince1970:))),
                        "started_at": .date(Date(timeIntervalSince1970: status.startedAt)),
                        "active_account": .text(status.activeAccount), "account_state": .text(status.accountState),
                    ]
                    print(json.rendered, terminator: "")
                } else {
                    let state =
                        switch (status.locked, status.lockReason) {
                        case (false, _): "unlocked"
                        case (true, AgentHost.keyChangedCode): "locked (key changed: `vault unlock`)"
                        case (true, _): "locked (`vault unlock`)"
                        }
                    print("Agent for \(status.vault): pid \(status.pid), \(state), socket \(status.socket)")
                    if let slot = status.unlockedBy { print("  unlocked with key slot \(slot)\(slot == 0 ? " (the vault's own credential)" : "")") }
                    if let lockAfter = status.lockAfter { print("  drops the keys after \(Format.span(.seconds(lockAfter))) without use") }
                    if let active = status.activeAccount {
                        print("  active account \(Terminal.printable(active)): \(Terminal.printable(status.accountState ?? "unknown"))")
                    }
                }
            }
        }
    }

    struct Lock: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(commandName: "lock", abstract: "Make the vault's agent drop its keys now.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            _ = try await AgentCall.send(.lock, global: global)
            print("Agent locked: its keys are wiped. `vault unlock` unlocks it again.")
        }
    }

    struct Unlock: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "unlock", abstract: "Unlock the vault's agent again, and the sessions a timeout locked (pinentry, --passphrase-file or --key-file).",
            discussion: """
                At a terminal or on a desktop, the agent asks for the passphrase itself, through \
                pinentry on this terminal or display: the passphrase goes from pinentry to the agent \
                and never crosses its socket. --passphrase-file, $VAULT_PASSPHRASE and --key-file \
                (for scripts) are read here and sent to the agent over its socket (a key file by its \
                path: the agent reads it). --no-prompt asks on this terminal and sends it too.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Flag(help: "Ask for the passphrase on this terminal and send it to the agent, instead of the agent asking through pinentry.")
        var noPrompt = false

        func run() async throws {
            let url = global.url
            let facts = try Vault.inspect(at: url, options: global.storeOptions())
            if try await unlockedByAKeeper(facts) {
                print("Agent unlocked (with a key a keeper holds).")
                return
            }
            if try await unlockedThroughPinentry(facts) {
                print("Agent unlocked.")
                return
            }
            var request = AgentRequest(.unlock)
            let keyFile =
                credentials.keyFile
                ?? {
                    if case .keyFile = facts.unlockMethod { return ProcessInfo.processInfo.environment["VAULT_KEY_FILE"] }
                    return nil
                }()
            if let keyFile {
                // The agent reads the key file itself: its bytes never cross the socket.
                request.keyFile = URL(fileURLWithPath: keyFile).standardizedFileURL.path
            } else if case .keyFile = facts.unlockMethod {
                // No key file here: an agent run as a systemd service unlocks with its own
                // credential; any other says how to name one.
            } else {
                guard case .passphraseBytes(let bytes) = try credentials.passphrase(prompt: "Passphrase for \(url.path): ", confirm: false) else {
                    throw CommandFailure(.usage, "no passphrase")
                }
                request.passphrase = try bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            }
            _ = try await AgentCall.send(request, global: global)
            print("Agent unlocked.")
        }

        /// Has the agent unlock with a key a keeper holds (a systemd credential, the desktop
        /// keyring) when a slot of a passphrase vault names one and no credential is given here;
        /// false when there is none or the agent could not read it (then the passphrase is asked).
        func unlockedByAKeeper(_ facts: VaultInspection) async throws -> Bool {
            guard case .passphrase = facts.unlockMethod, !KeySlot.keepers(of: facts.keySlots).isEmpty,
                credentials.keyFile == nil, credentials.passphraseFile == nil,
                try ProcessHardening.passphrase(from: "VAULT_PASSPHRASE") == nil
            else { return false }
            do {
                _ = try await AgentCall.send(AgentRequest(.unlock), global: global)
                return true
            } catch let failure as CommandFailure where failure.code == .usage || failure.code == .wrongCredential {
                return false
            }
        }

        /// Has the agent ask through pinentry when nothing given here says otherwise (a key
        /// file, a passphrase file or variable, --no-prompt) and this process has a terminal or
        /// display; false when it did not ask.
        func unlockedThroughPinentry(_ facts: VaultInspection) async throws -> Bool {
            guard !noPrompt, credentials.keyFile == nil, credentials.passphraseFile == nil,
                try ProcessHardening.passphrase(from: "VAULT_PASSPHRASE") == nil
            else { return false }
            if case .keyFile = facts.unlockMethod { return false }
            guard let terminal = RequesterTerminal.current() else { return false }
            let client = AgentClient(vault: global.url)
            let hello: AgentHello
            do {
                hello = try await client.hello()
            } catch AgentConnectionError.notRunning {
                throw CommandFailure(.noRecord, "no agent is running for \(global.url.path): `vault agent start`")
            } catch let error as AgentConnectionError {
                throw CommandFailure(error)
            }
            // An agent with no pinentry (or of an older build): asked here and sent, as before.
            guard hello.features.contains(AgentProtocol.pinentryFeature) else { return false }
            var request = AgentRequest(.unlock)
            request.terminal = terminal
            _ = try await AgentCall.send(request, global: global)
            return true
        }
    }
}

/// `--no-prompt`: whether a locked agent may ask for the passphrase on this terminal.
struct PromptOptions: ParsableArguments {
    @Flag(
        help: ArgumentHelp(
            "Never have a locked agent ask for the passphrase (pinentry): fail at once (exit 79).",
            discussion: "Also $VAULT_NO_PROMPT=1. Without it, a locked agent asks on this terminal or display."))
    var noPrompt = false

    /// Where the agent may ask, nil when it may not (or there is nowhere).
    var terminal: RequesterTerminal? { noPrompt ? nil : RequesterTerminal.current() }
}

/// The grant watch `agent start` asks for (``GrantWatch``), its accounts named as the user
/// named them until the vault is open.
struct AgentWatch: Sendable {
    var refreshAhead: [String]
    var checkInterval: Duration?
    var refreshExpiryWarning: Duration?

    /// The session service's configuration with this watch, its accounts resolved in `vault`;
    /// a name that names no account (removed since the agent started) is passed to `unresolved`
    /// and left out, so the agent still unlocks.
    func configuration(in vault: Vault, unresolved: (String) -> Void) throws -> SessionConfiguration {
        var configuration = SessionConfiguration()
        let ahead: GrantWatch.Accounts
        if refreshAhead.contains("all") {
            ahead = .all
        } else if refreshAhead.isEmpty {
            ahead = .none
        } else {
            let candidates = try vault.accounts.all().map { AccountReference.Candidate(id: $0.id, subject: $0.subject, label: $0.label) }
            ahead = .only(
                Set(
                    refreshAhead.compactMap { name in
                        guard let id = try? AccountReference.resolve(name, among: candidates) else {
                            unresolved(name)
                            return nil
                        }
                        return id
                    }))
        }
        configuration.grantWatch = GrantWatch(refreshAhead: ahead, checkInterval: checkInterval, refreshExpiryWarning: refreshExpiryWarning)
        return configuration
    }
}

extension CommandFailure {
    /// The agent's failure as the command reports it: its message, its exit code.
    init(_ failure: AgentFailure) {
        let hint = failure.code == "already_running" ? ": `vault agent stop`" : ""
        self.init(ExitStatus(rawValue: failure.exit) ?? .failure, failure.message + hint)
    }

    /// A connection that failed: an untrusted place is a permission problem (82).
    init(_ error: AgentConnectionError) {
        if case .untrusted = error {
            self.init(.unsafePermissions, "\(error)")
        } else if case .olderAgent = error {
            self.init(.failure, "\(error): `vault agent stop`, then `vault agent start`")
        } else {
            self.init(.failure, "\(error)")
        }
    }
}

/// One request to the vault's agent from a command, its failures as the command's.
enum AgentCall {
    static func send(_ op: AgentRequest.Operation, global: GlobalOptions) async throws -> AgentResponse {
        try await send(AgentRequest(op), global: global)
    }

    static func send(_ request: AgentRequest, global: GlobalOptions) async throws -> AgentResponse {
        do {
            return try await AgentClient(vault: global.url).send(request)
        } catch let failure as AgentFailure {
            throw CommandFailure(failure)
        } catch AgentConnectionError.notRunning {
            throw CommandFailure(.noRecord, "no agent is running for \(global.url.path): `vault agent start`")
        } catch let error as AgentConnectionError {
            throw CommandFailure(error)
        }
    }
}
