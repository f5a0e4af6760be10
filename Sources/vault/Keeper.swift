import ArgumentParser
import Foundation
import VaultCrypto
import VaultSession
import VaultStore

extension VaultCommand {
    /// `vault keeper add|remove|list`: who holds the key of a key-file vault besides its file.
    struct Keeper: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keeper",
            abstract: "Keep a key-file vault's key in the desktop keyring (or see who keeps it).",
            discussion: """
                A vault unlocked by a key file opens with its 32-byte key, wherever it is read from: \
                --key-file or $VAULT_KEY_FILE, a systemd credential (`vault init --systemd-creds`), \
                or the desktop keyring over the Secret Service API (gnome-keyring, KeePassXC). With the \
                key in the keyring, a desktop login unlocks the vault with no prompt and the key file \
                can go offline as the recovery route. While the keyring is unlocked any process of \
                the same user can read the item.
                """,
            subcommands: [Add.self, Remove.self, List.self])

        /// The keepers there are.
        enum Kind: String, CaseIterable, ExpressibleByArgument {
            case secretService = "secret-service"
        }

        struct Add: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "add",
                abstract: "Put the vault's key into a keeper (the key file proves it; it can go offline afterwards).",
                discussion: """
                    Example:
                      vault keeper add secret-service --key-file ~/vault.key
                      mv ~/vault.key /media/usb/   # the recovery route: `--key-file` opens the vault again
                    """)
            @OptionGroup var global: GlobalOptions
            @OptionGroup var credentials: CredentialOptions
            @Argument(help: "The keeper: secret-service.") var keeper: Kind

            func run() async throws {
                let url = global.url
                let facts = try Vault.inspect(at: url, options: global.storeOptions())
                guard case .keyFile = facts.unlockMethod else {
                    throw CommandFailure(
                        .usage, "\(url.path) is unlocked with a passphrase: only a key-file vault's key can be kept (key slots are not built yet)")
                }
                // The key as the vault opens with it: checked by opening before it is kept.
                let credential = try credentials.credential(for: url, unlock: facts.unlockMethod, vaultID: facts.vaultID)
                let vault = try Vault.open(at: url, credential: credential, options: global.storeOptions())
                vault.close()
                let key = try Keeper.keyBytes(of: credential)
                defer { key.wipe() }
                let label = "CredentialVault key for \(url.path)"
                try await BlockingWork.run { try SecretServiceKeeper.store(key, vaultID: facts.vaultID, label: label) }
                print("The desktop keyring now holds the key of \(url.path); keep the key file offline as the recovery route.")
            }
        }

        struct Remove: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "remove", abstract: "Remove the vault's key from a keeper.",
                discussion: """
                    Refused unless the vault opens without that keeper (--key-file or $VAULT_KEY_FILE), \
                    or --force: the keeper may hold the only copy of the key.
                    """)
            @OptionGroup var global: GlobalOptions
            @OptionGroup var credentials: CredentialOptions
            @Argument(help: "The keeper: secret-service.") var keeper: Kind
            @Flag(help: "Remove it even if nothing else here opens the vault.") var force = false

            func run() async throws {
                let url = global.url
                let facts = try Vault.inspect(at: url, options: global.storeOptions())
                if !force {
                    let path = credentials.keyFile ?? ProcessInfo.processInfo.environment["VAULT_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 }
                    guard let path else {
                        throw CommandFailure(
                            .usage,
                            "the keyring may hold the only copy of the key of \(url.path): give the key file that also opens it (--key-file), or --force")
                    }
                    let vault = try Vault.open(at: url, credential: .keyFile(URL(fileURLWithPath: path)), options: global.storeOptions())
                    vault.close()
                } else {
                    // The header's id is read without the key: the item removed must be the one
                    // that opens this vault, never another vault's that an edited id names.
                    guard let key = try await BlockingWork.run({ try SecretServiceKeeper.lookup(vaultID: facts.vaultID) }) else {
                        throw CommandFailure(.noRecord, "the desktop keyring holds no key for \(url.path)")
                    }
                    do {
                        try Vault.open(at: url, credential: .key(key, source: "the desktop keyring"), options: global.storeOptions()).close()
                    } catch let error as VaultError where error.code == .wrongCredential {
                        throw CommandFailure(
                            .wrongCredential,
                            "the desktop keyring's item for this vault's id does not open \(url.path) (a stale key, or an id changed in the file): nothing was removed; `secret-tool clear application credentialvault vault \(facts.vaultID)` removes it by hand"
                        )
                    }
                }
                guard try await BlockingWork.run({ try SecretServiceKeeper.remove(vaultID: facts.vaultID) }) else {
                    throw CommandFailure(.noRecord, "the desktop keyring holds no key for \(url.path)")
                }
                print("Removed the key of \(url.path) from the desktop keyring.")
            }
        }

        struct List: AsyncParsableCommand, VaultSubcommand {
            static let configuration = CommandConfiguration(
                commandName: "list", abstract: "Say where this vault's key can be read from here, without unlocking it.")
            @OptionGroup var global: GlobalOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                let url = global.url
                let facts = try Vault.inspect(at: url, options: global.storeOptions())
                guard case .keyFile = facts.unlockMethod else {
                    if output.json {
                        print(JSONValue.array([]).rendered, terminator: "")
                    } else {
                        print("\(url.path) is unlocked with a passphrase: no keeper holds a key for it.")
                    }
                    return
                }
                var rows: [(keeper: String, state: String, detail: String)] = []
                let environment = ProcessInfo.processInfo.environment
                if let path = environment["VAULT_KEY_FILE"], !path.isEmpty {
                    rows.append(("key-file", "present", path))
                }
                if let credential = SystemdCredential.keyFile() {
                    rows.append(("systemd-creds", "present", credential.path))
                }
                do {
                    if let key = try await BlockingWork.run({ try SecretServiceKeeper.lookup(vaultID: facts.vaultID) }) {
                        key.wipe()
                        rows.append(("secret-service", "present", "the default collection"))
                    } else {
                        rows.append(("secret-service", "absent", "no item for this vault"))
                    }
                } catch {
                    rows.append(("secret-service", "unavailable", "\(error)"))
                }
                if output.json {
                    let items: [JSONValue] = rows.map { ["keeper": .string($0.keeper), "state": .string($0.state), "detail": .string($0.detail)] }
                    print(JSONValue.array(items).rendered, terminator: "")
                } else {
                    for row in rows { print("\(row.keeper.padding(toLength: 16, withPad: " ", startingAt: 0))\(row.state): \(row.detail)") }
                }
            }
        }

        /// The 32 bytes of a key credential (a key file read and checked, or a key in memory).
        static func keyBytes(of credential: VaultCredential) throws -> SecureBytes {
            guard let key = try credential.keyCopy() else { throw CommandFailure(.usage, "a passphrase is not a key") }
            return key
        }
    }
}
