import Foundation
import Testing

@testable import VaultOAuth

/// The access token's own `exp`, read when a token response has no `expires_in` (issue 13,
/// part 5): decoded, not verified, and only from something shaped like a JWT.
@Suite("A JWT access token's exp")
struct JWTExpiryTests {
    /// Base64url without padding, as JWTs are written.
    static func part(_ json: String) -> String {
        Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func jwt(_ payload: String) -> String {
        part(#"{"alg":"RS256","typ":"JWT"}"#) + "." + part(payload) + ".c2lnbmF0dXJl"
    }

    static func expiry(_ token: String) -> Date? {
        TokenResponse(accessToken: token, tokenType: "Bearer").unverifiedAccessTokenExpiry
    }

    @Test("exp read whatever the padding the payload would need, and in the URL alphabet")
    func decodes() {
        // Payloads of lengths 0, 1 and 2 modulo 3: no padding, two and one "=" dropped.
        for filler in ["", "a", "ab"] {
            #expect(Self.expiry(Self.jwt(#"{"exp":1800000600,"f":"\#(filler)"}"#)) == Date(timeIntervalSince1970: 1_800_000_600))
        }
        // "??~~" encodes to base64 with "/" and "+": base64url writes "_" and "-".
        let urlAlphabet = Self.jwt(#"{"x":"??~~","exp":1800000600}"#)
        #expect(urlAlphabet.contains("_") || urlAlphabet.contains("-"))
        #expect(Self.expiry(urlAlphabet) == Date(timeIntervalSince1970: 1_800_000_600))
        #expect(Self.expiry(Self.jwt(#"{"exp":1800000600.5}"#)) == Date(timeIntervalSince1970: 1_800_000_600.5))
        // An unsecured JWT (RFC 7519 §6) has an empty signature.
        #expect(Self.expiry(Self.part(#"{"alg":"none"}"#) + "." + Self.part(#"{"exp":1800000600}"#) + ".") != nil)
    }

    @Test("nothing from a token that is not a JWT with a numeric exp")
    func rejects() {
        let payload = Self.part(#"{"exp":1800000600}"#)
        for token in [
            "opaque-token-value",
            "header.\(payload)",  // two parts
            "h.\(payload).s.iv.tag",  // an encrypted JWT's five parts: the payload is ciphertext
            "h..s",  // no payload
            "h.\(Data(#"{"exp":1800000600, "x":"??~~"}"#.utf8).base64EncodedString()).s",  // plain base64, not base64url
            Self.jwt("not json"),
            Self.jwt(#"{"sub":"alice"}"#),
            Self.jwt(#"{"exp":"1800000600"}"#),
            Self.jwt(#"{"exp":-1}"#),
            Self.jwt(#"{"exp":true}"#),
            Self.jwt(#"[1800000600]"#),
        ] {
            #expect(Self.expiry(token) == nil, "\(token)")
        }
    }
}
