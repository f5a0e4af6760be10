import VaultSync
import VaultCrypto

/// The unlocked keys of one open vault: the vault key (and, during a key rotation, the next
/// one) and the data keys of the accounts used so far, found by key id. All of it lives in
/// guarded memory and is wiped by ``wipe()``.
final class Keyring: Sendable {
    let vaultID: [UInt8]
    private let state: Locked<State>

    private struct State {
        var vaultKey: SymmetricKey?
        var pendingVaultKey: SymmetricKey?
        /// Data keys by key id, and the account each belongs to.
        var dataKeys: [UInt32: (account: String, key: SymmetricKey)] = [:]
    }

    init(vaultID: [UInt8], vaultKey: SymmetricKey, pendingVaultKey: SymmetricKey? = nil) {
        self.vaultID = vaultID
        self.state = Locked(State(vaultKey: vaultKey, pendingVaultKey: pendingVaultKey))
    }

    /// The current vault key. Throws `.closed` once the keys were wiped.
    func vaultKey() throws -> SymmetricKey {
        guard let key = state.withLock({ $0.vaultKey }) else {
            throw VaultError(.closed, "the vault is closed or locked; open or unlock it with its passphrase or key file")
        }
        return key
    }

    /// A vault key (current or, during a rotation, the next one) by id.
    func vaultKey(id: UInt32) throws -> SymmetricKey {
        let keys = state.withLock { ($0.vaultKey, $0.pendingVaultKey) }
        guard let current = keys.0 else { return try vaultKey() }
        if current.id == id { return current }
        if let pending = keys.1, pending.id == id { return pending }
        throw VaultError(.closed, "the vault key was rotated by another process; unlock the vault again")
    }

    func pendingVaultKey() -> SymmetricKey? { state.withLock { $0.pendingVaultKey } }

    func setPendingVaultKey(_ key: SymmetricKey?) {
        let old = state.withLock { state -> SymmetricKey? in
            defer { state.pendingVaultKey = key }
            return state.pendingVaultKey
        }
        if let old, old.id != key?.id { old.wipe() }
    }

    func dataKey(id: UInt32) -> SymmetricKey? { state.withLock { $0.dataKeys[id]?.key } }

    func remember(_ key: SymmetricKey, for account: String) {
        state.withLock { $0.dataKeys[key.id] = (account, key) }
    }

    /// Forgets and wipes every data key of one account (after it was removed).
    func forget(account: String) {
        let keys = state.withLock { state -> [SymmetricKey] in
            let ids = state.dataKeys.filter { $0.value.account == account }.map(\.key)
            return ids.compactMap { state.dataKeys.removeValue(forKey: $0)?.key }
        }
        keys.forEach { $0.wipe() }
    }

    /// Replaces the vault key (after an unlock or a finished key rotation). Data keys that
    /// were wrapped by another vault key are dropped and unwrapped again when needed.
    func replaceVaultKey(_ key: SymmetricKey) {
        let old = state.withLock { state -> [SymmetricKey] in
            var old: [SymmetricKey] = []
            if let current = state.vaultKey, current.id != key.id { old.append(current) }
            if let pending = state.pendingVaultKey, pending.id != key.id { old.append(pending) }
            if state.pendingVaultKey?.id == key.id { state.pendingVaultKey = nil }
            state.vaultKey = key
            old += state.dataKeys.values.map(\.key)
            state.dataKeys = [:]
            return old
        }
        old.forEach { $0.wipe() }
    }

    /// Wipes every key. Later use throws `.closed`.
    func wipe() {
        let keys = state.withLock { state -> [SymmetricKey] in
            let keys = state.dataKeys.values.map(\.key) + [state.vaultKey, state.pendingVaultKey].compactMap { $0 }
            state = State(vaultKey: nil)
            return keys
        }
        keys.forEach { $0.wipe() }
    }

    var isWiped: Bool { state.withLock { $0.vaultKey == nil } }
}
