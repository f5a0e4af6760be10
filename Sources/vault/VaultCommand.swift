import ArgumentParser
import Foundation

/// `vault`: the administrator's command for a CredentialVault vault.
///
/// Every subcommand is a struct nested in an extension of this type (one file each), shares
/// ``GlobalOptions`` (and ``CredentialOptions`` when it unlocks the vault), checks its input
/// in `validate()` and keeps `run()` to: open, call the library, print. Failures are turned
/// into documented exit codes in one place, ``CommandFailure``.
///
/// Every command spells out its `commandName`. ArgumentParser otherwise derives it with
/// `String(describing:)` of each command type, for the whole tree, on every start, and each of
/// those is a dynamic cast that scans every protocol conformance in the binary: a quarter of
/// `vault token`'s time in the static release build.
@main
struct VaultCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Inspect, maintain and use a CredentialVault vault.",
        discussion: """
            A vault is one encrypted SQLite file holding the accounts, tokens, sessions, devices \
            and notifications of the tools that use CredentialVault. This command creates one, \
            shows what is in it, imports sign-ins, hands out access tokens to scripts, and \
            checks, migrates, backs up and re-keys the file.

            The vault is --vault PATH, else $VAULT_PATH, else \
            $XDG_DATA_HOME/credentialvault/vault.db (~/.local/share/credentialvault/vault.db).

            Commands that open sealed values ask for the passphrase on the terminal without \
            echo; for scripts use --passphrase-file FILE or the VAULT_PASSPHRASE environment \
            variable, or --key-file FILE ($VAULT_KEY_FILE) for a vault unlocked by a key file. \
            status, sessions list, export, backup, compact and migrate --dry-run need no passphrase.

            Read commands take --json for a stable machine-readable shape (see the README). \
            Only `vault token` ever prints a secret.

            Exit codes: 0 ok, 1 other failure, 64 usage, 65 damaged vault or failed verify, \
            66 no vault, 67 no such record, 69 identity server unavailable, 70 migration failed, \
            73 already exists, 74 storage error, 75 busy (try again), 76 client refused by the \
            identity server, 77 wrong passphrase or key file, 78 schema newer than this tool, \
            79 session locked, 80 session expired, revoked or refused (sign in again), 81 migration \
            needed, 82 unsafe file permissions, 83 TLS pinning failed, 84 step-up needed (sign in \
            again with --max-age 0), 85 sign-in declined, 86 sign-in timed out (device code expired, \
            browser did not come back), 87 the provider's answer failed a check (ID token, state, \
            issuer), 88 signed in as another user than the account's, 89 session export refused \
            (not for this vault, changed, expired or already imported), 130 interrupted.
            """,
        version: buildVersion,
        subcommands: [
            Init.self, Status.self, Login.self, Accounts.self, Sessions.self, Events.self, Devices.self, Notifications.self,
            Token.self, DPoPProof.self, Exec.self, Recipient.self, GitCredential.self, DockerCredential.self, Agent.self, Lock.self, Unlock.self, Verify.self,
            Repair.self,
            Migrate.self,
            Keeper.self, Passwd.self, RotateKey.self, Backup.self, Compact.self, PruneNotifications.self, Export.self,
        ])

    /// Hardens the process, parses, sets up logging, runs, and maps a failure to its exit code
    /// and message.
    static func main() async {
        // Before anything reads the environment or holds a secret (see ProcessHardening).
        for problem in ProcessHardening.apply() {
            Terminal.printError("vault: warning: \(problem)")
        }
        let command: any ParsableCommand
        do {
            var arguments = Array(CommandLine.arguments.dropFirst())
            // Installed as docker-credential-vault and git-credential-vault, docker and git run
            // it with the operation alone.
            switch CommandLine.arguments.first?.split(separator: "/").last {
            case "docker-credential-vault": arguments.insert("docker-credential", at: 0)
            case "git-credential-vault": arguments.insert("git-credential", at: 0)
            default: break
            }
            command = try await parse(GlobalOptions.movedAfterSubcommand(arguments))
        } catch {
            exit(withError: error)
        }
        CommandLogging.bootstrap(verbose: (command as? any VaultSubcommand)?.global.verbose ?? false)
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var command = command
                try command.run()
            }
        } catch {
            // Built-in commands (help, a command group without a subcommand) report through ArgumentParser.
            guard command is any VaultSubcommand, let failure = CommandFailure(error) else { exit(withError: error) }
            Terminal.printError("vault: \(failure.message)")
            Foundation.exit(failure.code.rawValue)
        }
    }
}

extension VaultCommand {
    /// The command `arguments` ask for.
    ///
    /// `vault token` is what scripts run before every API call, so its arguments are first
    /// parsed by ``Token`` alone: ArgumentParser then reflects one command instead of building
    /// the whole tree of commands, most of the cost of parsing. The result is the same command
    /// with the same options, validated the same way. Anything it does not take as it is (help,
    /// `--version`, an unknown option, a missing value, a failed validation) goes to the full
    /// parse, so messages and exit codes stay those of `vault`.
    static func parse(_ arguments: [String]) async throws -> any ParsableCommand {
        if arguments.first == Token.configuration.commandName, let token = try? Token.parse(Array(arguments.dropFirst())) {
            return token
        }
        return try await asyncParseAsRoot(arguments)
    }
}

/// A command that carries the shared options.
protocol VaultSubcommand: SendableMetatype {
    var global: GlobalOptions { get }
}
