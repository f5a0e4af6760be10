import Foundation

/// How a client registered for the client credentials grant (RFC 6749 §4.4) authenticates at
/// the token and revocation endpoints. The gateway enforces it: any other method is refused
/// with `invalid_client`.
///
/// ```swift
/// try await gateway.registerServiceClient(id: "backup", authentication: .clientSecretPost("s3cr3t"))
/// try await gateway.registerServiceClient(id: "indexer", authentication: .privateKeyJWT(jwks: Data(publicJWK.utf8)))
/// ```
///
/// Its `description` names the method only, never the secret.
public enum ServiceClientAuthentication: Sendable, Hashable {
    /// HTTP Basic with the form-encoded id and this secret (RFC 6749 §2.3.1).
    case clientSecretBasic(String)
    /// `client_id` and `client_secret` (this secret) in the form body (RFC 6749 §2.3.1).
    case clientSecretPost(String)
    /// A client assertion (RFC 7523 §2.2, OpenID Connect Core §9) signed with ES256 by a key
    /// of `jwks`: the JSON text of a JWK Set (`{"keys": [...]}`) or of one public JWK, as
    /// `{"kty":"EC","crv":"P-256","x":"…","y":"…","kid":"…","alg":"ES256","use":"sig"}`.
    case privateKeyJWT(jwks: Data)

    /// The method's name as `token_endpoint_auth_methods_supported` lists it (RFC 8414 §2).
    public var methodName: String { method.rawValue }

    var method: ClientAuthenticationMethod {
        switch self {
        case .clientSecretBasic: .clientSecretBasic
        case .clientSecretPost: .clientSecretPost
        case .privateKeyJWT: .privateKeyJWT
        }
    }
}

extension ServiceClientAuthentication: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The method's name; never a secret.
    public var description: String { "ServiceClientAuthentication(\(methodName))" }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// A mirror without the secret, so `dump(authentication)` cannot print it.
    public var customMirror: Mirror { Mirror(self, children: ["method": methodName], displayStyle: .enum) }
}

/// A client authentication method at the token and revocation endpoints (RFC 8414 §2,
/// the IANA "OAuth Token Endpoint Authentication Methods" registry).
enum ClientAuthenticationMethod: String, Sendable, Hashable, CaseIterable, Codable {
    case clientSecretBasic = "client_secret_basic"
    case clientSecretPost = "client_secret_post"
    case privateKeyJWT = "private_key_jwt"
    /// A public client: `client_id` alone.
    case none
}
