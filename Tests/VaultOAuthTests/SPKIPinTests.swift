import Foundation
import Testing
import VaultOAuth
import VaultTestSupport

@Suite("What a pin is")
struct SPKIPinTests {
    @Test("sha256/ and the standard base64 of 32 bytes; printed back the same way")
    func wellFormed() throws {
        let text = "sha256/" + Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let pin = try SPKIPin(text)
        #expect(pin.digest == (0..<32).map { UInt8($0) })
        #expect(pin.description == text)
    }

    @Test(
        "refused with the rule named",
        arguments: [
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  // no prefix
            "sha1/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  // another hash
            "SHA256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  // the prefix is lowercase
            "sha256/47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=",  // base64url
            "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",  // unpadded
            "sha256/ 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  // blank
            "sha256/AAAA",  // 3 bytes
            "sha256/" + Data(repeating: 1, count: 48).base64EncodedString(),  // SHA-384 sized
            "sha256/",
        ])
    func malformed(_ text: String) {
        #expect(throws: PinError.self) { try SPKIPin(text) }
        do {
            _ = try SPKIPin(text)
        } catch {
            #expect(error.description.contains("sha256/ followed by the base64"))
        }
    }

    @Test("the pin of a certificate is the SHA-256 of its SubjectPublicKeyInfo (checked against swift-crypto)")
    func pinOfACertificate() throws {
        let chain = try TestChain()
        #expect(try SPKIPin(certificateDER: chain.leaf.der).description == chain.leaf.pin)
        #expect(try SPKIPin(certificateDER: chain.root.der).description == chain.root.pin)
    }
}
