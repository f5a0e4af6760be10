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
                Unlocks with the current passphrase or key file, replaces the vault key and every \
                account key (re-sealing every value, as `vault rotate-key` does), then wraps the new \
                vault key under the new credential. A copy of the vault made before the change still \
                opens with the old passphrase, but holds nothing written afterwards, and nothing \
                written afterwards opens with it. --keep-keys only re-wraps the vault key (one key \
                derivation, whatever the vault's size): then an old copy and the old passphrase \
                open everything written until the keys are replaced. The new passphrase is asked \
                twice on the terminal, or read from --new-passphrase-file or $VAULT_NEW_PASSPHRASE. \
                The cost stays what it was unless --kdf says otherwise.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions

        @Option(help: ArgumentHelp("Read the new passphrase from this file (one trailing newline is ignored).", valueName: "file"))
        var newPassphraseFile: String?
        @Option(help: ArgumentHelp("Unlock from now on with this key file (created with 32 random bytes if missing).", valueName: "file"))
        var newKeyFile: String?
        @Option(help: ArgumentHelp("The Argon2id cost for the new passphrase: interactive, moderate or sensitive.", valueName: "level"))
        var kdf: KDFLevel?
        @Flag(help: "Only re-wrap the vault key; keep it and the account keys (see above for what that leaves open).")
        var keepKeys = false

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
                try opened.vault.maintenance.changeCredential(
                    from: opened.credential, to: credential, cost: cost ?? .interactive,
                    replacingKeys: !keepKeys)
                try Self.updateKeepers(of: facts, to: credential)
            }
            let what =
                newKeyFile.map { "The vault now opens with the key file \($0), no longer with the old credential." }
                ?? "Changed the passphrase: the vault no longer opens with the old one."
            print(
                keepKeys
                    ? what + " The vault key was kept: a copy of the vault made before now still opens with the old credential,"
                        + " and so does everything written from now on until the keys are replaced (`vault rotate-key`)."
                    : what + " The vault key and every account key were replaced: a copy of the vault made before now still"
                        + " opens with the old credential, but nothing written from now on does.")
        }

        /// The keepers of the old key follow the change: the desktop keyring's item is replaced
        /// by the new key (a key file) or removed (a passphrase); a systemd credential, which
        /// only root can seal, is named to be sealed again.
        static func updateKeepers(of facts: VaultInspection, to credential: VaultCredential) throws {
            guard case .keyFile = facts.unlockMethod else { return }
            if let sealed = SystemdCredential.keyFile() {
                Terminal.printError(
                    "vault: warning: the systemd credential \(SystemdCredential.name) (\(sealed.path)) still holds the old key: seal the new one with `systemd-creds encrypt --name=\(SystemdCredential.name)`"
                )
            }
            // A keyring that cannot be asked (none on a server) kept nothing to update.
            let held: SecureBytes? = (try? SecretServiceKeeper.lookup(vaultID: facts.vaultID)) ?? nil
            guard let held else { return }
            held.wipe()
            if let key = try credential.keyCopy() {
                defer { key.wipe() }
                try SecretServiceKeeper.store(key, vaultID: facts.vaultID, label: "CredentialVault key for \(facts.url.path)")
                print("The desktop keyring now holds the new key.")
            } else {
                _ = try SecretServiceKeeper.remove(vaultID: facts.vaultID)
                print("Removed the old key from the desktop keyring: a passphrase vault has no key to keep.")
            }
        }
    }
}
