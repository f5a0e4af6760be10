import ArgumentParser
import Foundation
import VaultCrypto
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

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

                --systemd-creds FILE: for a system service, no key file at all: a new key is sealed \
                with systemd-creds into FILE (to this host's credential secret, and its TPM with \
                --systemd-creds-key tpm2 or auto on a machine that has one), checked to open here, \
                and never written in the clear; the service gets it with \
                LoadCredentialEncrypted=vault.key:FILE and every vault command there finds it.

                Examples:
                  vault init
                  vault init --kdf moderate
                  vault init --vault /srv/app/vault.db --key-file /srv/app/vault.key
                  vault init --vault /srv/app/vault.db --systemd-creds /etc/credstore.encrypted/vault.key
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions

        @Option(
            help: ArgumentHelp(
                "How hard the passphrase is stretched (Argon2id).",
                discussion: "interactive: 2 passes, 64 MiB (default); moderate: 3 passes, 256 MiB; sensitive: 4 passes, 1 GiB. Each unlock costs this much."))
        var kdf: KDFLevel?

        @Option(
            name: .customLong("systemd-creds"),
            help: ArgumentHelp("Seal a new key with systemd-creds into this file instead (for a system service).", valueName: "file"))
        var systemdCredential: String?

        @Option(
            name: .customLong("systemd-creds-key"),
            help: ArgumentHelp(
                "What systemd-creds seals to: \(SystemdCredential.Sealing.allCases.map(\.rawValue).joined(separator: ", ")) (its --with-key).",
                valueName: "key"))
        var sealing: SystemdCredential.Sealing = .auto

        func validate() throws {
            if kdf != nil && (credentials.keyFile != nil || systemdCredential != nil) {
                throw ValidationError("--kdf applies to a passphrase; a key needs no key stretching")
            }
            if systemdCredential != nil && (credentials.keyFile != nil || credentials.passphraseFile != nil) {
                throw ValidationError("--systemd-creds makes the vault's key itself: give no --key-file or --passphrase-file")
            }
        }

        func run() async throws {
            let url = global.url
            if FileManager.default.fileExists(atPath: url.path) {
                throw CommandFailure(.alreadyExists, "a file already exists at \(url.path); choose another --vault path")
            }
            var createdKeyFile = false
            let credential: VaultCredential
            if let output = systemdCredential {
                let file = URL(fileURLWithPath: output)
                let key = try VaultCredential.newKey()
                defer { key.wipe() }
                try SystemdCredential.seal(key, to: file, sealing: sealing)
                do {
                    let vault = try Vault.create(at: url, credential: .key(key), options: global.storeOptions())
                    vault.close()
                } catch {
                    unlink(file.path)  // a credential for no vault
                    throw error
                }
                print("Created vault \(url.path) (a key sealed by systemd-creds into \(file.path), never written in the clear).")
                print("In the service's unit: LoadCredentialEncrypted=\(SystemdCredential.name):\(file.path)")
                return
            }
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
