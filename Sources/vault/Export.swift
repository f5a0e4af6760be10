import ArgumentParser
import Foundation
import VaultStore

extension VaultCommand {
    struct Export: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Print everything but the secrets, as JSON for a support ticket.",
            discussion: """
                Prints the vault's status, accounts, token presence and expiry, session policies, \
                refresh state, sessions, devices and notification history as JSON. No sealed \
                value is read: no token, client secret, label, e-mail, device name or notification \
                text appears, only whether each is present. Needs no passphrase, so it also works \
                on a vault whose sealed values no longer open.

                Example:
                  vault export --redacted --json > vault-report.json
                """)

        @OptionGroup var global: GlobalOptions
        @Flag(help: "Leave out every secret and personal value (required: the only export there is).")
        var redacted = false
        @Flag(help: "Print JSON (the only format; accepted for clarity).")
        var json = false

        func validate() throws {
            guard redacted else {
                throw ValidationError("only a redacted export exists: run `vault export --redacted --json`")
            }
        }

        func run() async throws {
            let metadata = try Vault.metadata(at: global.url, options: global.storeOptions())
            print(JSONValue.export(metadata, generatedAt: CommandTime.wall.now()).rendered, terminator: "")
        }
    }
}
