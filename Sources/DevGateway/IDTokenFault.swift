/// A defect the gateway builds into the ID tokens it issues next, for testing a client's
/// ID-token validation (OpenID Connect Core §3.1.3.7).
///
/// ```swift
/// await gateway.corruptNextIDTokens(with: .wrongAudience)
/// ```
public enum IDTokenFault: String, Sendable, Hashable, CaseIterable, Codable {
    /// One byte of the signature flipped.
    case badSignature = "bad_signature"
    /// `alg: none` and an empty signature.
    case algNone = "alg_none"
    /// HMAC-SHA256 with the client id as the key, under the current key's `kid`.
    case hs256
    /// Signed by a key that is not in the JWKS, with a `kid` never published.
    case unknownKey = "unknown_key"
    /// `iss` names another issuer.
    case wrongIssuer = "wrong_issuer"
    /// `aud` and `azp` name another client.
    case wrongAudience = "wrong_audience"
    /// `exp` one hour in the past.
    case expired
    /// `iat` one hour in the future.
    case issuedInFuture = "issued_in_future"
    /// A `nonce` that is not the one of the request.
    case wrongNonce = "wrong_nonce"
    /// No `id_token` in the token response at all.
    case omitted
}
