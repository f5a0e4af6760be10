import Foundation
import VaultCrypto
import VaultSync

/// The unlocked keys of one open vault: the vault key (and, during a key rotation, the next
/// one), the data keys of the accounts used so far, found by key id, and the row
/// authenticators derived from each vault key. All of it lives in guarded memory and is wiped
/// by ``wipe()``.
///
/// Locking (``wipeSealingKeys()``) drops every key that opens or seals a value but keeps the
/// row authenticators: a locked process still records its sessions' lock, expiry and end, and
/// those rows must stay authentic. A row authenticator opens nothing.
final class Keyring: Sendable {
    let vaultID: [UInt8]
    /// Rows checked under these keys (see ``VerifiedRows``); emptied when the keys are wiped.
    let verifiedRows = VerifiedRows()
    /// The write counter of each connection's current write transaction
    /// (``RowIntegrity/writeCounter(_:)``), dropped when the transaction ends.
    let writeScopes = Locked<[ObjectIdentifier: WriteScope]>([:])
    private let format1 = Locked(false)
    /// The last state row this process read or wrote, by its MAC, decoded
    /// (``RowIntegrity/commitment(of:floor:)``): the same row is not decoded again.
    let stateMemo = Locked<(mac: Data, commitment: RowIntegrity.Commitment)?>(nil)
    /// The highest write counter this process has seen in the header (see ``observe(_:floor:)``).
    private let highestCounter = Locked<UInt64>(0)
    private let state: Locked<State>

    private struct State {
        var vaultKey: SymmetricKey?
        var pendingVaultKey: SymmetricKey?
        /// Data keys by key id, and the account each belongs to.
        var dataKeys: [UInt32: (account: String, key: SymmetricKey)] = [:]
        /// Row authenticators by the id of the vault key they were derived from.
        var rowAuthenticators: [UInt32: RowAuthenticator] = [:]
        /// The collection commitments' hasher (schema 12); like a row authenticator, it opens
        /// nothing and stays while the vault is locked.
        var commitmentHasher: MultisetHasher?
    }

    init(vaultID: [UInt8], vaultKey: SymmetricKey, pendingVaultKey: SymmetricKey? = nil) throws {
        self.vaultID = vaultID
        var state = State(vaultKey: vaultKey, pendingVaultKey: pendingVaultKey)
        for key in [vaultKey, pendingVaultKey].compactMap({ $0 }) {
            state.rowAuthenticators[key.id] = try RowAuthenticator(derivedFrom: key)
        }
        self.state = Locked(state)
    }

    /// The highest header write counter seen so far: taken before a read begins, it is a floor
    /// for the counter that read may see (a snapshot begun later holds every commit seen before).
    var counterFloor: UInt64 { highestCounter.withLock { $0 } }

    /// Records a header write counter read in a snapshot that began after `floor` was taken;
    /// false when it is lower: the file went back to an older copy while this process had it open.
    func observe(_ counter: UInt64, floor: UInt64) -> Bool {
        guard counter >= floor else { return false }
        highestCounter.withLock { $0 = max($0, counter) }
        return true
    }

    /// Whether row MACs of format 1 (schemas 3 to 11) are taken: only while this process
    /// migrates the vault to schema 12, which checks and replaces every one of them.
    var acceptsFormat1: Bool { format1.withLock { $0 } }

    /// Runs `body` (migrations) taking format-1 row MACs.
    func acceptingFormat1<T>(_ body: () throws -> T) rethrows -> T {
        format1.withLock { $0 = true }
        defer { format1.withLock { $0 = false } }
        return try body()
    }

    /// The hasher of the collection commitments, once loaded (``RowIntegrity/commitmentHasher(_:)``).
    var commitmentHasher: MultisetHasher? { state.withLock { $0.commitmentHasher } }

    /// Keeps `hasher`, loaded from the header, unless another thread loaded one first: then
    /// that one, which it may be using, is kept and returned, and `hasher` wiped.
    func keepCommitmentHasher(_ hasher: MultisetHasher) -> MultisetHasher {
        let (kept, spare) = state.withLock { state -> (MultisetHasher, MultisetHasher?) in
            if let loaded = state.commitmentHasher { return (loaded, hasher) }
            state.commitmentHasher = hasher
            return (hasher, nil)
        }
        spare?.wipe()
        return kept
    }

    /// Replaces the hasher with one of a new commitment key (a new vault, the migration to schema 12).
    func setCommitmentHasher(_ hasher: MultisetHasher) {
        let old = state.withLock { state -> MultisetHasher? in
            defer { state.commitmentHasher = hasher }
            return state.commitmentHasher
        }
        old?.wipe()
    }

    /// The row authenticator derived from the vault key with `id`, if this process holds it.
    func rowAuthenticator(id: UInt32) -> RowAuthenticator? {
        state.withLock { $0.rowAuthenticators[id] }
    }

    /// Derives and keeps the row authenticator of `key` (a vault key).
    private func deriveRowAuthenticator(_ key: SymmetricKey) {
        guard state.withLock({ $0.rowAuthenticators[key.id] }) == nil,
            let authenticator = try? RowAuthenticator(derivedFrom: key)
        else { return }
        // Another thread may have derived it meanwhile and be using it: theirs is kept (wiping
        // it would fail their check with `keyWiped`), this one wiped.
        let spare = state.withLock { state -> RowAuthenticator? in
            if state.rowAuthenticators[key.id] != nil { return authenticator }
            state.rowAuthenticators[key.id] = authenticator
            return nil
        }
        spare?.wipe()
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
        throw VaultError.keyChanged(path: nil)
    }

    func pendingVaultKey() -> SymmetricKey? { state.withLock { $0.pendingVaultKey } }

    func setPendingVaultKey(_ key: SymmetricKey?) {
        if let key { deriveRowAuthenticator(key) }
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
        deriveRowAuthenticator(key)
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

    /// Wipes every key, row authenticators included. Later use throws `.closed`.
    func wipe() {
        wipeSealingKeys()
        let (authenticators, hasher) = state.withLock { state -> ([RowAuthenticator], MultisetHasher?) in
            defer {
                state.rowAuthenticators = [:]
                state.commitmentHasher = nil
            }
            return (Array(state.rowAuthenticators.values), state.commitmentHasher)
        }
        authenticators.forEach { $0.wipe() }
        hasher?.wipe()
        verifiedRows.removeAll()
    }

    /// Wipes every key that seals or opens a value (locking); the row authenticators stay.
    func wipeSealingKeys() {
        let keys = state.withLock { state -> [SymmetricKey] in
            let keys = state.dataKeys.values.map(\.key) + [state.vaultKey, state.pendingVaultKey].compactMap { $0 }
            state.vaultKey = nil
            state.pendingVaultKey = nil
            state.dataKeys = [:]
            return keys
        }
        keys.forEach { $0.wipe() }
    }

    var isWiped: Bool { state.withLock { $0.vaultKey == nil } }
}
