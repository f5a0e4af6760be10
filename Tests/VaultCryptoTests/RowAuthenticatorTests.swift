import Testing
import VaultCrypto

/// The row MAC's streaming input: however a row's bytes are handed over (one byte at a time,
/// pieces that straddle the input's internal batch, pieces larger than it), the tag is the
/// tag of their concatenation. Stored rows were authenticated by earlier builds that hashed
/// each piece on its own; a different split must never give a different tag.
@Suite struct RowAuthenticatorTests {
    static let sizes = [0, 1, 3, 4, 255, 511, 512, 513, 1024, 2000, 70_000]

    @Test("a tag fed in pieces of any size equals the tag of the whole message", arguments: [[1], sizes, sizes.reversed(), [511, 1, 1, 511, 513, 4]])
    func piecesMatchWhole(pieceSizes: [Int]) throws {
        let authenticator = try RowAuthenticator(derivedFrom: SymmetricKey.generate(id: 4))
        var pieces: [[UInt8]] = []
        var next: UInt8 = 0
        for size in pieceSizes {
            pieces.append(
                (0..<size).map { _ in
                    next &+= 37
                    return next
                })
        }
        let whole = pieces.flatMap { $0 }
        let streamed = try authenticator.tag { input in
            for piece in pieces { input.append(piece) }
        }
        #expect(streamed == (try authenticator.tag(whole)))
        let byteByByte = try authenticator.tag { input in
            for byte in whole { input.append(byte: byte) }
        }
        #expect(byteByByte == streamed)
        #expect(try authenticator.matches(tag: streamed[...]) { input in input.append(whole) })
        var altered = whole
        if !altered.isEmpty {
            altered[altered.count / 2] ^= 1
            #expect(!(try authenticator.matches(altered, tag: streamed)))
        }
    }

    @Test("a length prefix is four big-endian bytes")
    func bigEndianLength() throws {
        let authenticator = try RowAuthenticator(derivedFrom: SymmetricKey.generate(id: 4))
        let prefixed = try authenticator.tag { input in
            input.append(bigEndian: 0x0102_0304)
            input.append([9])
        }
        #expect(prefixed == (try authenticator.tag([1, 2, 3, 4, 9])))
    }

    @Test("a tag of another length never matches")
    func otherLengthTag() throws {
        let authenticator = try RowAuthenticator(derivedFrom: SymmetricKey.generate(id: 4))
        let tag = try authenticator.tag([1, 2, 3])
        #expect(!(try authenticator.matches([1, 2, 3], tag: tag.dropLast())))
        #expect(!(try authenticator.matches([1, 2, 3], tag: tag + [0])))
        #expect(try authenticator.matches([1, 2, 3], tag: tag))
    }
}
