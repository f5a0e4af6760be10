import Foundation
import Testing
import VaultCrypto

/// The library's one base64url (RFC 4648 §5, no padding): RFC 4648's test vectors, and what it
/// refuses.
@Suite("base64url")
struct Base64URLTests {
    @Test("RFC 4648 §10's vectors, in the URL alphabet and without padding, both ways")
    func vectors() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_", "the two letters that differ from base64")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test("every length and every byte value encodes as Foundation's base64 does, in the URL alphabet, and decodes back")
    func matchesFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { index in length < 3 ? UInt8(truncatingIfNeeded: index &* 97) : UInt8.random(in: .min ... .max, using: &generator) }
            let reference = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == reference, "\(length) bytes")
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        let all = (0...255).map(UInt8.init)
        var appended = Array("prefix.".utf8)
        Base64URL.append(all, to: &appended)
        #expect(String(decoding: appended, as: UTF8.self) == "prefix." + Base64URL.encode(all))
        #expect(Base64URL.decode(Base64URL.encode(all)) == all)
    }

    @Test("decoding into a buffer (a key's): the canonical text of up to its size, nothing else")
    func decodeIntoBuffer() {
        func decoded(_ text: String, capacity: Int) -> [UInt8]? {
            var output = [UInt8](repeating: 0, count: capacity)
            let bytes = Array(text.utf8)
            let count = bytes.withUnsafeBufferPointer { input in output.withUnsafeMutableBytes { Base64URL.decode(input, into: $0) } }
            return count.map { Array(output.prefix($0)) }
        }
        let key = (0..<32).map { UInt8($0 * 7 + 3) }
        #expect(decoded(Base64URL.encode(key), capacity: 32) == key)
        #expect(decoded(Base64URL.encode(key), capacity: 31) == nil, "more bytes than the buffer holds")
        for (plain, text) in [("f", "Zg"), ("fo", "Zm8"), ("foobar", "Zm9vYmFy"), ("", "")] {
            #expect(decoded(text, capacity: 8) == Array(plain.utf8))
        }
        for text in ["Zh", "Zm9", "Zg==", "Zm9vY", "Zm+v", "Zm9v\n"] {
            #expect(decoded(text, capacity: 8) == nil, "\(text)")
        }
    }

    @Test("padding, the base64 letters + and /, other characters and impossible lengths are refused")
    func refusals() {
        for text in ["Zg==", "+/+/", "Zm9v YmFy", "Zm9vY", "Zm9v\n", "é"] {
            #expect(Base64URL.decode(text) == nil, "\(text)")
        }
    }

    @Test("canonical decoding refuses a second text for the same bytes (unused bits set) and the empty text")
    func canonical() {
        #expect(Base64URL.decode("Zh") == Array("f".utf8), "lenient: the unused bits are ignored")
        #expect(Base64URL.decodeCanonical("Zh") == nil)
        #expect(Base64URL.decodeCanonical("Zg") == Array("f".utf8))
        #expect(Base64URL.decodeCanonical("") == nil)
    }
}
