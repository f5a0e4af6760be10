internal import CSodium

/// A vault's X25519 key pair for receiving sealed session exports (libsodium sealed boxes,
/// `crypto_box_seal`: an ephemeral sender key, X25519 and XSalsa20-Poly1305).
///
/// The pair is derived from the vault key (`crypto_kdf_derive_from_key`, its own context, then
/// `crypto_box_seed_keypair`): nothing of it is stored, so an edited vault file cannot swap in
/// another public key, and a new vault key (`vault rotate-key`) gives a new pair. The secret
/// half lives in guarded memory and is wiped by ``wipe()``.
///
/// ```swift
/// let pair = try RecipientKeyPair(derivedFrom: vaultKey)
/// let sealed = try RecipientKeyPair.seal(message, to: pair.publicKey)
/// let opened = try pair.open(sealed)
/// ```
public struct RecipientKeyPair: Sendable {
    /// Bytes in a public key.
    public static let publicKeyLength = Int(crypto_box_PUBLICKEYBYTES)
    /// What a sealed box adds to its message (the ephemeral public key and the tag).
    public static let sealOverhead = Int(crypto_box_sealbytes())

    public let publicKey: [UInt8]
    private let secretKey: SecureBytes

    private static let context = Array("CVrecipt".utf8)
    private static let subkeyID: UInt64 = 1

    /// The pair of the vault key `key`.
    public init(derivedFrom key: SymmetricKey) throws {
        try Sodium.ensureInitialised()
        let seed = try SecureBytes(count: Int(crypto_box_SEEDBYTES)) { out in
            guard let outBase = out.baseAddress else { throw CryptoError(.unavailable, "no memory for a derived key") }
            let status = try key.material.withUnsafeBytes { master -> Int32 in
                guard let masterBase = master.baseAddress, master.count == Int(crypto_kdf_KEYBYTES) else { return -1 }
                return Self.context.withUnsafeBufferPointer { context in
                    context.withMemoryRebound(to: CChar.self) { chars -> Int32 in
                        guard let contextBase = chars.baseAddress else { return -1 }
                        return crypto_kdf_derive_from_key(
                            outBase.assumingMemoryBound(to: UInt8.self), out.count, Self.subkeyID,
                            contextBase, masterBase.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
            guard status == 0 else { throw CryptoError(.unavailable, "crypto_kdf_derive_from_key failed") }
        }
        defer { seed.wipe() }
        var publicKey = [UInt8](repeating: 0, count: Self.publicKeyLength)
        secretKey = try SecureBytes(count: Int(crypto_box_SECRETKEYBYTES)) { secret in
            guard let secretBase = secret.baseAddress else { throw CryptoError(.unavailable, "no memory for a secret key") }
            let status = try seed.withUnsafeBytes { seedBytes -> Int32 in
                guard let seedBase = seedBytes.baseAddress else { return -1 }
                return crypto_box_seed_keypair(
                    &publicKey, secretBase.assumingMemoryBound(to: UInt8.self),
                    seedBase.assumingMemoryBound(to: UInt8.self))
            }
            guard status == 0 else { throw CryptoError(.unavailable, "crypto_box_seed_keypair failed") }
        }
        self.publicKey = publicKey
    }

    /// Seals `message` to `publicKey`: only the holder of its secret half opens it, and any
    /// change to the box makes opening fail.
    public static func seal(_ message: [UInt8], to publicKey: [UInt8]) throws -> [UInt8] {
        try Sodium.ensureInitialised()
        guard publicKey.count == publicKeyLength else { throw CryptoError(.invalidKey, "a recipient key is \(publicKeyLength) bytes") }
        var sealed = [UInt8](repeating: 0, count: message.count + sealOverhead)
        guard crypto_box_seal(&sealed, message, UInt64(message.count), publicKey) == 0 else {
            throw CryptoError(.unavailable, "crypto_box_seal failed")
        }
        return sealed
    }

    /// Opens a box sealed to this pair. Throws `.authenticationFailed` when it was sealed to
    /// another key or changed on the way.
    public func open(_ sealed: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= Self.sealOverhead else { throw CryptoError(.malformedBlob, "a sealed box is at least \(Self.sealOverhead) bytes") }
        var message = [UInt8](repeating: 0, count: sealed.count - Self.sealOverhead)
        let status = try secretKey.withUnsafeBytes { secret -> Int32 in
            guard let secretBase = secret.baseAddress else { return -1 }
            return crypto_box_seal_open(&message, sealed, UInt64(sealed.count), publicKey, secretBase.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else { throw CryptoError(.authenticationFailed, "the sealed box does not open with this recipient key") }
        return message
    }

    /// Unkeyed BLAKE2b of `bytes` after a domain string, `length` bytes: checksums and fingerprints of public keys.
    public static func checksum(_ bytes: [UInt8], domain: String, length: Int) -> [UInt8] {
        let input = Array(domain.utf8) + bytes
        var out = [UInt8](repeating: 0, count: max(Int(crypto_generichash_BYTES_MIN), length))
        _ = crypto_generichash(&out, out.count, input, UInt64(input.count), nil, 0)
        return Array(out.prefix(length))
    }

    /// Wipes the secret half; opening fails afterwards.
    public func wipe() { secretKey.wipe() }
}
