import Foundation

/// The id of an account in a vault: a random UUID, lowercase.
public struct AccountID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (lhs: AccountID, rhs: AccountID) -> Bool { lhs.rawValue < rhs.rawValue }

    static func random() -> AccountID { AccountID(rawValue: UUID().uuidString.lowercased()) }
}

/// How a client authenticates to the token endpoint (RFC 6749 §2.3).
public enum ClientAuthentication: String, Sendable, Hashable, Codable {
    /// A public client: `client_id` goes in the request body (§3.2.1).
    case none
    /// A confidential client: HTTP Basic with the client id and secret (§2.3.1).
    case clientSecretBasic = "client_secret_basic"
}

/// The OAuth settings that let any process refresh an account's tokens.
public struct OAuthClientSettings: Sendable, Hashable, Codable {
    public var tokenEndpoint: URL
    public var revocationEndpoint: URL?
    public var clientID: String
    public var authentication: ClientAuthentication
    public var scopes: [String]
    /// SPKI SHA-256 pins of the identity service's TLS key, each `sha256/BASE64` (RFC 7469's
    /// pin form). Empty: the system's trust store alone decides. With pins, a TLS handshake
    /// whose chain holds none of them sends nothing. Several allow a key rollover.
    public var pins: [String]

    public init(tokenEndpoint: URL, revocationEndpoint: URL? = nil, clientID: String,
                authentication: ClientAuthentication = .none, scopes: [String] = [], pins: [String] = []) {
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.clientID = clientID
        self.authentication = authentication
        self.scopes = scopes
        self.pins = pins
    }
}

/// An account to add to a vault. Its description, debug description and mirror never show
/// the client secret.
public struct NewAccount: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var issuer: String
    public var subject: String
    /// A display name; sealed at rest.
    public var label: String?
    /// The account's e-mail address; sealed at rest.
    public var email: String?
    public var client: OAuthClientSettings
    /// The client secret of a confidential client; sealed at rest.
    public var clientSecret: String?

    public init(issuer: String, subject: String, label: String? = nil, email: String? = nil,
                client: OAuthClientSettings, clientSecret: String? = nil) {
        self.issuer = issuer
        self.subject = subject
        self.label = label
        self.email = email
        self.client = client
        self.clientSecret = clientSecret
    }

    public var description: String {
        "NewAccount(issuer: \(issuer), subject: \(subject), client: \(client.clientID), secret: \(clientSecret == nil ? "none" : "<redacted>"))"
    }

    public var debugDescription: String { description }

    /// Everything but the client secret's value, so `dump` cannot print it.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "issuer": issuer, "subject": subject, "label": label as Any, "email": email as Any, "client": client,
            "clientSecret": clientSecret == nil ? "none" : "<redacted>",
        ], displayStyle: .struct)
    }
}

/// An account stored in a vault, with its sealed fields opened.
public struct Account: Sendable, Hashable, Identifiable {
    public var id: AccountID
    public var issuer: String
    public var subject: String
    public var label: String?
    public var email: String?
    public var client: OAuthClientSettings
    /// Whether a client secret is stored (read it with ``Vault/clientSecret(for:)``).
    public var hasClientSecret: Bool
    public var createdAt: Date
}
