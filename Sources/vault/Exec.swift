import ArgumentParser
internal import CProcessControl
import Foundation
import VaultAgent

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
                exits with its status (128 + N when a signal N ended it).

                Example:
                  vault exec --env GITHUB_TOKEN -- gh api user
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Option(name: .customLong("env"), help: ArgumentHelp("The variable that holds the token.", valueName: "NAME"))
        var variable = "ACCESS_TOKEN"
        @Option(name: .customLong("min-ttl"), help: ArgumentHelp("How long the token must stay valid. Default 60s.", valueName: "duration"))
        var minTTL: TimeLimit?
        @Flag(help: "Open the vault directly even when an agent serves it.")
        var noAgent = false
        @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
        var command: [String] = []

        func validate() throws {
            let words = command.first == "--" ? Array(command.dropFirst()) : command
            guard !words.isEmpty else { throw ValidationError("give the command to run after --") }
            let validName =
                variable.first.map { $0 == "_" || $0.isLetter } == true
                && variable.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
            guard validName else { throw ValidationError("--env must be a variable name (letters, digits, _)") }
        }

        func run() async throws {
            let words = command.first == "--" ? Array(command.dropFirst()) : command
            guard let executable = Self.resolve(words[0]) else {
                throw CommandFailure(.noRecord, "\(Terminal.printable(words[0])): command not found")
            }
            let token = try await Token.fetch(
                global: global, credentials: credentials, account: account,
                minimumValidity: minTTL?.duration ?? .seconds(60), maxAuthAge: nil, noAgent: noAgent)
            let process = Process()
            process.executableURL = executable
            process.arguments = Array(words.dropFirst())
            var environment = ProcessInfo.processInfo.environment
            environment[variable] = token.value
            process.environment = environment
            // Handlers before the child exists: a signal in between is kept, not lost, and the
            // child still starts with default dispositions.
            let forwarded = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH]
            guard forwarded.withUnsafeBufferPointer({ cv_forward_signals($0.baseAddress, Int32($0.count)) }) == 0 else {
                throw CommandFailure(.failure, "cannot install the signal handlers")
            }
            try process.run()
            cv_set_forward_target(process.processIdentifier)
            process.waitUntilExit()
            let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
            Foundation.exit(status)
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
