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
    public static func unverifiedExpiry(ofJWT token: String) -> Date? {
        unverifiedDate(ofJWT: token, claim: "exp")
    }

    /// A NumericDate claim (`exp`, `iat`, `nbf`) of a JWT in compact serialisation, decoded and
    /// not verified; nil for anything else.
    public static func unverifiedDate(ofJWT token: String, claim: String) -> Date? {
        guard let jwt = UnverifiedJWT(token) else { return nil }
        let seconds: Double
        switch jwt.claims[claim] {
        case .integer(let value)?: seconds = Double(value)
        case .number(let value)?: seconds = value
        default: return nil
        }
        guard seconds.isFinite, seconds > 0 else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }
}

// MARK: - Who the ID token says the user is (not verified)

extension TokenResponse {
    /// The `iss` and `sub` the ID token claims, decoded and **not verified**; nil members when
    /// there is no ID token, it is not a JWT, or a claim is missing or empty. Only good for
    /// naming an account until the token is verified
    /// (the session service's `importTokens` verifies it when it can).
    public var unverifiedIDTokenNames: (issuer: String?, subject: String?) {
        guard let idToken, let jwt = UnverifiedJWT(idToken) else { return (nil, nil) }
        return (jwt.text("iss"), jwt.text("sub"))
    }

    /// The `sub` the access token claims when it is a JWT, decoded and **not verified**: only
    /// good for naming an account that holds nothing but that token, or for noticing that it
    /// is someone else's than the account's.
    public var unverifiedAccessTokenSubject: String? { UnverifiedJWT(accessToken)?.text("sub") }
}

// MARK: - Whom the access token is for (RFC 7519 §4.1.3, RFC 9068 §3)

extension TokenResponse {
    /// The `aud` the access token claims when it is a JWT (a string or an array of strings),
    /// decoded and **not verified**; nil for an opaque token or a JWT without `aud`.
    ///
    /// Enough to notice a server that ignored RFC 8707's `resource` and sent a token for another
    /// API (it came from the token endpoint; the resource server still checks it): the vault then
    /// refuses to hand it to an API it was not made for.
    ///
    /// ```swift
    /// if let audience = tokens.unverifiedAccessTokenAudience, !audience.contains(resource) { refuse() }
    /// ```
    public var unverifiedAccessTokenAudience: [String]? {
        guard let jwt = UnverifiedJWT(accessToken) else { return nil }
        switch jwt.claims["aud"] {
        case .string(let one)?: return [one]
        case .strings(let many)?: return many
        default: return nil
        }
    }
}
