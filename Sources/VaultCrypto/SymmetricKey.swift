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
        try plaintext.withUnsafeBytes { try seal(bytes: $0, context: context) }
    }

    /// Seals the UTF-8 bytes of `text`, read in place: no copy of them is made in ordinary
    /// memory (a `String` itself cannot be wiped; this adds no second copy to it).
    public func seal(text: String, context: SealContext) throws -> [UInt8] {
        var text = text
        return try text.withUTF8 { try seal(bytes: UnsafeRawBufferPointer($0), context: context) }
    }

    /// Seals bytes read where they are: key wrapping passes guarded memory here.
    func seal(bytes plaintext: UnsafeRawBufferPointer, context: SealContext) throws -> [UInt8] {
        let header = SealedBlob.header(keyID: id)
        var nonce = [UInt8](repeating: 0, count: SealedBlob.nonceLength)
        nonce.withUnsafeMutableBytes { if let base = $0.baseAddress { randombytes_buf(base, $0.count) } }
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + SealedBlob.tagLength)
        var written: UInt64 = 0
        // An empty plaintext may come without an address; libsodium is given a real one anyway.
        var nothing: UInt8 = 0
        let status = try withUnsafePointer(to: &nothing) { placeholder in
            let message = plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? placeholder
            return try header.withUnsafeBytes { header in
                try context.withAssociatedData(after: header) { ad in
                    try material.withUnsafeBytes { key in
                        guard let keyBase = key.baseAddress, let adBase = ad.baseAddress else { return Int32(-1) }
                        return crypto_aead_xchacha20poly1305_ietf_encrypt(
                            &ciphertext, &written,
                            message, UInt64(plaintext.count),
                            adBase.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                            nil, nonce,
                            keyBase.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
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
    /// was moved to another place. Never returns partial plaintext. The caller owns the
    /// plaintext: zero it when done (`SecureBytes.zero(_:)`), or use ``openText(_:context:)-([UInt8],_)``.
    public func open(_ bytes: [UInt8], context: SealContext) throws -> [UInt8] {
        let blob = try opening(bytes)
        var plaintext = [UInt8](repeating: 0, count: blob.ciphertext.count - SealedBlob.tagLength)
        try plaintext.withUnsafeMutableBytes { try decrypt(blob, context: context, into: $0) }
        return plaintext
    }

    /// Opens a sealed text: the plaintext bytes are zeroed as soon as the `String` is made.
    /// Nil when the plaintext is not UTF-8.
    public func openText(_ bytes: [UInt8], context: SealContext) throws -> String? {
        try bytes.withUnsafeBytes { try openText($0, context: context) }
    }

    /// Opens a sealed text read where it lies (a blob SQLite holds, say): the same checks,
    /// errors and answer as ``openText(_:context:)-([UInt8],_)``, without copying the sealed
    /// bytes first. The plaintext goes to a scratch buffer that is zeroed once the `String` is made.
    public func openText(_ bytes: UnsafeRawBufferPointer, context: SealContext) throws -> String? {
        try openingText(bytes) { header, nonce, ciphertext, output in
            try decrypt(header: header, nonce: nonce, ciphertext: ciphertext, context: context, into: output)
        }
    }

    /// Opens a sealed text of the place `shared` and `row` (and `version`) describe, read where
    /// it lies: the same checks, errors and answer as ``openText(_:context:)-(UnsafeRawBufferPointer,_)``
    /// with the ``SealContext`` of those parts, with the shared part of the associated data
    /// encoded once for many values.
    public func openText(_ bytes: UnsafeRawBufferPointer, sharing shared: SharedSealContext, row: String, version: String = "") throws -> String? {
        try openingText(bytes) { header, nonce, ciphertext, output in
            try shared.withAssociatedData(header: header, row: row, version: version) { ad in
                try decrypt(nonce: nonce, ciphertext: ciphertext, associatedData: ad, into: output)
            }
        }
    }

    /// Whether a sealed value of the place `shared` and `row` (and `version`) describe opens to
    /// UTF-8 text: the same checks and errors as ``openText(_:sharing:row:version:)``, without
    /// making the `String` (`vault verify` opens every value and keeps none).
    public func opensToText(_ bytes: UnsafeRawBufferPointer, sharing shared: SharedSealContext, row: String, version: String = "") throws -> Bool {
        try openingText(
            bytes,
            { header, nonce, ciphertext, output in
                try shared.withAssociatedData(header: header, row: row, version: version) { ad in
                    try decrypt(nonce: nonce, ciphertext: ciphertext, associatedData: ad, into: output)
                }
            },
            finish: { Self.isASCII($0) || String(validating: $0, as: UTF8.self) != nil })
    }

    /// Checks that `bytes` are a sealed value of this key, then calls `decrypt` with its header,
    /// nonce and ciphertext (in place) and a scratch buffer for the plaintext, zeroed once
    /// `finish` (by default: the `String`) has read it.
    private func openingText<Answer>(
        _ bytes: UnsafeRawBufferPointer,
        _ decrypt: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws -> Void,
        finish: (UnsafeBufferPointer<UInt8>) -> Answer = Self.text
    ) throws -> Answer {
        let keyID = try SealedBlob.keyID(of: bytes)
        guard keyID == id else {
            throw CryptoError(.keyMismatch, "sealed value names key \(keyID), expected key \(id)")
        }
        let header = SealedBlob.headerLength
        let nonceEnd = header + SealedBlob.nonceLength
        let count = bytes.count - nonceEnd - SealedBlob.tagLength
        return try withUnsafeTemporaryAllocation(byteCount: max(count, 1), alignment: 1) { scratch in
            let output = UnsafeMutableRawBufferPointer(rebasing: scratch[..<count])
            defer { if let base = scratch.baseAddress { sodium_memzero(base, scratch.count) } }
            try decrypt(
                UnsafeRawBufferPointer(rebasing: bytes[..<header]),
                UnsafeRawBufferPointer(rebasing: bytes[header..<nonceEnd]),
                UnsafeRawBufferPointer(rebasing: bytes[nonceEnd...]),
                output)
            return finish(UnsafeBufferPointer(output.bindMemory(to: UInt8.self)))
        }
    }

    /// `bytes` as a String when they are UTF-8, nil otherwise: `String(validating:as:)`'s answer.
    /// Opened values are nearly always ASCII, and an all-ASCII input is valid UTF-8 whatever its
    /// bytes, so it takes `String(decoding:as:)` (specialised, and nothing to repair: the same
    /// String); only other input goes through `String(validating:as:)`, which the standard
    /// library runs as unspecialised generic code (a sixth of a notification page's opens).
    static func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Whether every byte is below 0x80, eight at a time.
    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= bytes.count {
            high |= raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            high |= UInt64(bytes[index])
            index += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// Seals another key's material (key wrapping), read straight from its guarded memory.
    public func wrap(_ key: SymmetricKey, context: SealContext) throws -> [UInt8] {
        try key.material.withUnsafeBytes { try seal(bytes: $0, context: context) }
    }

    /// Opens a key wrapped by ``wrap(_:context:)`` straight into guarded memory: the key's
    /// bytes are never in ordinary memory.
    public func openKey(_ bytes: [UInt8], id: UInt32, context: SealContext) throws -> SymmetricKey {
        let blob = try opening(bytes)
        let material = try SecureBytes(count: blob.ciphertext.count - SealedBlob.tagLength) { buffer in
            try decrypt(blob, context: context, into: buffer)
        }
        return try SymmetricKey(id: id, bytes: material)
    }

    /// Parses `bytes` and checks that this key sealed them.
    private func opening(_ bytes: [UInt8]) throws -> SealedBlob {
        let blob = try SealedBlob(parsing: bytes)
        guard blob.keyID == id else {
            throw CryptoError(.keyMismatch, "sealed value names key \(blob.keyID), expected key \(id)")
        }
        return blob
    }

    /// Decrypts `blob` into `output` (exactly the plaintext's length); on failure `output` is zeroed.
    private func decrypt(_ blob: SealedBlob, context: SealContext, into output: UnsafeMutableRawBufferPointer) throws {
        // The header, nonce and ciphertext are read in place (slices of the blob's bytes).
        try blob.header.withUnsafeBytes { header in
            try blob.nonce.withUnsafeBytes { nonce in
                try blob.ciphertext.withUnsafeBytes { ciphertext in
                    try decrypt(header: header, nonce: nonce, ciphertext: ciphertext, context: context, into: output)
                }
            }
        }
    }

    private func decrypt(
        header: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer,
        context: SealContext, into output: UnsafeMutableRawBufferPointer
    ) throws {
        try context.withAssociatedData(after: header) { ad in
            try decrypt(nonce: nonce, ciphertext: ciphertext, associatedData: ad, into: output)
        }
    }

    /// XChaCha20-Poly1305 open of `ciphertext` (tag last) into `output` (exactly the plaintext's
    /// length); on failure `output` is zeroed.
    private func decrypt(
        nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer, associatedData ad: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        var written: UInt64 = 0
        let status = try material.withUnsafeBytes { key in
            guard let keyBase = key.baseAddress, let out = output.baseAddress, let adBase = ad.baseAddress,
                let ciphertextBase = ciphertext.baseAddress, let nonceBase = nonce.baseAddress,
                nonce.count == SealedBlob.nonceLength, output.count == ciphertext.count - SealedBlob.tagLength
            else { return Int32(-1) }
            return crypto_aead_xchacha20poly1305_ietf_decrypt(
                out.assumingMemoryBound(to: UInt8.self), &written, nil,
                ciphertextBase.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                adBase.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                nonceBase.assumingMemoryBound(to: UInt8.self),
                keyBase.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else {
            // libsodium leaves the output untouched on failure; clear it anyway.
            if let base = output.baseAddress { sodium_memzero(base, output.count) }
            throw CryptoError(.authenticationFailed, "sealed value failed authentication (altered, moved, or wrong key)")
        }
    }

    /// Zeroes the key material now; later use throws ``CryptoError/Code/keyWiped``.
    public func wipe() { material.wipe() }

    public var isWiped: Bool { material.isWiped }
}

extension SymmetricKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `SymmetricKey(id: 7)`: the id, never the material.
    public var description: String { "SymmetricKey(id: \(id))" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// Only the id, so `dump(key)` cannot reach the material.
    public var customMirror: Mirror { Mirror(self, children: ["id": id], displayStyle: .struct) }
}
