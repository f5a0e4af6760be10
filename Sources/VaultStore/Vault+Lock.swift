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
        let meta: VaultKeys.UnlockRecord
        do {
            guard let record = try withOpenPool({ pool in try pool.read { try VaultKeys.UnlockRecord.fetch($0, path: self.path) } }) else {
                throw VaultError(.damaged, "\(path) has no vault header row", path: path)
            }
            meta = record
        } catch {
            throw VaultError.storage(error, while: "reading the key record", path: path)
        }
        let keys = try VaultKeys.unlockVaultKeys(meta, credential: credential, path: path)
        keyring.replaceVaultKey(keys.current)
        keyring.setPendingVaultKey(keys.pending)
        logger.info("unlocked vault", metadata: ["path": "\(path)"])
    }

    /// Whether the keys this process holds still open the vault: false once another process
    /// replaced them (`rotate-key`, or `passwd` without keeping the keys). Decided by the vault
    /// header row's MAC, not by the key id it names: an edited or put-back row can make this
    /// answer false (the caller locks), never true for keys the vault no longer uses. One point
    /// read. Throws `.closed` when the keys were wiped, `.damaged` for a row that fails its MAC.
    public func holdsCurrentKey() throws -> Bool {
        _ = try keyring.vaultKey()
        let integrity = self.integrity
        return try read("reading the key record") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM vault_meta WHERE singleton = 1") else {
                throw VaultError(.damaged, "\(self.path) has no vault header row", path: self.path)
            }
            switch try integrity.verdict(row, in: .vaultMeta, db) {
            case .authentic: return true
            case .unknownKey: return false
            case .changed(let columns, let reason):
                throw VaultError(
                    .damaged, "vault_meta.\(columns.joined(separator: ", vault_meta.")) \(reason): \(self.path) is damaged or was tampered with",
                    path: self.path)
            }
        }
    }
}
