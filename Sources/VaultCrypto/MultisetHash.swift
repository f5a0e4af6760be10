internal import CSodium

/// What a vault commits to for a collection of rows: how many there are and a keyed
/// multiset hash of them (see ``MultisetHasher``). Adding and removing one element is a
/// constant-time update, in any order; two collections with the same elements (counted with
/// their multiplicity) have the same digest, whatever order they were added in.
public struct MultisetDigest: Sendable, Hashable {
    /// Bytes in ``sum``.
    public static let sumLength = 32

    /// How many elements the collection holds.
    public private(set) var count: UInt64
    /// The sum of the elements' hashes modulo 2^256, little-endian.
    public private(set) var sum: [UInt8]

    /// The digest of the empty collection.
    public init() {
        count = 0
        sum = [UInt8](repeating: 0, count: Self.sumLength)
    }

    /// A digest as stored; nil when `sum` is not ``sumLength`` bytes.
    public init?(count: UInt64, sum: [UInt8]) {
        guard sum.count == Self.sumLength else { return nil }
        self.count = count
        self.sum = sum
    }

    mutating func add(_ element: [UInt8]) {
        element.withUnsafeBytes { add($0) }
    }

    /// Adds one element's hash (``sumLength`` bytes).
    mutating func add(_ element: UnsafeRawBufferPointer) {
        count &+= 1
        var carry: UInt16 = 0
        for index in 0..<Self.sumLength {
            let total = UInt16(sum[index]) + UInt16(element[index]) + carry
            sum[index] = UInt8(truncatingIfNeeded: total)
            carry = total >> 8
        }
    }

    /// Adds every element of `other`: the digest of the two collections together.
    public mutating func combine(_ other: MultisetDigest) {
        let elements = count &+ other.count
        other.sum.withUnsafeBytes { add($0) }
        count = elements
    }

    mutating func subtract(_ element: [UInt8]) {
        count &-= 1
        var borrow: Int16 = 0
        for index in 0..<Self.sumLength {
            var difference = Int16(sum[index]) - Int16(element[index]) - borrow
            borrow = difference < 0 ? 1 : 0
            if difference < 0 { difference += 256 }
            sum[index] = UInt8(difference)
        }
    }
}

/// A keyed multiset hash: MSet-Add-Hash (Clarke, Devadas, van Dijk, Gassend and Suh,
/// "Incremental Multiset Hash Functions and Their Application to Memory Integrity Checking",
/// ASIACRYPT 2003), with keyed BLAKE2b-256 (`crypto_generichash`) as its keyed hash: the digest
/// of a multiset is the sum modulo 2^256 of the hash of each element. Without the key, no one
/// can tell which other collection sums to a given digest, so a collection with an element
/// removed, added or replaced does not match the digest of the one it was.
///
/// The hashing key is a subkey (`crypto_kdf_derive_from_key`, context `CVmset01`, subkey 1) of
/// a root key of its own, so it does not change when the vault key is replaced.
///
/// ```swift
/// let hasher = try MultisetHasher(derivedFrom: rootKey)
/// var digest = MultisetDigest()
/// try hasher.insert(rowMAC, domain: "devices", into: &digest)
/// try hasher.remove(rowMAC, domain: "devices", from: &digest)  // back to the empty digest
/// ```
public struct MultisetHasher: Sendable {
    let material: SecureBytes

    private static let context = Array("CVmset01".utf8)
    private static let subkeyID: UInt64 = 1
    private static let elementDomain = Array("credentialvault.mset.v1".utf8)

    /// Derives the hashing key from `root`.
    public init(derivedFrom root: SymmetricKey) throws {
        material = try SecureBytes.derived(from: root, subkeyID: Self.subkeyID, context: Self.context, length: Int(crypto_generichash_KEYBYTES))
    }

    /// The hash of one element: keyed BLAKE2b-256 over the domain `credentialvault.mset.v1`,
    /// then `domain` and `element`, each with its length as four big-endian bytes.
    public func hash(_ element: [UInt8], domain: String) throws -> [UInt8] {
        try element.withUnsafeBytes { element in try withHash(of: element, domain: domain) { Array($0) } }
    }

