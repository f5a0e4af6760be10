import AgentWire
import ArgumentParser
internal import CProcessControl
import Foundation
import VaultAgent
import VaultProcess
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

extension VaultCommand {
    struct Exec: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "exec",
            abstract: "Run a command with a valid access token in its environment.",
            discussion: """
                Gets a token valid for at least --min-ttl (default 60 s; from the agent when one \
                serves the vault, else from the vault opened here), runs COMMAND with it in $NAME \
                (--env, default ACCESS_TOKEN), passes standard input, output and error through, \
                forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH to it, and \
                exits with its status (128 + N when a signal N ended it). The command gets standard \
                input, output and error and no other descriptor of this process.

                --env refuses a variable that is already set (--replace to overwrite it) and always \
                refuses the loader's and the shells' own (PATH, HOME, SHELL, IFS, ENV, BASH_ENV, \
                LD_*, GCONV_PATH, …). A token that is not RFC 6750 b64token syntax is not put in the \
                environment.

                Example:
                  vault exec --env GITHUB_TOKEN -- gh api user

                With --keep-fresh, for a command that runs longer than a token lives: no token \
                in the environment; instead $VAULT_TOKEN_FILE names a file on tmpfs holding the \
                current token (replaced atomically before it expires; removed when the command \
                ends) and $VAULT_TOKEN_SOCKET a socket that answers GET /token (and /token.json) \
                with a token valid at least --min-ttl. Both live in a private 0700 directory. \
                Every token comes from the vault's agent, whose lock rules apply (`vault agent \
                start` first). After a failed refresh the file keeps the last token until it \
                expires, then is empty (at once when the session ended or was revoked), and the \
                socket answers 503 with the reason.
                  vault exec --keep-fresh -- sh -c 'curl -H "Authorization: Bearer $(cat "$VAULT_TOKEN_FILE")" https://api.example.com/'
                  curl --unix-socket "$VAULT_TOKEN_SOCKET" http://localhost/token
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var prompt: PromptOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @OptionGroup var target: TargetOptions
        @Option(name: .customLong("env"), help: ArgumentHelp("The variable that holds the token (default ACCESS_TOKEN).", valueName: "NAME"))
        var variableOption: String?
        var variable: String { variableOption ?? "ACCESS_TOKEN" }
        @Flag(help: "Keep a fresh token for the command in $VAULT_TOKEN_FILE and on $VAULT_TOKEN_SOCKET while it runs, from the agent.")
        var keepFresh = false
        @Option(name: .customLong("min-ttl"), help: ArgumentHelp("How long the token must stay valid. Default 60s.", valueName: "duration"))
        var minTTL: TimeLimit?
        @Flag(help: "Open the vault directly even when an agent serves it.")
        var noAgent = false
        @Flag(help: "Overwrite the --env variable when it is already set (never one of the loader's or shells').")
        var replace = false
        @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
        var command: [String] = []

        func validate() throws {
            let words = command.first == "--" ? Array(command.dropFirst()) : command
            guard !words.isEmpty else { throw ValidationError("give the command to run after --") }
            let validName =
                variable.first.map { $0 == "_" || $0.isLetter } == true
                && variable.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
            guard validName else { throw ValidationError("--env must be a variable name (letters, digits, _)") }
            if let reason = Self.reserved(variable) {
                throw ValidationError("--env \(variable): \(reason); choose another name (the default is ACCESS_TOKEN)")
            }
            if keepFresh {
                if noAgent { throw ValidationError("--keep-fresh takes every token from the agent: it cannot go with --no-agent") }
                if variableOption != nil || replace {
                    throw ValidationError(
                        "--keep-fresh puts no token in the environment (it would go stale): read $VAULT_TOKEN_FILE or ask $VAULT_TOKEN_SOCKET")
                }
                if credentials.passphraseFile != nil || credentials.keyFile != nil {
                    throw ValidationError("--keep-fresh takes every token from the running agent, which holds the key: give no --passphrase-file or --key-file")
                }
                return
            }
            if !replace, ProcessInfo.processInfo.environment[variable] != nil {
                throw ValidationError("--env \(variable): it is already set in the environment; give --replace to overwrite it")
            }
        }

        /// Variables the dynamic loader, libc or a shell reads to decide what runs or how: a
        /// token there would change what the command does, not just hand it a credential.
        static let reservedNames: Set<String> = [
            "PATH", "HOME", "SHELL", "IFS", "ENV", "BASH_ENV", "CDPATH", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS",
            "GLOBIGNORE", "POSIXLY_CORRECT", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN",
            "GLIBC_TUNABLES", "TMPDIR", "PWD", "OLDPWD", "USER", "LOGNAME", "TERM", "TZ", "LANG", "LANGUAGE",
        ]
        static let reservedPrefixes = ["LD_", "MALLOC_", "BASH_FUNC_", "LC_"]

        static func reserved(_ name: String) -> String? {
            if reservedNames.contains(name) { return "the loader, libc or the shell reads it" }
            if let prefix = reservedPrefixes.first(where: { name.hasPrefix($0) }) { return "\(prefix)* variables are read by the loader, libc or the shell" }
            return nil
        }

        /// RFC 6750 §2.1 `b64token`: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
        static func isBearerTokenSyntax(_ value: String) -> Bool {
            let bytes = Array(value.utf8)
            let body = bytes.prefix { byte in
                (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                    || [UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/")].contains(byte)
            }
            guard !body.isEmpty else { return false }
            return bytes.dropFirst(body.count).allSatisfy { $0 == UInt8(ascii: "=") }
        }

        func run() async throws {
            // Before anything here opens a socket: SwiftNIO ignores SIGPIPE process-wide, which
            // the command must not inherit unless this process was started that way.
            let pipeSignalWasDefault = Self.isDefault(SIGPIPE)
            let words = command.first == "--" ? Array(command.dropFirst()) : command
            guard let executable = Self.resolve(words[0]) else {
                throw CommandFailure(.noRecord, "\(Terminal.printable(words[0])): command not found")
            }
            if keepFresh { try await runKeepingFresh(executable, Array(words.dropFirst()), resettingPipe: pipeSignalWasDefault) }
            let token = try await Token.fetch(
                global: global, credentials: credentials, account: account, target: try target.target,
                minimumValidity: minTTL?.duration ?? .seconds(60), maxAuthAge: nil, noAgent: noAgent, terminal: prompt.terminal)
            try Self.checkBearerSyntax(token)
            var environment = ProcessInfo.processInfo.environment
            environment[variable] = token.value
            let ended = try await Self.spawn(executable, Array(words.dropFirst()), environment: environment, resettingPipe: pipeSignalWasDefault)
            Foundation.exit(ended.shellStatus)
        }

        /// Refuses a token a command cannot be handed: not RFC 6750 `b64token` syntax.
        static func checkBearerSyntax(_ token: AgentToken) throws {
            guard isBearerTokenSyntax(token.value) else {
                throw CommandFailure(
                    .failure, "the access token is not RFC 6750 token syntax (b64token); it was not handed to the command: use `vault token`")
            }
        }

        /// Whether `signal` is at its default action in this process now.
        static func isDefault(_ signal: Int32) -> Bool {
            var current = sigaction()
            return sigaction(signal, nil, &current) == 0 && current.__sigaction_handler.sa_handler == nil
        }

        /// Runs the command with `environment`, signals forwarded to it, and waits for its end.
        /// `resettingPipe`: SIGPIPE was at its default action when `run` began, before SwiftNIO
        /// ignored it: the command gets the default back.
        static func spawn(
            _ executable: URL, _ arguments: [String], environment: [String: String], resettingPipe: Bool
        ) async throws -> Spawn.Termination {
            // Handlers before the child exists: a signal in between is kept, not lost, and the
            // child still starts with default dispositions.
            let forwarded = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH]
            guard forwarded.withUnsafeBufferPointer({ cv_forward_signals($0.baseAddress, Int32($0.count)) }) == 0 else {
                throw CommandFailure(.failure, "cannot install the signal handlers")
            }
            // posix_spawn, not Foundation's Process (see `Spawn`): descriptors 0-2 only, in the
            // terminal's process group, ignored signals left ignored (SIGPIPE as it was at start).
            let pid: pid_t
            do {
                pid = try Spawn.start(
                    executable, arguments, environment: environment, input: STDIN_FILENO, output: STDOUT_FILENO, error: STDERR_FILENO,
                    ownProcessGroup: false, defaultSignals: false, resetting: resettingPipe ? [SIGPIPE] : [])
            } catch {
                throw CommandFailure(.failure, "\(error)")
            }
            cv_set_forward_target(pid)
            // Waited for on a thread of its own, never a cooperative one.
            return await Spawn.wait(pid)
        }

        /// `--keep-fresh`: the command runs with $VAULT_TOKEN_FILE and $VAULT_TOKEN_SOCKET
        /// (``ChildTokenKeeper``) while this process keeps them fresh; both gone when it ends.
        func runKeepingFresh(_ executable: URL, _ arguments: [String], resettingPipe: Bool) async throws -> Never {
            var request = AgentRequest(.token, account: account)
            let target = try target.target
            (request.resources, request.scopes) = (target.resources, target.scopes)
            let minimumValidity = Int((minTTL?.duration ?? .seconds(60)).components.seconds)
            let place: ChildTokenPlace
            do {
                place = try ChildTokenPlace()
            } catch {
                throw CommandFailure(error)
            }
            let keeper = ChildTokenKeeper(client: AgentClient(vault: global.url), request: request, place: place, minimumValidity: minimumValidity)
            let server: ChildTokenServer
            do {
                try await keeper.start(terminal: prompt.terminal)
                server = try await ChildTokenServer(place: place) { path in await keeper.reply(path) }
            } catch let error as AgentConnectionError where error == .notRunning {
                place.remove()
                throw CommandFailure(
                    .failure,
                    "--keep-fresh takes the command's tokens from the vault's agent, and no agent serves \(global.url.path): start one (`vault agent start`) and run this again"
                )
            } catch {
                place.remove()
                throw CommandFailure.describing(error)
            }
            var environment = ProcessInfo.processInfo.environment
            environment["VAULT_TOKEN_FILE"] = place.tokenFile.path
            environment["VAULT_TOKEN_SOCKET"] = place.socket.path
            let refresher = Task { await keeper.keepFresh() }
            let ended: Result<Spawn.Termination, any Error>
            do {
                ended = .success(try await Self.spawn(executable, arguments, environment: environment, resettingPipe: resettingPipe))
            } catch {
                ended = .failure(error)
            }
            // In this order: no refresh left to write, no answer left to send, then the files go.
            refresher.cancel()
            await refresher.value
            await server.stop()
            place.remove()
            Foundation.exit(try ended.get().shellStatus)
        }

        /// `name` when it has a slash, else the first executable of that name on $PATH.
        static func resolve(_ name: String) -> URL? {
            if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? URL(fileURLWithPath: name) : nil }
            let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
            for directory in path.split(separator: ":") where !directory.isEmpty {
                let candidate = URL(fileURLWithPath: String(directory)).appending(path: name)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            }
            return nil
        }
    }
}
