import Foundation
import VaultCrypto

// MARK: - The access token's own expiry (RFC 7519 §4.1.4)

extension TokenResponse {
    /// The `exp` claim of the access token when it is a JWT (RFC 7519): three base64url parts,
    /// the middle one a JSON object with a numeric `exp`. Nil for an opaque token, an encrypted
    /// JWT (five parts), or a payload without a numeric `exp`.
    ///
    /// Decoded, **not verified**: the signature is not checked, so this says only what the
    /// token claims. Use it where believing the claim can do no harm, such as deciding how long
    /// to keep using a token the token endpoint just sent when the response has no `expires_in`
    /// (the resource server still checks the token itself). Never believe another claim from it.
    ///
    /// ```swift
    /// let expiry = tokens.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) }
    ///     ?? tokens.unverifiedAccessTokenExpiry ?? now.addingTimeInterval(3600)
    /// ```
    public var unverifiedAccessTokenExpiry: Date? { Self.unverifiedExpiry(ofJWT: accessToken) }

    /// The `exp` of a JWT in compact serialisation, decoded and not verified; nil for anything else.
    static func unverifiedExpiry(ofJWT token: String) -> Date? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[1].isEmpty, parts.allSatisfy(Base64URL.isAlphabet) else { return nil }
        guard let payload = Base64URL.decode(parts[1]), let claims = JSONFields.parse(Data(payload)) else { return nil }
        let seconds: Double
        switch claims["exp"] {
        case .integer(let value)?: seconds = Double(value)
        case .number(let value)?: seconds = value
        default: return nil
        }
        guard seconds.isFinite, seconds > 0 else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }
}
