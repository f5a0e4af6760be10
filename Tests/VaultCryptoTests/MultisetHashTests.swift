import Foundation
import Testing

@testable import VaultCrypto

/// The keyed multiset hash behind the vault's collection commitments (issue 31), against test
/// vectors computed independently (Python's hashlib: BLAKE2b with key, salt and personalisation,
/// which is what `crypto_kdf_derive_from_key` is, then keyed BLAKE2b-256 per element, summed
/// little-endian modulo 2^256).
@Suite struct MultisetHashTests {
    /// Root key 00 01 02 … 1f (id 9), elements 45 bytes of 01, of 02, of 03.
    func hasher() throws -> MultisetHasher {
        try MultisetHasher(derivedFrom: SymmetricKey(id: 9, bytes: SecureBytes(copying: (0..<32).map { UInt8($0) })))
    }
    let elements: [[UInt8]] = [1, 2, 3].map { [UInt8](repeating: $0, count: 45) }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test("element hashes and sums match the independent vectors")
    func vectors() throws {
        let hasher = try hasher()
        #expect(Self.hex(try hasher.hash(elements[0], domain: "devices")) == "a29b1408b4d4e86e7aa2f8a5671a350435aca94a06c6754c333435b63681e33b")
        #expect(Self.hex(try hasher.hash(elements[0], domain: "events")) == "e43a4fb180618a11a3dc48ca07dd12d88e1fd3a334961f07ea14ab6b12c963a4")
        var digest = MultisetDigest()
        for element in elements { try hasher.insert(element, domain: "devices", into: &digest) }
        #expect(digest.count == 3)
        #expect(Self.hex(digest.sum) == "87d6a4b73bf83eaae4c64f785961649eb5e5c77635e3951e2e1ecc63776c6b59")
        try hasher.insert(elements[0], domain: "devices", into: &digest)
        #expect(Self.hex(digest.sum) == "2972b9bfefcc27195f69481ec17b99a2ea9171c13ba90b6b6152011aaeed4e95", "a multiset: twice is not once")
    }

    @Test("order does not matter; removing gives back the smaller set's digest and, at the end, the empty one")
    func incremental() throws {
        let hasher = try hasher()
        var forward = MultisetDigest()
        var backward = MultisetDigest()
        for element in elements { try hasher.insert(element, domain: "devices", into: &forward) }
        for element in elements.reversed() { try hasher.insert(element, domain: "devices", into: &backward) }
        #expect(forward == backward)
        try hasher.remove(elements[2], domain: "devices", from: &forward)
        #expect(Self.hex(forward.sum) == "1fb7aec0ecd9d26e81188072f3fc82fcd1c765847e6d07e7804c47d5751ec4ba" && forward.count == 2)
        for element in elements.prefix(2) { try hasher.remove(element, domain: "devices", from: &forward) }
        #expect(forward == MultisetDigest())
    }

    @Test("another root key gives other digests for the same elements")
    func keyed() throws {
        let other = try MultisetHasher(derivedFrom: SymmetricKey.generate(id: 1))
        var mine = MultisetDigest()
        var theirs = MultisetDigest()
        try hasher().insert(elements[0], domain: "devices", into: &mine)
        try other.insert(elements[0], domain: "devices", into: &theirs)
        #expect(mine.count == theirs.count && mine.sum != theirs.sum)
    }
}
