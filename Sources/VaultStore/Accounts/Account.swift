import Foundation

/// How a client authenticates to the token endpoint (RFC 6749 §2.3).
public enum ClientAuthentication: String, Sendable, Hashable, Codable {
    /// A public client: `client_id` goes in the request body (§3.2.1).
    case none
    /// A confidential client: HTTP Basic with the client id and secret (§2.3.1).
    case clientSecretBasic = "client_secret_basic"
    /// A confidential client: the client id and secret in the form body (§2.3.1; schema 14).
    case clientSecretPost = "client_secret_post"
    /// A confidential client that signs an assertion with its own key for each request (RFC
    /// 7523 §2.2, OpenID Connect Core §9; schema 14). The key is sealed in the vault.
    case privateKeyJWT = "private_key_jwt"

    /// Whether the client authenticates with a stored secret.
    public var usesSecret: Bool { self == .clientSecretBasic || self == .clientSecretPost }

    /// The value of the `client_auth` column, whose CHECK predates schema 14's methods (those
    /// store 'none' there and their name in `client_auth_method`).
    var storedClientAuth: String { self == .clientSecretBasic ? rawValue : ClientAuthentication.none.rawValue }
    /// The value of the `client_auth_method` column (schema 14): nil for the methods `client_auth` holds.
    var storedMethod: String? { self == .clientSecretPost || self == .privateKeyJWT ? rawValue : nil }
}

/// How an account's tokens are obtained when none is valid.
public enum AccountGrant: String, Sendable, Hashable, Codable {
    /// A user signed in and delegated access: the tokens are refreshed with the refresh token
    /// that sign-in brought (RFC 6749 §6).
    case delegated
    /// The account is a client acting for itself, a daemon with no user (RFC 6749 §4.4): its
    /// tokens are obtained again with the client's own credentials, and it holds no refresh token.
    case clientCredentials = "client_credentials"
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
    /// The loopback redirect URI the provider registered for this client, as given to
    /// `vault login --redirect-uri` (schema 10); nil: the default, `http://127.0.0.1/callback`
    /// with any port.
    public var redirectURI: String?
    /// The absolute path of a PEM bundle of the certificate authorities the provider's TLS
    /// chains to (`vault login --ca-file`, schema 10); nil: the process's trust roots.
    public var caFile: String?

    public init(
        tokenEndpoint: URL, revocationEndpoint: URL? = nil, clientID: String,
        authentication: ClientAuthentication = .none, scopes: [String] = [], pins: [String] = [],
        redirectURI: String? = nil, caFile: String? = nil
    ) {
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.clientID = clientID
        self.authentication = authentication
        self.scopes = scopes
        self.pins = pins
        self.redirectURI = redirectURI
        self.caFile = caFile
    }
}

/// How an account's subject is known.
public enum SubjectSource: String, Sendable, Hashable, Codable {
    /// The `sub` of an ID token whose signature and claims were verified.
    case verified
    /// The `sub` of an ID token read without checking its signature.
    case unverified
    /// Given by whoever added the account (`--subject`).
    case given
    /// Made up by the vault (`unnamed-…`): no subject was known.
    case generated
}

/// A registered user's account, or a guest's (the identity service's guest endpoint).
public enum AccountKind: String, Sendable, Hashable, Codable {
    case registered
    case guest
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
    /// A `private_key_jwt` client's private key (PEM); sealed at rest (schema 14).
    public var clientSigningKey: String?
    /// The private key (PEM) the account's tokens are bound to (RFC 9449, DPoP); sealed at rest
    /// (schema 15). Nil: bearer tokens.
    public var dpopKey: String?
    /// The provider metadata the sign-in used (JSON with RFC 8414 member names), if any.
    public var providerMetadata: String?
    /// How the subject is known; nil: not said.
    public var subjectSource: SubjectSource?
    public var kind: AccountKind
    /// How the account's tokens are obtained again (schema 14).
    public var grant: AccountGrant

