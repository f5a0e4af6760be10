internal import CSodium

/// A 256-bit XChaCha20-Poly1305-IETF key with an id, kept in guarded memory.
///
/// The vault key and every account's data key are `SymmetricKey`s. Sealing picks a
/// random 24-byte nonce per value; the result is a ``SealedBlob``.
///
/// ```swift
/// let key = try SymmetricKey.generate(id: 7)
/// let blob = try key.seal(Array("secret".utf8), context: context)
/// let plain = try key.open(blob, context: context)
/// ```
public struct SymmetricKey: Sendable {
    /// The id of a key-encryption key (it is never stored, only derived).
    public static let kekID: UInt32 = 0

    public let id: UInt32
    let material: SecureBytes

    init(id: UInt32, bytes: SecureBytes) throws {
        guard bytes.count == Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES) else {
            throw CryptoError(.invalidKey, "a symmetric key is \(crypto_aead_xchacha20poly1305_ietf_KEYBYTES) bytes, found \(bytes.count)")
        }
        self.id = id
        self.material = bytes
    }

    /// A fresh random key.
    public static func generate(id: UInt32) throws -> SymmetricKey {
        try SymmetricKey(id: id, bytes: SecureBytes.random(count: Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)))
    }

    /// Seals `plaintext` for the place described by `context`.
    public func seal(_ plaintext: [UInt8], context: SealContext) throws -> [UInt8] {
        let header = SealedBlob.header(keyID: id)
        var nonce = [UInt8](repeating: 0, count: SealedBlob.nonceLength)
        nonce.withUnsafeMutableBytes { if let base = $0.baseAddress { randombytes_buf(base, $0.count) } }
        let ad = header + context.associatedData
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + SealedBlob.tagLength)
        var written: UInt64 = 0
        let status = try material.withUnsafeBytes { key in
            guard let keyBase = key.baseAddress else { return Int32(-1) }
            return crypto_aead_xchacha20poly1305_ietf_encrypt(
                &ciphertext, &written,
                plaintext, UInt64(plaintext.count),
                ad, UInt64(ad.count),
                nil, nonce,
                keyBase.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0, written == UInt64(ciphertext.count) else {
            throw CryptoError(.unavailable, "XChaCha20-Poly1305 encryption failed")
        }
        return header + nonce + ciphertext
    }

    /// Opens a blob sealed by ``seal(_:context:)`` for the same `context`.
    ///
    /// Throws ``CryptoError/Code/malformedBlob`` for a layout it cannot read,
    /// ``CryptoError/Code/keyMismatch`` when the blob names another key, and
    /// ``CryptoError/Code/authenticationFailed`` when any byte was changed or the blob
    /// was moved to another place. Never returns partial plaintext.
    public func open(_ bytes: [UInt8], context: SealContext) throws -> [UInt8] {
        let blob = try SealedBlob(parsing: bytes)
        guard blob.keyID == id else {
            throw CryptoError(.keyMismatch, "sealed value names key \(blob.keyID), expected key \(id)")
        }
        let ad = Array(blob.header) + context.associatedData
        let ciphertext = Array(blob.ciphertext)
        let nonce = Array(blob.nonce)
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count - SealedBlob.tagLength)
        var written: UInt64 = 0
        let status = try material.withUnsafeBytes { key in
            guard let keyBase = key.baseAddress else { return Int32(-1) }
            return crypto_aead_xchacha20poly1305_ietf_decrypt(
                &plaintext, &written, nil,
                ciphertext, UInt64(ciphertext.count),
                ad, UInt64(ad.count),
                nonce,
                keyBase.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else {
            // libsodium leaves the output untouched on failure; clear it anyway.
            plaintext.withUnsafeMutableBytes { if let base = $0.baseAddress { sodium_memzero(base, $0.count) } }
            throw CryptoError(.authenticationFailed, "sealed value failed authentication (altered, moved, or wrong key)")
        }
        return plaintext
    }

    /// Seals another key's material (key wrapping).
    public func wrap(_ key: SymmetricKey, context: SealContext) throws -> [UInt8] {
        try key.material.withUnsafeBytes { try seal(Array($0), context: context) }
    }

    /// Opens a key wrapped by ``wrap(_:context:)`` straight into guarded memory.
    public func openKey(_ bytes: [UInt8], id: UInt32, context: SealContext) throws -> SymmetricKey {
        var plain = try open(bytes, context: context)
        defer { plain.withUnsafeMutableBytes { if let base = $0.baseAddress { sodium_memzero(base, $0.count) } } }
        return try SymmetricKey(id: id, bytes: SecureBytes(copying: plain))
    }

    /// Zeroes the key material now; later use throws ``CryptoError/Code/keyWiped``.
    public func wipe() { material.wipe() }

    public var isWiped: Bool { material.isWiped }
}
