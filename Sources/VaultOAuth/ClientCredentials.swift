import Foundation

/// Who the client is and how it authenticates to the token and revocation endpoints.
///
/// ```swift
/// let publicApp = ClientCredentials(clientID: "vault-cli")
/// let service = ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret(secret)))
/// ```
public struct ClientCredentials: Sendable, Hashable {
    /// How the client authenticates (RFC 6749 §2.3).
    public enum Authentication: Sendable, Hashable {
        /// A public client: sends `client_id` in the form body and no secret (RFC 6749 §3.2.1).
        case none
        /// A confidential client: HTTP Basic with the form-urlencoded id and secret (RFC 6749 §2.3.1).
        case clientSecretBasic(ClientSecret)
    }

    /// The client identifier issued by the authorization server.
    public var clientID: String
    /// How the client authenticates.
    public var authentication: Authentication

    /// Creates credentials; without `authentication` the client is public.
    public init(clientID: String, authentication: Authentication = .none) {
        self.clientID = clientID
        self.authentication = authentication
    }

    /// Adds this client's authentication to a form request: a header or a body parameter.
    func apply(to headers: inout HTTPHeaderFields, form: inout [(String, String)]) {
        switch authentication {
        case .none:
            form.append(("client_id", clientID))
        case .clientSecretBasic(let secret):
            headers["Authorization"] = Self.basicAuthorization(clientID: clientID, secret: secret.value)
        }
    }

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
        case .none: []
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
        }
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// The client id and the authentication method's name, so `dump(credentials)` cannot print the secret.
    public var customMirror: Mirror {
        let method =
            switch authentication {
            case .none: "none"
            case .clientSecretBasic: "client_secret_basic"
            }
        return Mirror(self, children: ["clientID": clientID, "authentication": method], displayStyle: .struct)
    }
}