    public init(
        issuer: String, subject: String, label: String? = nil, email: String? = nil,
        client: OAuthClientSettings, clientSecret: String? = nil, clientSigningKey: String? = nil, providerMetadata: String? = nil,
        subjectSource: SubjectSource? = nil, kind: AccountKind = .registered, grant: AccountGrant = .delegated, dpopKey: String? = nil
    ) {
        self.dpopKey = dpopKey
        self.issuer = issuer
        self.subject = subject
        self.label = label
        self.email = email
        self.client = client
        self.clientSecret = clientSecret
        self.clientSigningKey = clientSigningKey
        self.providerMetadata = providerMetadata
        self.subjectSource = subjectSource
        self.kind = kind
        self.grant = grant
    }

    /// A subject for an account whose user nobody named (`unnamed-` and 8 hex digits): a new,
    /// distinct account, never a guess that replaces another's.
    public static func unnamedSubject() -> String {
        "unnamed-" + UUID().uuidString.lowercased().prefix(8)
    }

    public var description: String {
        "NewAccount(issuer: \(issuer), subject: \(subject), client: \(client.clientID), secret: \(clientSecret == nil ? "none" : "<redacted>"), signing key: \(clientSigningKey == nil ? "none" : "<redacted>"), DPoP key: \(dpopKey == nil ? "none" : "<redacted>"))"
    }

    public var debugDescription: String { description }

    /// Everything but the client secret's value, so `dump` cannot print it.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "issuer": issuer, "subject": subject, "label": label as Any, "email": email as Any, "client": client,
                "clientSecret": clientSecret == nil ? "none" : "<redacted>",
                "clientSigningKey": clientSigningKey == nil ? "none" : "<redacted>", "grant": grant,
                "dpopKey": dpopKey == nil ? "none" : "<redacted>",
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
    /// Whether a client secret is stored (read it with ``AccountStore/clientSecret(for:)``).
    public var hasClientSecret: Bool
    /// Whether a `private_key_jwt` signing key is stored (read it with
    /// ``AccountStore/clientSigningKey(for:)``; schema 14).
    public var hasClientSigningKey: Bool = false
    /// Whether the account's tokens are bound to a DPoP key the vault keeps (read it with
    /// ``AccountStore/dpopKey(for:)``; schema 15).
    public var hasDPoPKey: Bool = false
    public var createdAt: Date
    /// The provider metadata the last sign-in used (JSON, RFC 8414 member names); nil when the
    /// account was imported or added before schema 5.
    public var providerMetadata: String?
    /// How the subject is known; nil for accounts added before schema 5.
    public var subjectSource: SubjectSource?
    public var kind: AccountKind = .registered
    /// How the account's tokens are obtained again (schema 14; ``AccountGrant/delegated`` before).
    public var grant: AccountGrant = .delegated
    /// For an upgraded guest: the registered account that took it over.
    public var upgradedTo: AccountID?
    /// Where the git and docker credential helpers hand this account's token: `host[:port][/path]`.
    public var credentialHosts: [String] = []
    /// The user name the helpers answer with; nil: `oauth2`.
    public var credentialUsername: String?
    /// The entries of ``credentialHosts`` this account answers when a request names no user
    /// name and other accounts are bound to the same entry (schema 11).
    public var credentialDefaultHosts: [String] = []
    /// What the helpers hand a token for (schema 13): another API or fewer scopes than the
    /// account's own token (``TokenTarget/account``, the default).
    public var credentialTarget: TokenTarget = .account
    /// Where the account came from when a session export brought it (schema 7); nil when it
    /// was added or signed in here.
    public var origin: AccountOrigin?
    /// How much notification history the account keeps, applied on every sync (schema 8);
    /// nil: all of it.
    public var notificationRetention: NotificationRetention?
}

/// How much notification history an account keeps: none older than `days`, at most the newest
/// `count`; either or both.
public struct NotificationRetention: Sendable, Hashable, Codable {
    public var days: Int?
    public var count: Int?

    public init(days: Int? = nil, count: Int? = nil) {
        self.days = days
        self.count = count
    }

    /// Throws ``VaultError/Code/invalidArgument`` unless each bound given is positive.
    public func validate() throws {
        guard days.map({ $0 > 0 && $0 <= 36_500 }) ?? true, count.map({ $0 > 0 }) ?? true else {
            throw VaultError(.invalidArgument, "a notification retention keeps 1 to 36500 days and/or at least 1 notification")
        }
    }
}
