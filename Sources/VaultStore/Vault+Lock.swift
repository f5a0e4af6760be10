import Foundation
import GRDB
import Logging
import VaultCrypto

// MARK: - Lock and unlock

extension Vault {
    /// Drops every key that seals or opens a value from memory (zeroed) but keeps the file
    /// open. Reads and writes of sealed values throw ``VaultError/Code/closed`` until
    /// ``unlock(with:)``. The row authenticator stays (it opens nothing), so a locked vault
    /// still records and checks its sessions' state.
    public func lock() {
        keyring.wipeSealingKeys()
        logger.info("locked vault", metadata: ["path": "\(path)"])
    }

    /// Whether the keys are out of memory (locked or closed).
    public var isLocked: Bool { keyring.isWiped }

    /// Loads the vault key again from the passphrase or key file. One key derivation;
    /// a wrong credential throws ``VaultError/Code/wrongCredential`` and changes nothing.
    public func unlock(with credential: VaultCredential) throws {
        let meta: UnlockRecord
        do {
            guard let record = try withOpenPool({ pool in try pool.read { try UnlockRecord.fetch($0, path: self.path) } }) else {
                throw VaultError(.damaged, "\(path) has no vault header row", path: path)
            }
            meta = record
        } catch {
            throw VaultError.storage(error, while: "reading the key record", path: path)
        }
        let keys = try Self.unlockVaultKeys(meta, credential: credential, path: path)
        keyring.replaceVaultKey(keys.current)
        keyring.setPendingVaultKey(keys.pending)
        logger.info("unlocked vault", metadata: ["path": "\(path)"])
    }

    /// Whether the keys this process holds still open the vault: false once another process
    /// replaced them (`rotate-key`, or `passwd` without keeping the keys). One point read.
    /// Throws `.closed` when the keys were wiped.
    public func holdsCurrentKey() throws -> Bool {
        let held = try keyring.vaultKey().id
        let meta = try read("reading the key record") { db in try UnlockRecord.fetch(db, path: self.path) }
        guard let meta else { throw VaultError(.damaged, "\(path) has no vault header row", path: path) }
        return meta.vaultKeyID == held || meta.pendingVaultKeyID == held
    }
}
