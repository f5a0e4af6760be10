import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Token: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "Print a valid access token, for shell scripts. The only command that prints a secret.",
            discussion: """
                Prints the access token of the active account (or --account) on standard output, \
                followed by a newline, refreshing it first when it expires within a minute. Every \
                process using the vault shares one refresh.

                Example:
                  curl -H "Authorization: Bearer $(vault token)" https://api.example.com/me

                Exit codes: 79 the session is locked (`vault sessions unlock`); 80 it expired, was \
                revoked or there is no account (import a new sign-in); 69 the identity service \
                cannot be reached and no valid token is left; 76 it refused the client settings; 83 the \
                account has pins and the service's TLS key matches none of them (nothing was sent); \
                84 with --max-auth-age: the last sign-in is older (step-up: `vault login --account A \
                --max-age 0`), and no token is printed.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Option(name: .customLong("max-auth-age"),
                help: ArgumentHelp("Refuse (exit 84) unless the user signed in within this long, e.g. 5m (step-up before a sensitive action).", valueName: "duration"))
        var maxAuthAge: AgeLimit?

        func run() async throws {
            let token = try await OpenedVault.with(global, credentials) { opened in
                let id = try account.map { try opened.account($0) }
                if let maxAuthAge {
                    return try await opened.session.validAccessToken(for: id, maxAuthenticationAge: maxAuthAge.duration)
                }
                return try await opened.session.validAccessToken(for: id)
            }
            print(token.value)
        }
    }
}
