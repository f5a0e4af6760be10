import Foundation
import VaultOAuth
import VaultStore

/// Tokens obtained outside the vault (a token response a tool got itself, piped in), to be
/// kept as an account's sign-in.
///
/// Only ``tokens`` and ``client`` are required: the issuer and subject come from what the user
/// gave, else from the ID token (verified when it can be), else the token endpoint's origin and
/// a generated subject (a new account, never a guess that replaces another's tokens).
public struct TokenImport: Sendable {
    /// The token response (RFC 6749 §5.1).
    public var tokens: TokenResponse
    /// The client the tokens were issued to; its token endpoint refreshes them.
    public var client: OAuthClientSettings
    public var clientSecret: String?
    /// The issuer the user named; nil: the ID token's, when its origin is the token endpoint's.
    public var issuer: String?
    /// The user the user named; an ID token that is verified must name the same one.
    public var subject: String?
    public var label: String?
    public var policy: SessionPolicy?
    /// Credential-helper entries (`host[:port][/path]`) for the account; each is normalised
    /// (``CredentialHosts/normalise(_:)``) and one that is not an entry is refused.
    public var credentialHosts: [String]

    public init(
        tokens: TokenResponse, client: OAuthClientSettings, clientSecret: String? = nil, issuer: String? = nil,
        subject: String? = nil, label: String? = nil, policy: SessionPolicy? = nil, credentialHosts: [String] = []
    ) {
        self.tokens = tokens
        self.client = client
        self.clientSecret = clientSecret
        self.issuer = issuer
        self.subject = subject
        self.label = label
        self.policy = policy
        self.credentialHosts = credentialHosts
    }

    /// Whose keys may vouch for the ID token: the issuer the user named, or the token's own
    /// `iss` only when it has the token endpoint's origin. A token naming an issuer of its own
    /// choosing elsewhere would otherwise be checked against keys it chose.
    public var vouchingIssuer: String? {
        if let issuer { return issuer }
        guard let claimed = tokens.unverifiedIDTokenNames.issuer, let url = URL(string: claimed) else { return nil }
        return Self.origin(of: url) == Self.origin(of: client.tokenEndpoint) ? claimed : nil
    }

    /// The account as the user and the unverified token name it, before any verification.
    var unverifiedAccount: NewAccount {
        let claims = tokens.unverifiedIDTokenNames
        return NewAccount(
            issuer: issuer ?? claims.issuer ?? Self.origin(of: client.tokenEndpoint),
            subject: subject ?? claims.subject ?? NewAccount.unnamedSubject(),
            label: label, client: client, clientSecret: clientSecret,
            subjectSource: subject != nil ? .given : claims.subject != nil ? .unverified : .generated)
    }

    /// `scheme://host[:port]` of `url`: the issuer of tokens whose issuer nothing names.
    public static func origin(of url: URL) -> String {
        var components = URLComponents()
        components.scheme = url.scheme
        components.host = url.host
        components.port = url.port
        return components.string ?? url.absoluteString
    }
}

extension SessionService {
    /// Keeps tokens obtained elsewhere as an account's sign-in (``TokenImport``) and makes the
    /// account active; returns it as stored.
    ///
    /// The ID token names the user for sure only once its signature is checked: when the
    /// vouching issuer (``TokenImport/vouchingIssuer``) publishes its keys, the token is verified
    /// and its subject becomes the account's (`SubjectSource.verified`); a subject the user gave
    /// that differs throws `SignInError.wrongAccount` and stores nothing.
    /// A token that fails its check throws `SignInError.idTokenRejected`.
    ///
    /// ```swift
    /// let response = try TokenResponse.parse(data)
    /// let account = try await service.importTokens(TokenImport(tokens: response, client: client))
    /// ```
    @discardableResult
    public func importTokens(_ request: TokenImport) async throws -> Account {
        let hosts = try request.credentialHosts.map { entry in
            guard let normalised = CredentialHosts.normalise(entry) else {
                throw SessionError.vault(VaultError(.invalidArgument, "\(entry) is not a credential host (host[:port][/path])"))
            }
            return normalised
        }
        var account = request.unverifiedAccount
        if let idToken = request.tokens.idToken, let vouching = request.vouchingIssuer,
            let verified = try await verifyImportedIDToken(
                idToken, issuer: vouching, clientID: request.client.clientID, pins: request.client.pins, caFile: request.client.caFile)
        {
            if let given = request.subject, given != verified.subject {
                throw SignInError.wrongAccount(expected: given, signedInAs: verified.subject)
            }
            account.subject = verified.subject
            account.subjectSource = .verified
        }
        let added = try await signIn(account, tokens: request.tokens, policy: request.policy)
        guard !hosts.isEmpty else { return added }
        let vault = self.vault
        try await vaultCall { try vault.accounts.setCredentialHosts(hosts, username: nil, for: added.id) }
        return try await vaultCall { try vault.accounts.find(added.id) } ?? added
    }
}
