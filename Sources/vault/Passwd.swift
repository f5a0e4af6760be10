import ArgumentParser
import Foundation
import VaultCrypto
import VaultStore

extension VaultCommand {
    struct Passwd: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "passwd",
            abstract: "Change the passphrase (or switch to a key file).",
            discussion: """
                Unlocks with the current passphrase or key file, then wraps the vault key under \
                the new one. No data is re-encrypted, so it takes one key derivation whatever the \
                vault's size. The new passphrase is asked twice on the terminal, or read from \
                --new-passphrase-file or $VAULT_NEW_PASSPHRASE. The cost stays what it was unless \
                --kdf says otherwise.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions

        @Option(help: ArgumentHelp("Read the new passphrase from this file (one trailing newline is ignored).", valueName: "file"))
        var newPassphraseFile: String?
        @Option(help: ArgumentHelp("Unlock from now on with this key file (created with 32 random bytes if missing).", valueName: "file"))
        var newKeyFile: String?
        @Option(help: ArgumentHelp("The Argon2id cost for the new passphrase: interactive, moderate or sensitive.", valueName: "level"))
        var kdf: KDFLevel?

        func validate() throws {
            if newPassphraseFile != nil && newKeyFile != nil {
                throw ValidationError("give either --new-passphrase-file or --new-key-file, not both")
            }
            if kdf != nil && newKeyFile != nil {
                throw ValidationError("--kdf applies to a passphrase; a key file needs no key stretching")
            }
        }

        func run() async throws {
            let url = global.url
            let facts = try Vault.inspect(at: url, options: global.storeOptions())
            var cost = kdf?.parameters
            if cost == nil, case .passphrase(let current) = facts.unlockMethod { cost = current }
            try await OpenedVault.with(global, credentials) { opened in
                let credential: VaultCredential
                if let newKeyFile {
                    let keyURL = URL(fileURLWithPath: newKeyFile)
                    if !FileManager.default.fileExists(atPath: keyURL.path) { try VaultCredential.createKeyFile(at: keyURL) }
                    credential = .keyFile(keyURL)
                } else {
                    credential = try CredentialOptions.passphrase(
                        file: newPassphraseFile, environmentVariable: "VAULT_NEW_PASSPHRASE",
                        prompt: "New passphrase for \(url.path): ", confirm: true)
                }
                try opened.vault.changeCredential(to: credential, cost: cost ?? .interactive)
            }
            print(newKeyFile.map { "The vault now opens with the key file \($0); the old passphrase no longer works." }
                  ?? "Changed the passphrase; the old one no longer works.")
        }
    }
}
