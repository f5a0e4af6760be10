import ArgumentParser
import Foundation
import VaultCrypto
import VaultSession
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

                --keeper secret-service: no key file at all on a desktop: a new key kept in the \
                desktop keyring (gnome-keyring, KeePassXC), so a desktop login unlocks the vault; \
                choose the recovery route at once: --recovery-key-file FILE (move it offline) or \
                --no-recovery.

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

        @Option(help: ArgumentHelp("Keep a new key in this keeper instead of a key file: secret-service (the desktop keyring).", valueName: "keeper"))
        var keeper: Keeper.Kind?

        @Option(
            help: ArgumentHelp(
                "With --keeper: also write the key to this new file (mode 0600), the recovery route to keep offline.", valueName: "file"))
        var recoveryKeyFile: String?

        @Flag(help: "With --keeper: no recovery route (if the keyring loses the item, the vault is lost).") var noRecovery = false

        func validate() throws {
            if keeper != nil {
                if credentials.keyFile != nil || credentials.passphraseFile != nil || systemdCredential != nil || kdf != nil {
                    throw ValidationError("--keeper makes the vault's key itself: give no --key-file, --passphrase-file, --kdf or --systemd-creds")
                }
                guard (recoveryKeyFile != nil) != noRecovery else {
                    throw ValidationError("--keeper needs a recovery route: --recovery-key-file FILE (kept offline), or --no-recovery")
                }
            } else if recoveryKeyFile != nil || noRecovery {
                throw ValidationError("--recovery-key-file and --no-recovery go with --keeper")
            }
            if kdf != nil && (credentials.keyFile != nil || systemdCredential != nil) {
                throw ValidationError("--kdf applies to a passphrase; a key needs no key stretching")
            }
            if systemdCredential == nil && sealing != .auto {
                throw ValidationError("--systemd-creds-key goes with --systemd-creds")
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
            if keeper != nil {
                try await initInKeyring(url)
                return
            }
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

        /// A new key kept by the desktop keyring, then the vault: nothing is created unless the
        /// keyring took the key and gave it back. With a recovery key file, the file is the
        /// vault's own key (slot 0) and the keyring's key a slot of its own (slot 1): the two
        /// are different keys, and the keyring never holds the recovery key.
        func initInKeyring(_ url: URL) async throws {
            let key = try VaultCredential.newKey()
            defer { key.wipe() }
            let recovery = recoveryKeyFile.map { URL(fileURLWithPath: $0) }
            let options = global.storeOptions()
            if let recovery { try VaultCredential.createKeyFile(at: recovery) }  // never over an existing file
            // The vault id is the file's: made first, then the key is kept under it.
            let vaultID: String
            do {
                vaultID = try await BlockingWork.run {
                    guard let recovery else {
                        let vault = try Vault.create(at: url, credential: .key(key), options: options)
                        defer { vault.close() }
                        return vault.vaultID
                    }
                    let vault = try Vault.create(at: url, credential: .keyFile(recovery), options: options)
                    do {
                        try vault.keySlots.add(
                            .key(key, source: SecretServiceKeeper.source), unlocking: .keyFile(recovery), keeper: SecretServiceKeeper.name,
                            label: "the desktop keyring's default collection")
                    } catch {
                        // The vault made here, and only it (a failed create removes its own file).
                        vault.close()
                        for suffix in ["", "-wal", "-shm"] { unlink(url.path + suffix) }
                        throw error
                    }
                    defer { vault.close() }
                    return vault.vaultID
                }
            } catch {
                if let recovery { unlink(recovery.path) }
                throw error
            }
            do {
                let label = "CredentialVault key for \(url.path)"
                try await BlockingWork.run { try SecretServiceKeeper.store(key, vaultID: vaultID, label: label) }
            } catch {
                // A vault whose key nothing keeps is no vault: removed, with the recovery file.
                for suffix in ["", "-wal", "-shm"] { unlink(url.path + suffix) }
                if let recovery { unlink(recovery.path) }
                throw CommandFailure(.failure, "\(error): nothing was created")
            }
            if let recovery {
                print("Created vault \(url.path) (slot 1: a key in the desktop keyring).")
                print("Wrote the recovery key file \(recovery.path) (slot 0, mode 0600): move it offline; `--key-file` with it opens the vault.")
            } else {
                print("Created vault \(url.path) (its key in the desktop keyring).")
            }
        }

        /// Writes `key` to a new file, mode 0600; refuses to overwrite.
        static func writeKey(_ key: SecureBytes, to file: URL) throws {
            let fd = open(file.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw CommandFailure(errno == EEXIST ? .alreadyExists : .storage, "cannot create \(file.path): \(String(cString: strerror(errno)))")
            }
            defer { close(fd) }
            fchmod(fd, 0o600)
            let written = try key.withUnsafeBytes { bytes in bytes.baseAddress.map { write(fd, $0, bytes.count) } ?? -1 }
            guard written == key.count, fsync(fd) == 0 else {
                unlink(file.path)
                throw CommandFailure(.storage, "cannot write \(file.path)")
            }
        }
    }
}
