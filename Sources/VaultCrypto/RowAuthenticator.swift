internal import CSodium

/// A key that authenticates stored rows: keyed BLAKE2b (`crypto_generichash`) under a subkey
/// derived from a vault key with `crypto_kdf_derive_from_key`, so the sealing key itself is
/// never used for a second primitive.
///
/// It opens nothing: a holder can tell whether a row was changed without the key, and make a
/// row that passes, but cannot read any sealed value.
///
/// ```swift
/// let authenticator = try RowAuthenticator(derivedFrom: vaultKey)
/// let tag = try authenticator.tag(message)
/// let unchanged = try authenticator.matches(message, tag: tag)
/// ```
public struct RowAuthenticator: Sendable {
    /// Bytes in a full tag (BLAKE2b-256).
    public static let tagLength = 32
    /// Bytes in a column tag: enough to say which column changed, never relied on for security.
    public static let columnTagLength = 4

    /// The id of the key it was derived from (the vault key's id).
    public let keyID: UInt32
    let material: SecureBytes

    /// `crypto_kdf` needs exactly eight bytes of context; this names the purpose.
    private static let context = Array("CVrowmac".utf8)
    private static let subkeyID: UInt64 = 1

    /// Derives the row-authentication key of `key` (same id).
    public init(derivedFrom key: SymmetricKey) throws {
        self.keyID = key.id
        self.material = try SecureBytes.derived(
            from: key, subkeyID: Self.subkeyID, context: Self.context, length: Int(crypto_generichash_KEYBYTES))
    }

    /// The full tag of `message`.
    public func tag(_ message: [UInt8]) throws -> [UInt8] {
        try hash(message, length: Self.tagLength)
    }

    /// A short tag of `message`, for naming what changed; see ``columnTagLength``.
    public func columnTag(_ message: [UInt8]) throws -> [UInt8] {
        // BLAKE2b's shortest output is 16 bytes; the first four are the column tag.
        Array(try hash(message, length: Int(crypto_generichash_BYTES_MIN)).prefix(Self.columnTagLength))
    }

    /// Whether `tag` is the full tag of `message`, compared in constant time.
    public func matches(_ message: [UInt8], tag: some Collection<UInt8>) throws -> Bool {
        Self.equal(try self.tag(message), tag)
    }

    /// The full tag of the bytes `feed` hands to the input, hashed as they come (no message
    /// is assembled in memory): the same tag as ``tag(_:)`` of their concatenation.
    public func tag(_ feed: (inout TagInput) throws -> Void) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.tagLength)
        try out.withUnsafeMutableBytes { try hash(feed, length: Self.tagLength, into: $0) }
        return out
    }

    /// The full tag of what `feed` hands over, written to `out` (``tagLength`` bytes).
    public func tag(into out: UnsafeMutableRawBufferPointer, _ feed: (inout TagInput) throws -> Void) throws {
        try hash(feed, length: Self.tagLength, into: out)
    }

    /// The short tag of what `feed` hands over, written to `out` (``columnTagLength`` bytes):
    /// the same as ``columnTag(_:)`` of their concatenation, with nothing assembled in memory.
    public func columnTag(into out: UnsafeMutableRawBufferPointer, _ feed: (inout TagInput) throws -> Void) throws {
        guard out.count == Self.columnTagLength, let outBase = out.baseAddress else { throw CryptoError(.unavailable, "no room for a column tag") }
        let length = Int(crypto_generichash_BYTES_MIN)
        try withUnsafeTemporaryAllocation(byteCount: length, alignment: 8) { full in
            try hash(feed, length: length, into: full)
            guard let fullBase = full.baseAddress else { throw CryptoError(.unavailable, "no memory for a column tag") }
            outBase.copyMemory(from: fullBase, byteCount: Self.columnTagLength)
        }
    }

    /// Whether `tag` is the full tag of what `feed` hands over, compared in constant time.
    public func matches(tag: some Collection<UInt8>, _ feed: (inout TagInput) throws -> Void) throws -> Bool {
        guard tag.count == Self.tagLength else { return false }
        return try withUnsafeTemporaryAllocation(byteCount: Self.tagLength, alignment: 8) { computed in
            try hash(feed, length: Self.tagLength, into: computed)
            return Self.equal(UnsafeRawBufferPointer(computed), tag)
        }
    }

    /// Hashes what `feed` hands over into `out` (`length` bytes of BLAKE2b output). The hash
    /// state and the input's batch are on the stack, and zeroed after.
    private func hash(_ feed: (inout TagInput) throws -> Void, length: Int, into out: UnsafeMutableRawBufferPointer) throws {
        // libsodium's state (64-byte aligned; Swift sees the type as opaque), then the input's batch.
        // Asked for with 16-byte alignment and aligned here: Swift allocates on the stack only up
        // to 16-byte alignment (and 1 KiB), and asked for 64 it went to the heap for every tag
        // (a malloc and a free per tag, several per row a write makes or verify checks).
        let stateBytes = (crypto_generichash_statebytes() + 63) / 64 * 64
        try withUnsafeTemporaryAllocation(byteCount: stateBytes + TagInput.batch + 48, alignment: 16) { memory in
            guard let start = memory.baseAddress, let outBase = out.baseAddress, out.count == length else {
                throw CryptoError(.unavailable, "no memory for a row tag")
            }
            defer { sodium_memzero(start, memory.count) }
            let base = start + (64 - Int(bitPattern: start) % 64) % 64
            let typed = OpaquePointer(base)
            let started = try material.withUnsafeBytes { key -> Int32 in
                guard let keyBase = key.baseAddress else { return -1 }
                return crypto_generichash_init(typed, keyBase.assumingMemoryBound(to: UInt8.self), key.count, length)
            }
            guard started == 0 else { throw CryptoError(.unavailable, "crypto_generichash_init failed") }
            var input = TagInput(state: base, batch: base + stateBytes)
            try feed(&input)
            input.flush()
            guard crypto_generichash_final(typed, outBase.assumingMemoryBound(to: UInt8.self), length) == 0 else {
                throw CryptoError(.unavailable, "crypto_generichash_final failed")
            }
        }
    }

    private static func equal(_ expected: [UInt8], _ tag: some Collection<UInt8>) -> Bool {
        expected.withUnsafeBytes { equal($0, tag) }
    }

    private static func equal(_ expected: UnsafeRawBufferPointer, _ tag: some Collection<UInt8>) -> Bool {
        guard tag.count == expected.count, let expectedBase = expected.baseAddress else { return false }
        // In place when the tag is contiguous (an array or a slice of one); copied otherwise.
        let compared = tag.withContiguousStorageIfAvailable { given in
            guard let base = given.baseAddress else { return false }
            return sodium_memcmp(expectedBase, base, expected.count) == 0
        }
        if let compared { return compared }
        return sodium_memcmp(expectedBase, Array(tag), expected.count) == 0
    }

    /// Zeroes the key now; later use throws ``CryptoError/Code/keyWiped``.
    public func wipe() { material.wipe() }

    private func hash(_ message: [UInt8], length: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let status = try material.withUnsafeBytes { key -> Int32 in
            guard let keyBase = key.baseAddress else { return -1 }
            return crypto_generichash(
                &out, length, message, UInt64(message.count),
                keyBase.assumingMemoryBound(to: UInt8.self), key.count)
        }
        guard status == 0 else { throw CryptoError(.unavailable, "crypto_generichash failed") }
        return out
    }
}

