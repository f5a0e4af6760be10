/// What kind of access token the gateway issues for a token request with `resource` (RFC 8707).
///
/// ```swift
/// await gateway.setResourceTokenFormat(.opaque)   // a provider whose resource tokens are opaque
/// ```
public enum ResourceTokenFormat: String, Sendable, Hashable, CaseIterable, Codable {
    /// A JWT access token (RFC 9068): header `typ: "at+jwt"`, signed by the current signing key
    /// (the JWKS verifies it), with `iss`, `sub`, `aud`, `client_id`, `scope`, `iat`, `exp`, `jti`.
    case jwt
    /// An opaque random string like every other access token; the gateway still records its
    /// audience, so the resource servers treat it the same.
    case opaque
}
