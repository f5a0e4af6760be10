import Crypto
import Foundation
import JWTKit
import Testing

@testable import VaultOAuth

/// RFC 9449 §4.2: the proofs the vault makes, read back as a server would (§4.3).
@Suite("DPoP proofs")
struct DPoPProofTests {
    /// The header and claims of a compact JWS, decoded without checking anything.
    static func parts(_ jws: String) throws -> (header: [String: Any], claims: [String: Any]) {
        let segments = jws.split(separator: ".", omittingEmptySubsequences: false)
        try #require(segments.count == 3)
        func json(_ part: Substring) throws -> [String: Any] {
            var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while text.count % 4 != 0 { text += "=" }
            let data = try #require(Data(base64Encoded: text))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        return (try json(segments[0]), try json(segments[1]))
    }

    @Test("RFC 9449 §4.2's ath example: the SHA-256 of the access token, base64url")
    func athVector() {
        #expect(DPoPKey.ath("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU") == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
    }

    @Test("a proof is a dpop+jwt ES256 JWS signed by the public key in its header, with every claim §4.2 names")
    func proofShape() async throws {
        let key = DPoPKey.generate()
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let url = try #require(URL(string: "https://api.example.test:8443/v1/files?page=2#top"))
        let proof = try key.proof(method: "get", url: url, accessToken: "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU", nonce: "n-0S6_WzA2Mj", now: now)
        let (header, claims) = try Self.parts(proof)
        #expect(header["typ"] as? String == "dpop+jwt" && header["alg"] as? String == "ES256" && header["kid"] == nil)
        let jwk = try #require(header["jwk"] as? [String: String])
        #expect(Set(jwk.keys) == ["kty", "crv", "x", "y"], "the public key only, never d")
        #expect(claims["htm"] as? String == "GET" && claims["htu"] as? String == "https://api.example.test:8443/v1/files")
        #expect(claims["iat"] as? Int == 1_790_000_000 && claims["nonce"] as? String == "n-0S6_WzA2Mj")
        #expect(claims["ath"] as? String == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
        #expect((claims["jti"] as? String)?.count ?? 0 >= 22)

        // §4.3 step 7: the signature verifies with the key in the header.
        let publicKey = try ES256PublicKey(parameters: (x: try #require(jwk["x"]), y: try #require(jwk["y"])))
        let keys = await JWTKeyCollection().add(ecdsa: publicKey)
        _ = try await keys.verify(proof, as: DPoPProofClaims.self)
        // The thumbprint (RFC 7638 §3) a server computes from the header is the one the key reports.
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(jwk["x"] ?? "")","y":"\#(jwk["y"] ?? "")"}"#
        let digest = Data(SHA256.hash(data: Data(canonical.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        #expect(key.thumbprint == digest)

        // Two proofs never share a jti; no ath or nonce when none is given.
        let plain = try Self.parts(try key.proof(method: "POST", url: url, now: now)).claims
        #expect(plain["ath"] == nil && plain["nonce"] == nil && plain["jti"] as? String != claims["jti"] as? String)
        #expect("\(key)".contains(key.thumbprint) && !"\(key)".contains("PRIVATE"))
    }

    @Test("a server's nonce and a URL travel exactly, whatever characters they hold (quotes, backslashes, control characters, non-ASCII)")
    func claimsEscaped() async throws {
        let key = DPoPKey.generate()
        let nonce = "a\"b\\c\n\t\u{01}\u{1F}é—🔑/<>"
        let url = try #require(URL(string: "https://api.example.test/v1/%22files%22/caf%C3%A9"))
        let proof = try key.proof(method: "PUT", url: url, nonce: nonce, now: Date(timeIntervalSince1970: 1_790_000_000))
        let claims = try Self.parts(proof).claims
        #expect(claims["nonce"] as? String == nonce)
        #expect(claims["htu"] as? String == "https://api.example.test/v1/%22files%22/caf%C3%A9")
        #expect(claims["htm"] as? String == "PUT")
        // Still signed by the header's key after escaping.
        let jwk = try #require(try Self.parts(proof).header["jwk"] as? [String: String])
        let publicKey = try ES256PublicKey(parameters: (x: try #require(jwk["x"]), y: try #require(jwk["y"])))
        let keys = await JWTKeyCollection().add(ecdsa: publicKey)
        let verified = try await keys.verify(proof, as: DPoPProofClaims.self)
        #expect(verified.nonce == nonce)
    }

    @Test("what comes back is checked: a bearer answer and a JWT bound to another key are refused; an opaque DPoP token passes on its type")
    func bindingChecked() throws {
        let key = DPoPKey.generate()
        func jwt(_ claims: String) -> String {
            func part(_ text: String) -> String {
                Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: "")
            }
            return part(#"{"alg":"ES256","typ":"at+jwt"}"#) + "." + part(claims) + ".c2ln"
        }
        #expect(TokenResponse(accessToken: "opaque", tokenType: "Bearer").dpopBindingProblem(for: key)?.contains("Bearer") == true)
        #expect(TokenResponse(accessToken: "opaque", tokenType: "DPoP").dpopBindingProblem(for: key) == nil)
        #expect(TokenResponse(accessToken: "opaque", tokenType: "dpop").dpopBindingProblem(for: key) == nil, "the type is case-insensitive")
        let mine = jwt(#"{"sub":"a","cnf":{"jkt":"\#(key.thumbprint)"}}"#)
        #expect(TokenResponse(accessToken: mine, tokenType: "DPoP").dpopBindingProblem(for: key) == nil)
        let theirs = jwt(#"{"sub":"a","cnf":{"jkt":"\#(DPoPKey.generate().thumbprint)"}}"#)
        #expect(TokenResponse(accessToken: theirs, tokenType: "DPoP").dpopBindingProblem(for: key)?.contains("another key") == true)
    }
}
