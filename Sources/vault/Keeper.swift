import ArgumentParser
import Foundation
import VaultCrypto
import VaultSession
import VaultStore
import VaultSync

extension VaultCommand {
    /// `vault keeper add|remove|list`: the vault's key slots, each a way in with a key of its own.
    struct Keeper: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keeper",
            abstract: "Add, remove or list the vault's key slots: a keyring, a systemd credential, a key file.",
            discussion: """
                Slot 0 is the vault's own credential (its passphrase or key file), kept as the recovery \
                route. Each slot added is one more way in, with a new random key of its own: the desktop \
                keyring over the Secret Service API (gnome-keyring, KeePassXC), so a desktop login \
                unlocks the vault with no prompt; a systemd credential sealed to this host or its TPM \
                (`LoadCredentialEncrypted=vault.key:FILE` in a service); a key file (a CI secret, a \
                recovery key for a passphrase vault). Removing a slot leaves every other way in as it \
                was. While the keyring is unlocked any process of the same user can read its item.
                """,
            subcommands: [Add.self, Remove.self, List.self])

        /// The keepers there are.
        enum Kind: String, CaseIterable, ExpressibleByArgument {
            case secretService = "secret-service"
            case systemdCreds = "systemd-creds"
            case keyFile = "key-file"
            case tpm2
            /// Not a keeper: a second way in for a person, on a key-file vault.
            case passphrase
        }

        struct Add: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "add",
                abstract: "Add a key slot whose new key a keeper holds.",
                discussion: """
                    Unlocks with the vault's credential as every command does, then makes a new random \
                    key, hands it to the keeper and adds a slot it opens. Examples:
                      vault keeper add secret-service                        # the desktop keyring
                      vault keeper add systemd-creds /etc/credstore.encrypted/vault.key --systemd-creds-key host
                      vault keeper add key-file /media/usb/vault.recovery    # a new key file, mode 0600
                      vault keeper add tpm2 /var/lib/vault/vault.tpm2 --tpm2-pin --tpm2-pcrs 7
                      vault keeper add passphrase     # a key-file vault: a passphrase as well (one per vault)
                    """)
            @OptionGroup var global: GlobalOptions
            @OptionGroup var credentials: CredentialOptions
            @Argument(help: "The keeper: secret-service, systemd-creds, key-file, tpm2, or passphrase (a key-file vault's second way in).")
            var keeper: Kind
            @Argument(help: ArgumentHelp("systemd-creds, key-file, tpm2: the new file to write.", valueName: "file")) var file: String?
            @Flag(help: "tpm2: the key also needs a PIN (asked twice, or $VAULT_NEW_TPM2_PIN); the TPM counts wrong ones.")
            var tpm2Pin = false
            @Option(
                help: ArgumentHelp(
                    "tpm2: the SHA-256 PCRs the key is sealed to, e.g. 7 (Secure Boot state); it opens only while they keep their values.",
                    valueName: "list"))
            var tpm2Pcrs: String?
            @Option(
                help: ArgumentHelp(
                    "systemd-creds: what it seals to: \(SystemdCredential.Sealing.allCases.map(\.rawValue).joined(separator: ", ")).",
                    valueName: "key"))
            var systemdCredsKey: SystemdCredential.Sealing = .auto

            func validate() throws {
                switch keeper {
                case .secretService, .passphrase:
                    if file != nil { throw ValidationError("\(keeper.rawValue) takes no file") }
                case .systemdCreds, .keyFile, .tpm2:
                    if file == nil { throw ValidationError("\(keeper.rawValue) needs the new file to write") }
                }
                if keeper != .systemdCreds && systemdCredsKey != .auto {
                    throw ValidationError("--systemd-creds-key goes with systemd-creds")
                }
                if keeper != .tpm2 && (tpm2Pin || tpm2Pcrs != nil) {
                    throw ValidationError("--tpm2-pin and --tpm2-pcrs go with tpm2")
                }
                _ = try pcrs()
            }

            /// The PCRs of --tpm2-pcrs (0 to 23, each once).
            func pcrs() throws -> [Int] {
                guard let tpm2Pcrs else { return [] }
                let numbers = tpm2Pcrs.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard !numbers.isEmpty, numbers.allSatisfy({ $0.map { (0...23).contains($0) } ?? false }) else {
                    throw ValidationError("--tpm2-pcrs takes PCR numbers from 0 to 23, separated by commas (e.g. 7 or 7,11)")
                }
                return Array(Set(numbers.compactMap { $0 })).sorted()
            }

            /// The PIN for a new TPM key: $VAULT_NEW_TPM2_PIN, else asked twice on the terminal.
            static func newPIN() throws -> SecureBytes? {
                guard
                    case .passphraseBytes(let pin) = try CredentialOptions.passphrase(
                        file: nil, environmentVariable: "VAULT_NEW_TPM2_PIN", prompt: "New TPM PIN: ", confirm: true)
                else { return nil }
                return pin
            }

            func run() async throws {
                try await OpenedVault.with(global, credentials) { opened in try await add(to: opened.vault, unlocking: opened.credential) }
            }

            private func add(to vault: Vault, unlocking credential: VaultCredential) async throws {
                let url = vault.url
                // One keyring item and one systemd credential name per vault: a second slot of
                // either could never be told apart from the first.
                let slots = try await BlockingWork.run { try vault.keySlots.list() }
                if keeper != .keyFile && keeper != .tpm2, let taken = slots.first(where: { $0.keeper == keeper.rawValue }) {
                    throw CommandFailure(.alreadyExists, "\(taken) is kept by \(keeper.rawValue) already: remove it first (`vault keeper remove \(taken.id)`)")
                }
                if keeper == .passphrase {
                    let passphrase = try await BlockingWork.run {
                        try CredentialOptions.passphrase(
                            file: nil, environmentVariable: "VAULT_NEW_PASSPHRASE", prompt: "Passphrase for the new key slot of \(url.path): ", confirm: true)
                    }
                    let slot = try await BlockingWork.run { try vault.keySlots.add(passphrase, unlocking: credential, label: "a passphrase") }
                    print("Added key slot \(slot.id) (a passphrase): it opens \(url.path) from now on; slot 0 stays the recovery route.")
                    return
                }
                let key = try VaultCredential.newKey()
                defer { key.wipe() }
                let slot: KeySlot
                switch keeper {
                case .secretService:
                    let vaultID = vault.vaultID
                    if try await Keeper.keyringOpens(vaultID: vaultID, url: url, global: global) == true {
                        throw CommandFailure(.alreadyExists, "the desktop keyring already holds a key that opens \(url.path)")
                    }
                    let label = "CredentialVault key for \(url.path)"
                    try await BlockingWork.run { try SecretServiceKeeper.store(key, vaultID: vaultID, label: label) }
                    do {
                        slot = try await BlockingWork.run {
                            try vault.keySlots.add(
                                .key(key, source: SecretServiceKeeper.source), unlocking: credential, keeper: SecretServiceKeeper.name,
                                label: "the desktop keyring's default collection")
                        }
                    } catch {
                        _ = try? await BlockingWork.run { try SecretServiceKeeper.remove(vaultID: vaultID) }
                        throw error
                    }
                case .systemdCreds, .keyFile, .tpm2, .passphrase:
                    let target = URL(fileURLWithPath: file ?? "").standardizedFileURL
                    let (sealing, keeper, pcrs) = (systemdCredsKey, keeper, try pcrs())
                    let pin = tpm2Pin ? try await BlockingWork.run { try Self.newPIN() } : nil
                    defer { pin?.wipe() }
                    try await BlockingWork.run {
                        switch keeper {
                        case .systemdCreds: try SystemdCredential.seal(key, to: target, sealing: sealing)
                        case .tpm2: try TPM2Keeper.seal(key, pin: pin, pcrs: pcrs, to: target)
                        default: try Init.writeKey(key, to: target)
                        }
                    }
                    let keeperName: String? =
                        switch keeper {
                        case .systemdCreds: SystemdCredential.keeperName
                        case .tpm2: TPM2Keeper.name
                        default: nil
                        }
                    do {
                        slot = try await BlockingWork.run {
                            try vault.keySlots.add(.key(key, source: target.path), unlocking: credential, keeper: keeperName, label: target.path)
                        }
                    } catch {
                        unlink(target.path)  // a key for no slot
                        throw error
                    }
                }
                print("Added key slot \(slot.id) (\(keeper.rawValue)): it opens \(url.path) from now on; slot 0 stays the recovery route.")
                if keeper == .systemdCreds {
                    print("In the service's unit: LoadCredentialEncrypted=\(SystemdCredential.name):\(slot.label)")
                }
            }
        }

        struct Remove: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "remove", abstract: "Remove a key slot (by number, or by keeper when one slot has it).",
                discussion: """
                    Unlocks with another way in than the slot removed (or --force), removes the slot, \
                    then the keyring's item of a secret-service slot. A systemd credential or key file \
                    of the slot opens nothing any more; delete it yourself. A copy of the vault made \
                    before still opens with the slot's key.
                    """)
            @OptionGroup var global: GlobalOptions
            @OptionGroup var credentials: CredentialOptions
            @Argument(help: ArgumentHelp("The slot: its number, or secret-service, systemd-creds, tpm2.", valueName: "slot")) var slot: String
            @Flag(help: "Remove it even when it is the slot that unlocked the vault here.") var force = false

            func run() async throws {
                let url = global.url
                let facts = try await BlockingWork.run { [global] in try Vault.inspect(at: url, options: global.storeOptions()) }
                guard try Keeper.slot(named: slot, in: facts.keySlots) != nil else {
                    if slot == SecretServiceKeeper.name, case .keyFile = facts.unlockMethod {
                        // A key-file vault's own key kept in the keyring (before key slots).
                        return try await removeSlotZeroCopy(facts)
                    }
                    throw CommandFailure(.noRecord, "\(url.path) has no key slot \(Terminal.printable(slot))")
                }
                try await OpenedVault.with(global, credentials) { opened in try await remove(from: opened.vault) }
            }

            private func remove(from vault: Vault) async throws {
                let url = vault.url
                // The slot as the vault checked it, not as the file said before it was opened.
                let slots = try await BlockingWork.run { try vault.keySlots.list() }
                guard let target = try Keeper.slot(named: slot, in: slots), target.id != 0 else {
                    throw CommandFailure(.noRecord, "\(url.path) has no key slot \(Terminal.printable(slot)) to remove (slot 0 is changed with `vault passwd`)")
                }
                if vault.unlockedBy == target.id && !force {
                    throw CommandFailure(
                        .usage,
                        "\(url.path) was unlocked with \(target) itself: unlock it another way (--key-file, --passphrase-file) to remove it, or --force")
                }
                try await BlockingWork.run { try vault.keySlots.remove(target.id, evenIfUnlockedByIt: true) }
                print("Removed \(target): its key no longer opens \(url.path).")
                let label = Terminal.printable(target.label)
                switch target.keeper {
                case SecretServiceKeeper.name:
                    // The item goes unless it still opens the vault (slot 0's own key, kept there).
                    let vaultID = vault.vaultID
                    do {
                        if try await Keeper.keyringOpens(vaultID: vaultID, url: url, global: global) == false {
                            _ = try await BlockingWork.run { try SecretServiceKeeper.remove(vaultID: vaultID) }
                            print("Removed its key from the desktop keyring.")
                        }
                    } catch {
                        Terminal.printError("vault: warning: could not remove the slot's key from the desktop keyring (\(error)); it opens nothing now")
                    }
                case SystemdCredential.keeperName:
                    print("Delete \(label) and its LoadCredentialEncrypted= line: it opens nothing now.")
                case TPM2Keeper.name:
                    print("The TPM-sealed key \(label) opens nothing now: delete it.")
                default:
                    print("The key file \(label) opens nothing now: delete it.")
                }
            }

            /// Before key slots, `keeper add` kept a copy of a key-file vault's own key: removed
            /// when the vault opens without it (--key-file) or with --force, and only an item that
            /// opens this vault (the header's id is read without the key: an edited id must not
            /// name another vault's item).
            private func removeSlotZeroCopy(_ facts: VaultInspection) async throws {
                let url = facts.url
                let vaultID = facts.vaultID
                if !force {
                    let path = credentials.keyFile ?? ProcessInfo.processInfo.environment["VAULT_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 }
                    guard let path else {
                        throw CommandFailure(
                            .usage,
                            "the keyring may hold the only copy of the key of \(url.path): give the key file that also opens it (--key-file), or --force")
                    }
                    try await BlockingWork.run { [global] in
                        try Vault.open(at: url, credential: .keyFile(URL(fileURLWithPath: path)), options: global.storeOptions()).close()
                    }
                }
                guard let opens = try await Keeper.keyringOpens(vaultID: vaultID, url: url, global: global) else {
                    throw CommandFailure(.noRecord, "the desktop keyring holds no key for \(url.path)")
                }
                guard opens else {
                    throw CommandFailure(
                        .wrongCredential,
                        "the desktop keyring's item for this vault's id does not open \(url.path) (a stale key, or an id changed in the file): nothing was removed; `secret-tool clear application credentialvault vault \(vaultID)` removes it by hand"
                    )
                }
                guard try await BlockingWork.run({ try SecretServiceKeeper.remove(vaultID: vaultID) }) else {
                    throw CommandFailure(.noRecord, "the desktop keyring holds no key for \(url.path)")
                }
                print("Removed the key of \(url.path) from the desktop keyring.")
            }
        }

        struct List: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "List the key slots as the file names them and whether each key is at hand here, without unlocking.",
                discussion: """
                    The slots are read without the key, so not authenticated here: a slot is checked \
                    when it opens the vault, and every slot by `vault verify`.
                    """)
            @OptionGroup var global: GlobalOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                let url = global.url
                let facts = try await BlockingWork.run { [global] in try Vault.inspect(at: url, options: global.storeOptions()) }
                let vaultID = facts.vaultID
                let keyring: String
                do {
                    if let key = try await BlockingWork.run({ try SecretServiceKeeper.lookup(vaultID: vaultID) }) {
                        key.wipe()
                        keyring = "present"
                    } else {
                        keyring = "absent"
                    }
                } catch {
                    keyring = "unavailable: \(error)"
                }
                let environment = ProcessInfo.processInfo.environment
                var rows: [(slot: KeySlot, here: String)] = []
                for slot in facts.keySlots {
                    let here: String
                    switch (slot.id, slot.keeper) {
                    case (0, _):
                        if slot.kind == .passphrase {
                            here = "asked for"
                        } else if let path = environment["VAULT_KEY_FILE"], !path.isEmpty {
                            here = "$VAULT_KEY_FILE \(path)"
                        } else if let file = SystemdCredential.keyFile(), !facts.keySlots.contains(where: { $0.keeper == SystemdCredential.keeperName }) {
                            here = "systemd credential \(file.path)"
                        } else if keyring == "present" && !facts.keySlots.contains(where: { $0.keeper == SecretServiceKeeper.name }) {
                            here = "the desktop keyring"
                        } else {
                            here = "not here (give --key-file)"
                        }
                    case (_, SecretServiceKeeper.name?): here = "keyring item \(keyring)"
                    case (_, TPM2Keeper.name?):
                        here = FileManager.default.fileExists(atPath: slot.label) ? "sealed file present (the TPM opens it)" : "sealed file absent"
                    case (_, SystemdCredential.keeperName?):
                        here =
                            SystemdCredential.keyFile().map { "systemd credential \($0.path)" }
                            ?? (FileManager.default.fileExists(atPath: slot.label) ? "sealed file present" : "sealed file absent")
                    case _ where slot.kind == .passphrase: here = "asked for"
                    default: here = FileManager.default.fileExists(atPath: slot.label) ? "file present" : "file absent"
                    }
                    rows.append((slot, here))
                }
                if output.json {
                    print(JSONValue.array(rows.map { JSONValue.keySlot($0.slot, here: $0.here) }).rendered, terminator: "")
                } else {
                    for row in rows {
                        let keeper = row.slot.keeper ?? (row.slot.kind == .passphrase ? "passphrase" : "key file")
                        print(
                            "slot \(row.slot.id)  \(Terminal.printable(keeper).padding(toLength: 15, withPad: " ", startingAt: 0)) \(Terminal.printable(row.slot.label))  [\(row.here)]"
                        )
                    }
                }
            }
        }

        /// Whether the desktop keyring's item for `vaultID` opens the vault at `url` (opened and
        /// closed, off the cooperative pool); nil when there is no item. Throws when the keyring
        /// cannot be asked.
        static func keyringOpens(vaultID: String, url: URL, global: GlobalOptions) async throws -> Bool? {
            try await BlockingWork.run {
                guard let key = try SecretServiceKeeper.lookup(vaultID: vaultID) else { return nil }
                defer { key.wipe() }
                do {
                    try Vault.open(at: url, credential: .key(key, source: SecretServiceKeeper.source), options: global.storeOptions()).close()
                    return true
                } catch let error as VaultError where error.code == .wrongCredential {
                    return false
                }
            }
        }

        /// The slot `name` means: a number, or the keeper of exactly one slot.
        static func slot(named name: String, in slots: [KeySlot]) throws -> KeySlot? {
            if let id = Int64(name) { return slots.first { $0.id == id } }
            let kept = slots.filter { $0.keeper == name }
            guard kept.count <= 1 else {
                throw CommandFailure(.usage, "\(kept.count) slots are kept by \(name): name one by its number (`vault keeper list`)")
            }
            return kept.first
        }
    }
}
