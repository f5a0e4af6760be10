internal import CSodium
import Synchronization

/// The key that wraps the vault key, derived from a passphrase (Argon2id) or a key file.
///
/// Two independent subkeys come from the derived secret with `crypto_kdf_derive_from_key`:
/// one wraps the vault key, the other produces the *key check*, a value stored in the
/// vault that tells "wrong passphrase" apart from "damaged vault" without trying to
/// decrypt anything. The check is a keyed hash of the derived secret, so it costs an
/// attacker one full Argon2id derivation per guess, exactly like the wrapped key itself.
///
/// ```swift
/// let salt = KeyEncryptionKey.newSalt()
/// let kek = try KeyEncryptionKey.derive(passphrase: pass, salt: salt, cost: .interactive)
/// let wrapped = try kek.wrap(vaultKey, context: ...)
/// ```
public struct KeyEncryptionKey: Sendable {
    /// Length of an Argon2id salt (`crypto_pwhash_SALTBYTES`).
    public static let saltLength = Int(crypto_pwhash_SALTBYTES)
    /// Length of a key file and of every symmetric key.
    public static let keyLength = 32
    /// Length of the stored key check.
    public static let checkLength = 32

    let wrapping: SymmetricKey
    private let checkKey: SecureBytes
    /// The derived secret itself (a passphrase's Argon2id output, a key file's bytes): what a key
    /// slot seals (``sealSecret(under:context:)``), so another key can stand in for this one.
    private let secret: SecureBytes

    /// Counts the Argon2id derivations made by the current task, when a test binds one:
    /// the proof that refusing a wrong passphrase costs exactly one derivation.
    final class DerivationCounter: Sendable {
        let count = Atomic<Int>(0)
    }

    @TaskLocal static var derivationCounter: DerivationCounter?

    private init(secret: SecureBytes) throws {
        // Each part wiped again if a later one cannot be made.
        let wrapping = try SymmetricKey(id: SymmetricKey.kekID, bytes: Self.subkey(1, of: secret))
        let checkKey: SecureBytes
        do { checkKey = try Self.subkey(2, of: secret) } catch {
            wrapping.wipe()
            throw error
        }
        let copy: SecureBytes
        do {
            // Copied guarded memory to guarded memory: the caller wipes its own.
            copy = try SecureBytes(count: secret.count) { output in try secret.withUnsafeBytes { output.copyMemory(from: $0) } }
        } catch {
            wrapping.wipe()
            checkKey.wipe()
            throw error
        }
        self.wrapping = wrapping
        self.checkKey = checkKey
        self.secret = copy
    }

    /// A fresh random salt for a new passphrase.
    public static func newSalt() throws -> [UInt8] {
        try Sodium.ensureInitialised()
        var salt = [UInt8](repeating: 0, count: saltLength)
        salt.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
        return salt
    }

    /// Derives the key from a passphrase with Argon2id13 at `cost`.
    ///
    /// Costs one full derivation (by design, ~0.1–1 s). Throws ``CryptoError/Code/derivationFailed``
    /// when the system cannot provide the memory.
    public static func derive(passphrase: SecureBytes, salt: [UInt8], cost: KDFParameters) throws -> KeyEncryptionKey {
        try Sodium.ensureInitialised()
        guard salt.count == saltLength else {
            throw CryptoError(.invalidKey, "Argon2id salt must be \(saltLength) bytes, found \(salt.count)")
        }
        guard cost.opsLimit <= UInt64(crypto_pwhash_argon2id_opslimit_max()),
            cost.memLimitBytes <= UInt64(crypto_pwhash_argon2id_memlimit_max()),
            cost.opsLimit >= UInt64(crypto_pwhash_argon2id_opslimit_min()),
            cost.memLimitBytes >= UInt64(crypto_pwhash_argon2id_memlimit_min())
        else {
            throw CryptoError(.weakParameters, "key derivation cost \(cost) is outside libsodium's range")
        }
        derivationCounter?.count.add(1, ordering: .relaxed)
        let secret = try SecureBytes(count: keyLength) { output in
            guard let out = output.baseAddress else { return }
            let status = try passphrase.withUnsafeBytes { password in
                // SecureBytes always has a base address (an empty secret still owns one byte),
                // and crypto_pwhash reads exactly `passwdlen` bytes from it.
                guard let base = password.baseAddress else { return Int32(-1) }
                return crypto_pwhash(
                    out.assumingMemoryBound(to: UInt8.self), UInt64(output.count),
                    base.assumingMemoryBound(to: CChar.self), UInt64(password.count),
                    salt, cost.opsLimit, Int(cost.memLimitBytes),
                    crypto_pwhash_ALG_ARGON2ID13)
            }
            guard status == 0 else {
                throw CryptoError(.derivationFailed, "Argon2id derivation failed at \(cost) (not enough memory?)")
            }
        }
        defer { secret.wipe() }
        return try KeyEncryptionKey(secret: secret)
    }

