import Synchronization
import VaultCrypto

/// The unlocked keys of one open vault: the vault key and the data keys of the accounts
/// used so far. All of it lives in guarded memory and is wiped by ``wipe()``.
final class Keyring: Sendable {
    let vaultID: [UInt8]
    private let state: Mutex<State>

    private struct State {
        var vaultKey: SymmetricKey?
        var accountKeys: [String: SymmetricKey] = [:]
    }

    init(vaultID: [UInt8], vaultKey: SymmetricKey) {
        self.vaultID = vaultID
        self.state = Mutex(State(vaultKey: vaultKey))
    }

    func vaultKey() throws -> SymmetricKey {
        guard let key = state.withLock({ $0.vaultKey }) else {
            throw VaultError(.closed, "the vault is closed or locked; open it again with its passphrase or key file")
        }
        return key
    }

    func cachedAccountKey(_ account: String) -> SymmetricKey? {
        state.withLock { $0.accountKeys[account] }
    }

    func remember(_ key: SymmetricKey, for account: String) {
        state.withLock { $0.accountKeys[account] = key }
    }

    /// Forgets and wipes one account's key (after the account is removed).
    func forget(account: String) {
        let key = state.withLock { $0.accountKeys.removeValue(forKey: account) }
        key?.wipe()
    }

    /// Replaces the vault key (after a key rotation).
    func replaceVaultKey(_ key: SymmetricKey) {
        let old = state.withLock { state -> SymmetricKey? in
            let old = state.vaultKey
            state.vaultKey = key
            return old
        }
        old?.wipe()
    }

    /// Wipes every key. Later use throws `.closed`.
    func wipe() {
        let keys = state.withLock { state -> [SymmetricKey] in
            let keys = Array(state.accountKeys.values) + (state.vaultKey.map { [$0] } ?? [])
            state = State(vaultKey: nil)
            return keys
        }
        keys.forEach { $0.wipe() }
    }

    var isWiped: Bool { state.withLock { $0.vaultKey == nil } }
}
