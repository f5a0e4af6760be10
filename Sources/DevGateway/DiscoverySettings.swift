/// What the gateway's discovery documents publish (OpenID Connect Discovery 1.0 §4, RFC 8414 §3).
///
/// ```swift
/// await gateway.setDiscovery(DiscoverySettings(openIDConfiguration: false, omit: ["jwks_uri"]))
/// ```
public struct DiscoverySettings: Sendable, Hashable {
    /// Whether `/.well-known/openid-configuration` answers; when false it is a 404, so clients
    /// fall back to `/.well-known/oauth-authorization-server`.
    public var openIDConfiguration: Bool
    /// An issuer to publish instead of the gateway's own (for issuer-mismatch tests).
    public var issuer: String?
    /// Metadata fields left out of both documents, e.g. `token_endpoint` or `guest_endpoint`.
    public var omit: Set<String>
    /// Fields left out of the OpenID document only (a provider whose OpenID document lacks the
    /// `revocation_endpoint` its RFC 8414 one has).
    public var omitFromOpenID: Set<String>
    /// Fields the RFC 8414 document states differently (a document that disagrees, or names
    /// another issuer).
    public var authorizationServerOverrides: [String: String]

    /// Settings; the defaults publish everything under the gateway's own issuer.
    public init(
        openIDConfiguration: Bool = true, issuer: String? = nil, omit: Set<String> = [], omitFromOpenID: Set<String> = [],
        authorizationServerOverrides: [String: String] = [:]
    ) {
        self.openIDConfiguration = openIDConfiguration
        self.issuer = issuer
        self.omit = omit
        self.omitFromOpenID = omitFromOpenID
        self.authorizationServerOverrides = authorizationServerOverrides
    }
}