    /// Adds `element` to `digest`.
    public func insert(_ element: [UInt8], domain: String, into digest: inout MultisetDigest) throws {
        try element.withUnsafeBytes { try insert($0, domain: domain, into: &digest) }
    }

    /// Adds `element`, read where it lies, to `digest` (`vault verify` adds every row's MAC).
    public func insert(_ element: UnsafeRawBufferPointer, domain: String, into digest: inout MultisetDigest) throws {
        try withHash(of: element, domain: domain) { digest.add($0) }
    }

    /// Calls `body` with the hash of `element` (see ``hash(_:domain:)``), the message and the
    /// hash made on the stack: nothing is allocated per element.
    private func withHash<R>(of element: UnsafeRawBufferPointer, domain: String, _ body: (UnsafeRawBufferPointer) -> R) throws -> R {
        var domain = domain
        return try domain.withUTF8 { domain in
            let length = Self.elementDomain.count + 4 + domain.count + 4 + element.count
            return try withUnsafeTemporaryAllocation(byteCount: length + MultisetDigest.sumLength, alignment: 8) { buffer in
                guard let base = buffer.baseAddress else { throw CryptoError(.unavailable, "no memory for a multiset hash") }
                var position = base
                func put(_ bytes: UnsafeRawBufferPointer) {
                    guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
                    position.copyMemory(from: source, byteCount: bytes.count)
                    position += bytes.count
                }
                Self.elementDomain.withUnsafeBytes { put($0) }
                withUnsafeBytes(of: UInt32(truncatingIfNeeded: domain.count).bigEndian) { put($0) }
                put(UnsafeRawBufferPointer(domain))
                withUnsafeBytes(of: UInt32(truncatingIfNeeded: element.count).bigEndian) { put($0) }
                put(element)
                precondition(position == base + length, "multiset hash message is not the length counted")
                let out = base + length
                let status = try material.withUnsafeBytes { key -> Int32 in
                    guard let keyBase = key.baseAddress else { return -1 }
                    return crypto_generichash(
                        out.assumingMemoryBound(to: UInt8.self), MultisetDigest.sumLength, base.assumingMemoryBound(to: UInt8.self),
                        UInt64(length), keyBase.assumingMemoryBound(to: UInt8.self), key.count)
                }
                guard status == 0 else { throw CryptoError(.unavailable, "crypto_generichash failed") }
                return body(UnsafeRawBufferPointer(start: out, count: MultisetDigest.sumLength))
            }
        }
    }

    /// Takes `element` out of `digest`.
    public func remove(_ element: [UInt8], domain: String, from digest: inout MultisetDigest) throws {
        digest.subtract(try hash(element, domain: domain))
    }

    /// Zeroes the key now; later use throws ``CryptoError/Code/keyWiped``.
    public func wipe() { material.wipe() }
}

extension SecureBytes {
    /// `length` bytes derived from `key` with `crypto_kdf_derive_from_key` (`context`: exactly eight bytes).
    static func derived(from key: SymmetricKey, subkeyID: UInt64, context: [UInt8], length: Int) throws -> SecureBytes {
        try Sodium.ensureInitialised()
        return try SecureBytes(count: length) { out in
            guard let outBase = out.baseAddress else { throw CryptoError(.unavailable, "no memory for a derived key") }
            let status = try key.material.withUnsafeBytes { master -> Int32 in
                guard let masterBase = master.baseAddress, master.count == Int(crypto_kdf_KEYBYTES), context.count == 8 else { return -1 }
                return context.withUnsafeBufferPointer { context in
                    context.withMemoryRebound(to: CChar.self) { chars -> Int32 in
                        guard let contextBase = chars.baseAddress else { return -1 }
                        return crypto_kdf_derive_from_key(
                            outBase.assumingMemoryBound(to: UInt8.self), out.count, subkeyID, contextBase, masterBase.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
            guard status == 0 else { throw CryptoError(.unavailable, "crypto_kdf_derive_from_key failed") }
        }
    }
}
