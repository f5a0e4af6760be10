import Foundation
import Logging
import VaultOAuth
import VaultStore

/// How a client that is its own account (a daemon, no user) authenticates for the client
/// credentials grant (RFC 6749 §4.4).
public enum ClientCredentialsAuthentication: Sendable {
    /// A client secret, HTTP Basic (RFC 6749 §2.3.1).
    case clientSecretBasic(ClientSecret)
    /// A client secret in the form body (RFC 6749 §2.3.1).
    case clientSecretPost(ClientSecret)
    /// A signed assertion per request (RFC 7523 `private_key_jwt`); the key is sealed in the vault.
    case privateKeyJWT(ClientSigningKey)

    var method: ClientAuthentication {
        switch self {
        case .clientSecretBasic: .clientSecretBasic
        case .clientSecretPost: .clientSecretPost
        case .privateKeyJWT: .privateKeyJWT
        }
    }

    var wire: ClientCredentials.Authentication {
        switch self {
        case .clientSecretBasic(let secret): .clientSecretBasic(secret)
        case .clientSecretPost(let secret): .clientSecretPost(secret)
        case .privateKeyJWT(let key): .privateKeyJWT(key)
        }
    }
}

/// An account that is a client, not a person: what ``SessionService/signIn(client:)`` stores.
public struct ClientSignInRequest: Sendable {
    /// The provider's endpoints (only the token endpoint is needed; a revocation endpoint lets
    /// a sign-out end the client's tokens at the provider too).
    public var provider: ProviderMetadata
    public var clientID: String
    public var authentication: ClientCredentialsAuthentication
    /// The scopes the account's own token asks for; empty: what the provider grants the client.
    public var scopes: [String]
    /// SPKI pins of the provider's TLS key, `sha256/BASE64`.
    public var pins: [String]
    /// Sign this (client's) account in again: new credentials, a new session, same history.
    public var account: AccountID?
    /// The session policy; nil keeps the account's, else a client's default: no idle, absolute
    /// or background timeout (a daemon's session lasts as long as its credentials work).
    public var policy: SessionPolicy?
    /// A display name; nil: the client id.
    public var label: String?
    /// A PEM bundle of the certificate authorities the provider's TLS chains to.
    public var caFile: String?
    /// Bind the client's tokens to a key the vault keeps (RFC 9449, DPoP); signing it in again
    /// keeps the account's key.
    public var dpop: Bool

    public init(
        provider: ProviderMetadata, clientID: String, authentication: ClientCredentialsAuthentication, scopes: [String] = [],
        pins: [String] = [], account: AccountID? = nil, policy: SessionPolicy? = nil, label: String? = nil, caFile: String? = nil,
        dpop: Bool = false
    ) {
        self.dpop = dpop
        self.provider = provider
        self.clientID = clientID
        self.authentication = authentication
        self.scopes = scopes
        self.pins = pins
        self.account = account
        self.policy = policy
        self.label = label
        self.caFile = caFile
    }

    /// A client's default session policy: nothing times out on its own.
    public static let defaultPolicy = SessionPolicy(idleTimeout: nil, absoluteLifetime: nil, backgroundTimeout: nil)
}