    /// Uses the 32 bytes of a key file as the derived secret.
    public static func fromKeyFile(_ contents: SecureBytes) throws -> KeyEncryptionKey {
        guard contents.count == keyLength else {
            throw CryptoError(.invalidKey, "a key file holds exactly \(keyLength) bytes, this one holds \(contents.count)")
        }
        return try KeyEncryptionKey(secret: contents)
    }

    /// The value stored in the vault to recognise this key later.
    public func keyCheck() throws -> [UInt8] {
        var check = [UInt8](repeating: 0, count: Self.checkLength)
        let label = Array("credentialvault key check v1".utf8)
        try checkKey.withUnsafeBytes { key in
            guard let keyBase = key.baseAddress else { throw CryptoError(.invalidKey, "empty check key") }
            let status = crypto_generichash(
                &check, check.count, label, UInt64(label.count),
                keyBase.assumingMemoryBound(to: UInt8.self), key.count)
            guard status == 0 else { throw CryptoError(.unavailable, "crypto_generichash failed") }
        }
        return check
    }

    /// Whether `stored` is this key's check value (constant-time).
    public func matches(keyCheck stored: [UInt8]) throws -> Bool {
        let mine = try keyCheck()
        guard mine.count == stored.count else { return false }
        return sodium_memcmp(mine, stored, mine.count) == 0
    }

    /// Seals a key (normally the vault key) under this key-encryption key, read straight from
    /// its guarded memory.
    public func wrap(_ key: SymmetricKey, context: SealContext) throws -> [UInt8] {
        try wrapping.wrap(key, context: context)
    }

    /// Opens a key sealed by ``wrap(_:context:)``; `id` becomes the key's id.
    public func unwrap(_ blob: [UInt8], id: UInt32, context: SealContext) throws -> SymmetricKey {
        try wrapping.openKey(blob, id: id, context: context)
    }

    /// Seals this key's secret under `slot`, another key-encryption key (a key slot's: a second
    /// passphrase, a key file, a keeper's key), so that `slot` opens what this key opens
    /// (``openSecret(_:under:context:)``). The secret is read from guarded memory.
    public func sealSecret(under slot: KeyEncryptionKey, context: SealContext) throws -> [UInt8] {
        try secret.withUnsafeBytes { try slot.wrapping.seal(bytes: $0, context: context) }
    }

    /// The key whose secret `slot` sealed with ``sealSecret(under:context:)``. Throws
    /// ``CryptoError`` when `slot` is not the key that sealed it (or the blob was changed).
    public static func openSecret(_ sealed: [UInt8], under slot: KeyEncryptionKey, context: SealContext) throws -> KeyEncryptionKey {
        let opened = try slot.wrapping.openKey(sealed, id: SymmetricKey.kekID, context: context)
        defer { opened.wipe() }
        return try KeyEncryptionKey(secret: opened.material)
    }

    /// Zeroes the key material now.
    public func wipe() {
        wrapping.wipe()
        checkKey.wipe()
        secret.wipe()
    }

    private static func subkey(_ index: UInt64, of secret: SecureBytes) throws -> SecureBytes {
        try SecureBytes(count: keyLength) { output in
            guard let out = output.baseAddress else { return }
            let status = try secret.withUnsafeBytes { master in
                guard let masterBase = master.baseAddress, master.count == Int(crypto_kdf_KEYBYTES) else { return Int32(-1) }
                return crypto_kdf_derive_from_key(
                    out.assumingMemoryBound(to: UInt8.self), output.count, index,
                    "CVaultKK", masterBase.assumingMemoryBound(to: UInt8.self))
            }
            guard status == 0 else { throw CryptoError(.invalidKey, "subkey derivation failed") }
        }
    }
}

extension KeyEncryptionKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `KeyEncryptionKey(<redacted>)`.
    public var description: String { "KeyEncryptionKey(<redacted>)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror without children, so `dump(kek)` cannot reach the key material.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