/// Where `RowAuthenticator.tag(_:)`, the form given a closure, takes its bytes, one piece at a time.
/// Valid only inside the closure that receives it, and not copyable, so it cannot be kept past
/// it (it points into memory that lives only as long as the closure).
///
/// A row is fed as ~70 small pieces (each column's length, name, type and value); they are
/// gathered and hashed a few hundred bytes at a time rather than one `crypto_generichash_update`
/// each. The tag is the same: BLAKE2b hashes the concatenation however it is split.
public struct TagInput: ~Copyable {
    /// Bytes gathered before they are hashed.
    @inlinable static var batch: Int { 512 }

    // Inlinable (and so visible to the compiler in other modules): a row's MAC input is ~70
    // appends of a few bytes each, and a call into this module per append cost more than the
    // copy. Hashing itself stays behind `flush()`.
    @usableFromInline let state: UnsafeMutableRawPointer
    @usableFromInline let buffer: UnsafeMutableRawPointer
    @usableFromInline var pending = 0

    fileprivate init(state: UnsafeMutableRawPointer, batch buffer: UnsafeMutableRawPointer) {
        self.state = state
        self.buffer = buffer
    }

    /// Hashes `bytes` next.
    @inlinable public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        guard pending + bytes.count <= Self.batch else {
            appendAfterFlush(bytes)
            return
        }
        (buffer + pending).copyMemory(from: base, byteCount: bytes.count)
        pending += bytes.count
    }

    /// Hashes `bytes` next.
    @inlinable public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Hashes `byte` next.
    @inlinable public mutating func append(byte: UInt8) {
        if pending == Self.batch { flush() }
        buffer.storeBytes(of: byte, toByteOffset: pending, as: UInt8.self)
        pending += 1
    }

    /// Hashes `value` next, as four big-endian bytes (a length prefix).
    @inlinable public mutating func append(bigEndian value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { append($0) }
    }

    /// The batch is full: hash it, then gather `bytes` (or hash them now when they fill a batch themselves).
    @usableFromInline mutating func appendAfterFlush(_ bytes: UnsafeRawBufferPointer) {
        flush()
        guard let base = bytes.baseAddress else { return }
        if bytes.count >= Self.batch {
            update(base, count: bytes.count)
        } else {
            buffer.copyMemory(from: base, byteCount: bytes.count)
            pending = bytes.count
        }
    }

    /// Hashes what was gathered (before the tag is finished).
    @usableFromInline mutating func flush() {
        guard pending > 0 else { return }
        update(buffer, count: pending)
        pending = 0
    }

    private func update(_ bytes: UnsafeRawPointer, count: Int) {
        _ = crypto_generichash_update(OpaquePointer(state), bytes.assumingMemoryBound(to: UInt8.self), UInt64(count))
    }
}