extension SessionService {
    /// Signs a client in as an account of its own with the client credentials grant (RFC 6749
    /// §4.4): the first token is obtained now, so credentials the provider refuses store nothing
    /// (``SignInError/tokenRequestFailed(_:step:)`` with ``SignInStep/clientCredentials``).
    /// The account's subject is the client id; it holds no refresh token — ``validAccessToken(for:)``
    /// asks again with the client's credentials when the token is due, once for every caller in
    /// every process like a refresh, and tokens for other targets come the same way.
    ///
    /// ```swift
    /// let result = try await session.signIn(client: ClientSignInRequest(
    ///     provider: provider, clientID: "backup", authentication: .clientSecretPost(ClientSecret(secret)),
    ///     scopes: ["backup:write"]))
    /// ```
    @discardableResult
    public func signIn(client request: ClientSignInRequest) async throws -> SignInResult {
        let provider = request.provider
        try provider.checkEndpoints()
        let pins = try SPKIPin.parse(request.pins)
        var existing: Account?
        if let id = request.account {
            guard let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else { throw SessionError.notSignedIn(id) }
            guard account.grant == .clientCredentials, account.subject == request.clientID, account.issuer == provider.issuer else {
                throw SignInError.wrongAccount(expected: Self.name(of: account), signedInAs: "client \(request.clientID) of \(provider.issuer)")
            }
            existing = account
        }
        // A user's account of the same provider whose subject happens to be this client id is
        // never taken over by a client.
        let clash = try await vaultCall { [vault] in try vault.accounts.all() }.first {
            $0.issuer == provider.issuer && $0.subject == request.clientID && $0.grant != .clientCredentials
        }
        if let clash {
            throw SignInError.wrongAccount(expected: Self.name(of: clash), signedInAs: "client \(request.clientID)")
        }
        let dpopKey = try await self.dpopKey(signingIn: existing, asked: request.dpop)
        let client = ClientCredentials(
            clientID: request.clientID, authentication: request.authentication.wire, assertionAudience: provider.tokenEndpoint, dpopKey: dpopKey)
        let oauth = try oauthClient(trusting: request.caFile ?? existing?.client.caFile)
        let response: TokenResponse
        let requestedAt = now()
        do {
            response = try await oauth.clientCredentialsGrant(
                scope: request.scopes.isEmpty ? nil : request.scopes.joined(separator: " "), endpoint: provider.tokenEndpoint, client: client,
                pins: pins, deadline: configuration.requestDeadline)
        } catch .cancelled {
            throw SignInError.cancelled
        } catch {
            throw SignInError.tokenRequestFailed(error, step: .clientCredentials)
        }
        if let dpopKey, let problem = response.dpopBindingProblem(for: dpopKey) {
            await revokeUnstored(response, provider: provider, client: client, pins: pins, oauth: oauth)
            throw SignInError.tokenRequestFailed(.clientMisconfigured(code: "dpop_binding", description: problem), step: .clientCredentials)
        }

        var secret: String?
        var key: String?
        switch request.authentication {
        case .clientSecretBasic(let value), .clientSecretPost(let value): secret = value.value
        case .privateKeyJWT(let signing): key = signing.pemRepresentation
        }
        let settings = OAuthClientSettings(
            tokenEndpoint: provider.tokenEndpoint, revocationEndpoint: provider.revocationEndpoint, clientID: request.clientID,
            authentication: request.authentication.method, scopes: request.scopes, pins: request.pins, caFile: request.caFile)
        let new = NewAccount(
            issuer: provider.issuer, subject: request.clientID, label: request.label ?? existing?.label ?? request.clientID,
            client: settings, clientSecret: secret, clientSigningKey: key, providerMetadata: provider.encoded(), subjectSource: .given,
            grant: .clientCredentials, dpopKey: dpopKey?.pemRepresentation)
        var tokens = tokenSet(from: response, previous: nil, account: settings, requestedAt: requestedAt)
        tokens.refreshToken = nil  // never used by a client's account (RFC 6749 §4.4.3)
        var policy = request.policy
        if policy == nil, let existing { policy = try? await sessionPolicy(for: existing.id) }
        let record: SignInRecord
        do {
            record = try await store(new, tokens: tokens, policy: policy ?? ClientSignInRequest.defaultPolicy, authTime: nil)
        } catch {
            await revokeUnstored(response, provider: provider, client: client, pins: pins, oauth: oauth)
            throw error
        }
        logger.info(
            "signed in a client", metadata: ["account": "\(record.account.id)", "method": "\(request.authentication.method.rawValue)"])
        return SignInResult(
            account: record.account, idToken: nil, replacedExisting: record.replacedExisting, upgradedGuest: nil, convertedAtProvider: false,
            subjectFromUserinfo: false,
            revocation: .judge(
                endpoint: provider.revocationEndpoint, methods: provider.revocationEndpointAuthMethods, authentication: settings.authentication))
    }

    /// Replaces a `private_key_jwt` client's signing key once the provider accepts the new one
    /// (a key rollover): a client credentials grant is made with `key`, and only when it
    /// succeeds is the key stored (the token that grant brought is not kept). Until then the old
    /// key stays in use; a refusal changes nothing and throws
    /// ``SignInError/tokenRequestFailed(_:step:)``.
    public func replaceSigningKey(of id: AccountID, with key: ClientSigningKey) async throws {
        guard let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else { throw SessionError.notSignedIn(id) }
        guard account.client.authentication == .privateKeyJWT,
            let current = try await vaultCall({ [vault] in try vault.accounts.clientSigningKey(for: id) })
        else {
            throw SessionError.clientMisconfigured(id, code: "not_private_key_jwt", description: "the account does not authenticate with a signing key")
        }
        let client = ClientCredentials(
            clientID: account.client.clientID, authentication: .privateKeyJWT(key), assertionAudience: account.client.tokenEndpoint,
            dpopKey: try await dpopKey(of: account))
        let scope = account.client.scopes.isEmpty ? nil : account.client.scopes.joined(separator: " ")
        let (pins, oauth) = (try pins(of: account), try oauthClient(trusting: account.client.caFile))
        do {
            _ = try await oauth.clientCredentialsGrant(
                scope: scope, endpoint: account.client.tokenEndpoint, client: client, pins: pins, deadline: configuration.requestDeadline)
        } catch .cancelled {
            throw SignInError.cancelled
        } catch {
            throw SignInError.tokenRequestFailed(error, step: .clientCredentials)
        }
        try await vaultCall { [vault] in try vault.accounts.replaceClientSigningKey(key.pemRepresentation, expecting: current, for: id) }
        logger.info("replaced a client signing key", metadata: ["account": "\(id)", "kid": "\(key.keyID)"])
    }
}
