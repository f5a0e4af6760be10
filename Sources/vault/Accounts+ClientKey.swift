import ArgumentParser
import Foundation
import VaultOAuth
import VaultSession
import VaultStore

extension VaultCommand.Accounts {
    struct ClientKey: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "client-key",
            abstract: "Print a private_key_jwt client's public key, or roll it over to a new one.",
            discussion: """
                Without --rotate: the public JWK of the key the client signs its assertions with \
                (RFC 7523), for registering with the provider. The private key never leaves the vault.

                --rotate: a key rollover. A new key is made (or read from --client-key-file), its public JWK \
                printed (or written to --jwk-out), and the vault keeps signing with the old key while it \
                waits for the provider to accept the new one (register it beside the old one: providers \
                take a key set). Once a request signed with the new key is accepted, the new key \
                replaces the old one; the provider may then drop the old one. Ctrl-C or the timeout \
                leaves the old key in place and changes nothing.

                Examples:
                  vault accounts client-key backup-daemon > backup.jwk
                  vault accounts client-key backup-daemon --rotate --jwk-out next.jwk
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: ArgumentHelp(AccountReference.help, valueName: "account"))
        var account: String?
        @Flag(help: "Roll the key over: a new key, used once the provider accepts it.") var rotate = false
        @Option(
            name: .customLong("client-key-file"),
            help: ArgumentHelp("With --rotate: import this P-256 private key (PEM; mode 0600 or stricter) instead of generating one.", valueName: "file"))
        var clientKeyFile: String?
        @Option(help: ArgumentHelp("With --rotate: write the new public JWK to this file instead of standard output.", valueName: "file"))
        var jwkOut: String?
        @Option(help: ArgumentHelp("With --rotate: how long to wait for the provider to accept the new key. Default 10m.", valueName: "duration"))
        var registrationTimeout: TimeLimit?

        func validate() throws {
            if !rotate, clientKeyFile != nil || jwkOut != nil || registrationTimeout != nil {
                throw ValidationError("--client-key-file, --jwk-out and --registration-timeout go with --rotate")
            }
            if rotate, output.json, jwkOut == nil { throw ValidationError("--json with --rotate needs --jwk-out FILE (standard output carries the JSON)") }
            if case .unlimited? = registrationTimeout { throw ValidationError("--registration-timeout must be a duration") }
        }

        func run() async throws {
            // Read (and its mode checked) before the vault is opened.
            let next = rotate ? try clientKeyFile.map(CredentialOptions.readClientKey) ?? ClientSigningKey.generate() : nil
            let command = self
            let (id, current) = try await Interruptible.run {
                try await OpenedVault.with(command.global, command.credentials) { opened in
                    let id = try opened.account(command.account)
                    guard let account = try opened.vault.accounts.find(id) else { throw CommandFailure(.noRecord, "no account \(id) in the vault") }
                    guard account.client.authentication == .privateKeyJWT, let pem = try opened.vault.accounts.clientSigningKey(for: id) else {
                        throw CommandFailure(
                            .usage,
                            "account \(id) authenticates with \(account.client.authentication.rawValue), not a signing key; `vault login --client-credentials --account \(id) --generate-client-key` gives it one"
                        )
                    }
                    let current = try ClientSigningKey(pem: pem)
                    if let next {
                        try KeyRegistration.publish(next, to: command.jwkOut, registering: "beside the current one")
                        try await KeyRegistration.await(timeout: command.registrationTimeout?.duration ?? KeyRegistration.defaultTimeout) {
                            try await opened.session.replaceSigningKey(of: id, with: next)
                        }
                    }
                    return (id, current)
                }
            }
            if let next {
                if output.json {
                    print(
                        JSONValue.object([
                            ("account", .string(id.rawValue)), ("previous_kid", .string(current.keyID)), ("kid", .string(next.keyID)),
                            ("jwk_file", .text(jwkOut)),
                        ]).rendered, terminator: "")
                } else {
                    print("Rolled account \(id)'s signing key over: kid \(current.keyID) → \(next.keyID).")
                    print("The provider accepts the new key; it may now drop kid \(current.keyID).")
                }
            } else if output.json {
                print(
                    JSONValue.object([
                        ("account", .string(id.rawValue)), ("kid", .string(current.keyID)),
                        ("jwk", .object(current.publicJWKMembers.map { ($0.name, .string($0.value)) })),
                    ]).rendered,
                    terminator: "")
            } else {
                print(current.publicJWK)
            }
        }
    }
}
