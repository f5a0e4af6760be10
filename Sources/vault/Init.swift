import ArgumentParser
import Foundation
import VaultStore

extension VaultCommand {
    struct Init: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create a new, empty vault.",
            discussion: """
                Creates the vault file with mode 0600 (and its directory with mode 0700 when \
                missing). It is protected by a passphrase (asked twice on the terminal, or taken \
                from --passphrase-file or $VAULT_PASSPHRASE) or by a key file (--key-file; a new \
                one with 32 random bytes is written when the file does not exist). Refuses to \
                overwrite anything.

                Examples:
                  vault init
                  vault init --kdf moderate
                  vault init --vault /srv/app/vault.db --key-file /srv/app/vault.key
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions

        @Option(
            help: ArgumentHelp(
                "How hard the passphrase is stretched (Argon2id).",
                discussion: "interactive: 2 passes, 64 MiB (default); moderate: 3 passes, 256 MiB; sensitive: 4 passes, 1 GiB. Each unlock costs this much."))
        var kdf: KDFLevel?

        func validate() throws {
            if kdf != nil && credentials.keyFile != nil {
                throw ValidationError("--kdf applies to a passphrase; a key file needs no key stretching")
            }
        }

        func run() async throws {
            let url = global.url
            if FileManager.default.fileExists(atPath: url.path) {
                throw CommandFailure(.alreadyExists, "a file already exists at \(url.path); choose another --vault path")
            }
            var createdKeyFile = false
            let credential: VaultCredential
            if let keyFile = credentials.keyFile {
                let keyURL = URL(fileURLWithPath: keyFile)
                if !FileManager.default.fileExists(atPath: keyURL.path) {
                    try VaultCredential.createKeyFile(at: keyURL)
                    createdKeyFile = true
                }
                credential = .keyFile(keyURL)
            } else {
                credential = try credentials.passphrase(prompt: "New passphrase for \(url.path): ", confirm: true)
            }
            let vault = try Vault.create(at: url, credential: credential, options: global.storeOptions(kdf: kdf))
            vault.close()
            if createdKeyFile, let keyFile = credentials.keyFile {
                print("Wrote a new key file \(keyFile) (mode 0600): keep a copy somewhere safe; without it the vault cannot be opened.")
            }
            let how = credentials.keyFile != nil ? "key file" : "passphrase, Argon2id \((kdf ?? .interactive).rawValue)"
            print("Created vault \(url.path) (\(how)).")
        }
    }
}
