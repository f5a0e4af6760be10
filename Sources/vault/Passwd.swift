import ArgumentParser
import Foundation
import VaultCrypto
import VaultSession
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
            let facts = try await BlockingWork.run { [global] in try Vault.inspect(at: url, options: global.storeOptions()) }
            var stretch = kdf?.parameters
            if stretch == nil, case .passphrase(let current) = facts.unlockMethod { stretch = current }
            let cost = stretch ?? .interactive
            let (newKeyFile, newPassphraseFile, keepKeys) = (self.newKeyFile, self.newPassphraseFile, self.keepKeys)
            // Slot 0's own credential, not a slot's keeper: passwd replaces slot 0.
            let (old, new, resealed) = try await OpenedVault.with(global, credentials, slotKeepers: false) { opened in
                guard opened.vault.unlockedBy == 0 else {
                    throw CommandFailure(
                        .usage,
                        "passwd changes slot 0, the vault's own credential: unlock with it (--key-file, --passphrase-file), not with slot \(opened.vault.unlockedBy)"
                    )
                }
                let vault = opened.vault
                // Every slot is sealed again with the new credential: the slots as the vault
                // checked them, each key read from its keeper before anything changes.
                let slots = try await BlockingWork.run { try vault.keySlots.list() }
                let slotKeys = try await BlockingWork.run { try Self.slotKeys(of: slots, vaultID: facts.vaultID) }
                defer { Self.wipe(slotKeys) }
                let credential = try await BlockingWork.run { () -> VaultCredential in
                    if let newKeyFile {
                        let keyURL = URL(fileURLWithPath: newKeyFile)
                        if !FileManager.default.fileExists(atPath: keyURL.path) { try VaultCredential.createKeyFile(at: keyURL) }
                        return .keyFile(keyURL)
                    }
                    return try CredentialOptions.passphrase(
                        file: newPassphraseFile, environmentVariable: "VAULT_NEW_PASSPHRASE", prompt: "New passphrase for \(url.path): ", confirm: true)
                }
                let current = opened.credential
                _ = try await BlockingWork.run {
                    try vault.maintenance.changeCredential(
                        from: current, to: credential, cost: cost, replacingKeys: !keepKeys, slotKeys: slotKeys)
                }
                return (current, credential, slotKeys.keys.sorted())
            }
            // After the vault is closed, and off the cooperative pool: the keyring is a D-Bus
            // round trip that may wait for a prompt.
            _ = try? await BlockingWork.run { Self.updateKeepers(of: facts, from: old, to: new) }
            let what =
                newKeyFile.map { "The vault now opens with the key file \($0), no longer with the old credential." }
                ?? "Changed the passphrase: the vault no longer opens with the old one."
            if !resealed.isEmpty {
                print(
                    "Sealed key slot\(resealed.count == 1 ? "" : "s") \(resealed.map(String.init).joined(separator: ", ")) again with the new credential: each opens the vault as before."
                )
            }
            print(
                keepKeys
                    ? what + " The vault key was kept: a copy of the vault made before now still opens with the old credential,"
                        + " and so does everything written from now on until the keys are replaced (`vault rotate-key`)."
                    : what + " The vault key and every account key were replaced: a copy of the vault made before now still"
                        + " opens with the old credential, but nothing written from now on does.")
        }

        /// The keepers of slot 0's old key follow the change, best effort (the vault has changed
        /// already: nothing here fails the command). Only a copy of that very key is touched,
        /// compared byte for byte: the desktop keyring's item is replaced by the new key (a key
        /// file) or removed (a passphrase); a systemd credential holding it gets a warning (only
        /// `systemd-creds` as root seals). A slot's key, which the change sealed again, and any
        /// other item stay as they are.
        static func updateKeepers(of facts: VaultInspection, from old: VaultCredential, to credential: VaultCredential) {
            guard let oldKey = try? old.keyCopy() else { return }  // slot 0 was a passphrase: no keeper holds it
            defer { oldKey.wipe() }
            func holdsOldKey(_ key: SecureBytes) -> Bool { (try? ConstantTime.equals(key, oldKey)) == true }
            if let sealed = SystemdCredential.keyFile(), let held = try? SystemdCredential.readKey(sealed) {
                defer { held.wipe() }
                if holdsOldKey(held) {
                    let what =
                        (try? credential.keyCopy()).flatMap { $0 } != nil
                        ? "seal the new key with `systemd-creds encrypt --name=\(SystemdCredential.name)`" : "the vault is now opened with a passphrase"
                    Terminal.printError("vault: warning: the systemd credential \(SystemdCredential.name) (\(sealed.path)) holds the old key: \(what)")
                }
            }
            let fix =
                if case .keyFile(let file) = credential {
                    "`vault keeper add secret-service --key-file \(file.path)` replaces it"
                } else {
                    "remove it with `secret-tool clear application credentialvault vault \(facts.vaultID)`"
                }
            let fromKeyring: Bool = if case .key(_, SecretServiceKeeper.source) = old { true } else { false }
            let held: SecureBytes?
            do {
                held = try SecretServiceKeeper.lookup(vaultID: facts.vaultID)
            } catch {
                // No keyring here (a server) is nothing to update; the one the old key came from
                // may hold it still.
                if fromKeyring { Terminal.printError("vault: warning: could not update the desktop keyring's copy of the old key (\(error)): \(fix)") }
                return
            }
            guard let held else { return }
            defer { held.wipe() }
            guard holdsOldKey(held) else { return }
            do {
                if let key = try credential.keyCopy() {
                    defer { key.wipe() }
                    try SecretServiceKeeper.store(key, vaultID: facts.vaultID, label: "CredentialVault key for \(facts.url.path)")
                    print("The desktop keyring now holds the new key.")
                } else {
                    _ = try SecretServiceKeeper.remove(vaultID: facts.vaultID)
                    print("Removed the old key from the desktop keyring: a passphrase vault has no key to keep.")
                }
            } catch {
                Terminal.printError("vault: warning: the desktop keyring still holds the old key (\(error)): \(fix)")
            }
        }

        /// The key of every slot but 0, read from where the slot says it is kept: the desktop
        /// keyring, the systemd credential (the service's, else its sealed file opened here),
        /// the key file. Throws naming a slot whose key cannot be read, with how to go on.
        static func slotKeys(of slots: [KeySlot], vaultID: String) throws -> [Int64: VaultCredential] {
            var keys: [Int64: VaultCredential] = [:]
            do {
                for slot in slots where slot.id != 0 {
                    do {
                        switch (slot.kind, slot.keeper) {
                        case (.passphrase, _):
                            keys[slot.id] = try CredentialOptions.passphrase(
                                file: nil, environmentVariable: "VAULT_SLOT_PASSPHRASE", prompt: "Passphrase of key slot \(slot.id): ", confirm: false)
                        case (_, SecretServiceKeeper.name?):
                            guard let key = try SecretServiceKeeper.lookup(vaultID: vaultID) else {
                                throw CommandFailure(.noRecord, "the desktop keyring holds no key for this vault")
                            }
                            keys[slot.id] = .key(key, source: SecretServiceKeeper.source)
                        case (_, TPM2Keeper.name?):
                            let key = try TPM2Keeper.unseal(URL(fileURLWithPath: slot.label)) {
                                try TPM2Keeper.pin(prompt: "TPM PIN for \(slot): ")
                            }
                            keys[slot.id] = .key(key, source: slot.label)
                        case (_, SystemdCredential.keeperName?):
                            let key =
                                try SystemdCredential.keyFile().map(SystemdCredential.readKey) ?? SystemdCredential.unseal(URL(fileURLWithPath: slot.label))
                            keys[slot.id] = .key(key, source: slot.label)
                        default:
                            keys[slot.id] = .keyFile(URL(fileURLWithPath: slot.label))
                        }
                    } catch {
                        throw CommandFailure(
                            .usage,
                            "\(slot) must be sealed again with the new credential, and its key cannot be read here (\(error)): nothing was changed; remove the slot first (`vault keeper remove \(slot.id)`) and add it again afterwards"
                        )
                    }
                }
            } catch {
                Self.wipe(keys)
                throw error
            }
            return keys
        }

        /// Zeroes the slot keys and passphrases ``slotKeys(of:vaultID:)`` read.
        static func wipe(_ keys: [Int64: VaultCredential]) {
            for credential in keys.values {
                switch credential {
                case .key(let bytes, _), .passphraseBytes(let bytes): bytes.wipe()
                case .keyFile: break
                }
            }
        }
    }
}
