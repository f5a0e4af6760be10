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
