import Foundation

/// Who the client is and how it authenticates to the token and revocation endpoints.
///
/// ```swift
/// let publicApp = ClientCredentials(clientID: "vault-cli")
/// let service = ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret(secret)))
/// let daemon = ClientCredentials(clientID: "backup", authentication: .privateKeyJWT(signingKey))
/// ```
public struct ClientCredentials: Sendable, Hashable {
    /// How the client authenticates (RFC 6749 §2.3).
    public enum Authentication: Sendable, Hashable {
        /// A public client: sends `client_id` in the form body and no secret (RFC 6749 §3.2.1).
        case none
        /// A confidential client: HTTP Basic with the form-urlencoded id and secret (RFC 6749 §2.3.1).
        case clientSecretBasic(ClientSecret)
        /// A confidential client: `client_id` and `client_secret` in the form body (RFC 6749
        /// §2.3.1, for servers that take no Basic credentials).
        case clientSecretPost(ClientSecret)
        /// A confidential client that signs a short-lived assertion for each request (RFC 7523
        /// §2.2, OpenID Connect Core §9 `private_key_jwt`): no shared secret travels.
        case privateKeyJWT(ClientSigningKey)

        /// The method's name as RFC 8414's `token_endpoint_auth_methods_supported` lists it.
        public var methodName: String {
            switch self {
            case .none: "none"
            case .clientSecretBasic: "client_secret_basic"
            case .clientSecretPost: "client_secret_post"
            case .privateKeyJWT: "private_key_jwt"
            }
        }
    }

    /// The client identifier issued by the authorization server.
    public var clientID: String
    /// How the client authenticates.
    public var authentication: Authentication
    /// The `aud` of its assertions (``Authentication/privateKeyJWT(_:)``): the provider's token
    /// endpoint, which OpenID Connect Core §9 names for every endpoint the client authenticates
    /// at (its revocation endpoint too). Nil: the endpoint each request goes to.
    public var assertionAudience: URL?
    /// The key this client proves possession of on every request (RFC 9449, DPoP): a proof in
    /// the `DPoP` header, so the tokens issued are bound to it. Nil: bearer tokens.
    public var dpopKey: DPoPKey?

    /// Creates credentials; without `authentication` the client is public.
    public init(clientID: String, authentication: Authentication = .none, assertionAudience: URL? = nil, dpopKey: DPoPKey? = nil) {
        self.clientID = clientID
        self.authentication = authentication
        self.assertionAudience = assertionAudience
        self.dpopKey = dpopKey
    }

    /// Adds this client's authentication to a form request to `endpoint`: a header or body
    /// parameters. Returns what it added that must never be echoed (an assertion); a key that
    /// cannot sign (it always can) sends the client id alone, which the server refuses as
    /// `invalid_client`.
    func apply(to headers: inout HTTPHeaderFields, form: inout [(String, String)], endpoint: URL, now: Date) async -> [String] {
        switch authentication {
        case .none:
            form.append(("client_id", clientID))
        case .clientSecretBasic(let secret):
            headers["Authorization"] = Self.basicAuthorization(clientID: clientID, secret: secret.value)
        case .clientSecretPost(let secret):
            form += [("client_id", clientID), ("client_secret", secret.value)]
        case .privateKeyJWT(let key):
            form.append(("client_id", clientID))
            guard let assertion = try? await key.assertion(clientID: clientID, audience: assertionAudience ?? endpoint, now: now) else {
                return []
            }
            form += [("client_assertion_type", Self.jwtBearerAssertionType), ("client_assertion", assertion)]
            return [assertion]
        }
        return []
    }

    /// RFC 7523 §2.2's `client_assertion_type`.
    static let jwtBearerAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    /// `Basic base64(formEncode(id) ":" formEncode(secret))`: RFC 6749 §2.3.1 encodes before base64.
    static func basicAuthorization(clientID: String, secret: String) -> String {
        let pair = FormURLEncoding.encode(clientID) + ":" + FormURLEncoding.encode(secret)
        return "Basic " + Data(pair.utf8).base64EncodedString()
    }

    /// Strings that must never be echoed back in an error or log: the secret, if any, and the
    /// `client_id:client_secret` pair the Basic credential encodes, both as it is and
    /// form-encoded (RFC 6749 §2.3.1), so `Redaction` also catches each pair's base64.
    var secrets: [String] {
        switch authentication {
        case .none, .privateKeyJWT: []
        case .clientSecretPost(let secret): [secret.value, FormURLEncoding.encode(secret.value)]
        case .clientSecretBasic(let secret):
            [
                secret.value, clientID + ":" + secret.value,
                FormURLEncoding.encode(clientID) + ":" + FormURLEncoding.encode(secret.value),
            ]
        }
    }
}

extension ClientCredentials: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The client id and authentication method, never the secret.
    public var description: String {
        switch authentication {
        case .none: "ClientCredentials(clientID: \(clientID), authentication: none)"
        case .clientSecretBasic(let secret): "ClientCredentials(clientID: \(clientID), authentication: client_secret_basic \(secret))"
        case .clientSecretPost(let secret): "ClientCredentials(clientID: \(clientID), authentication: client_secret_post \(secret))"
        case .privateKeyJWT(let key): "ClientCredentials(clientID: \(clientID), authentication: private_key_jwt \(key))"
        }
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// The client id and the authentication method's name, so `dump(credentials)` cannot print the secret.
    public var customMirror: Mirror {
        Mirror(self, children: ["clientID": clientID, "authentication": authentication.methodName], displayStyle: .struct)
    }
}
