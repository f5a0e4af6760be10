import ArgumentParser
import Foundation
import Logging
import VaultStore
import VaultSync

/// Options every subcommand takes: which vault, and how much to log.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("vault"),
        help: ArgumentHelp(
            "The vault file.",
            discussion: "Default: $VAULT_PATH, else $XDG_DATA_HOME/credentialvault/vault.db.",
            valueName: "path"))
    var vaultPath: String?

    @Flag(name: [.customShort("v"), .long], help: "Log what the vault does to standard error (info and debug).")
    var verbose = false

    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "A PEM bundle of the certificate authorities the identity service's TLS must lead to.",
            discussion:
                "Default: $SSL_CERT_FILE, else the system's store. Given to `login` or `accounts add`, it is kept with the account for its later requests. HTTPS_PROXY and NO_PROXY are read from the environment.",
            valueName: "file"))
    var caFile: String?

    /// `--ca-file` as an absolute path (what an account stores), or nil.
    var caFilePath: String? {
        caFile.map { URL(fileURLWithPath: ($0 as NSString).expandingTildeInPath).standardizedFileURL.path }
    }

    /// The vault file: --vault, else $VAULT_PATH, else the XDG default location.
    var url: URL {
        let environment = ProcessInfo.processInfo.environment
        if let path = vaultPath ?? environment["VAULT_PATH"].flatMap({ $0.isEmpty ? nil : $0 }) {
            return URL(fileURLWithPath: (path as NSString).expandingTildeInPath)
        }
        return VaultLocation.defaultURL(environment: environment)
    }

    func logger(_ label: String = "vault") -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = verbose ? .debug : .warning
        return logger
    }

    /// Store options with this command's logger and wall clock.
    func storeOptions(kdf: KDFLevel? = nil) -> VaultOptions {
        var options = VaultOptions(logger: logger("credentialvault.store"))
        options.clock = CommandTime.wall
        if let kdf { options.kdf = kdf.parameters }
        return options
    }
}

extension GlobalOptions {
    /// `arguments` with the global options given before the subcommand (`vault --vault x
    /// status`, as git and gh take them) moved after it, where every subcommand reads them;
    /// before a `--` terminator if there is one (`vault -v exec -- cmd`). Anything else before
    /// the subcommand is left where it is, for the parser to report.
    static func movedAfterSubcommand(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--vault", index + 1 < arguments.count {
                leading += [argument, arguments[index + 1]]
                index += 2
            } else if argument.hasPrefix("--vault=") || argument == "-v" || argument == "--verbose" {
                leading.append(argument)
                index += 1
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.count else { return arguments }
        var rest = Array(arguments[index...])
        rest.insert(contentsOf: leading, at: rest.firstIndex(of: "--") ?? rest.count)
        return rest
    }
}

/// Options that say how to read the output.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON (shape documented in the README) instead of text.")
    var json = false
}

/// swift-log is bootstrapped once, by the executable only: standard error, warnings by default.
enum CommandLogging {
    private static let bootstrapped = Locked(false)

    static func bootstrap(verbose: Bool) {
        let first = bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        let level: Logger.Level = verbose ? .debug : .warning
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

/// The command's time, read in one place: every time it writes, compares or shows comes from
/// `wall` (the library's `WallClock`, also the clock of every vault it opens), and the agent's
/// timers sleep on `clock`. Nothing in the command calls `Date()`.
enum CommandTime {
    static let wall = WallClock.system
    static let clock = ContinuousClock()
}
