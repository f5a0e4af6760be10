import Foundation
import Logging
import VaultOAuth
import VaultStore

/// How ``SessionService/signIn(using:)`` gets the user's tokens.
public enum SignInMethod: Sendable {
    /// The device authorization grant (RFC 8628): `present` shows the user code and the
    /// verification URI (it returns at once; polling starts when it has).
    case device(present: @Sendable (DeviceAuthorization) async -> Void)
    /// The authorization code grant with PKCE and a loopback redirect (RFC 7636, RFC 8252):
    /// `open` opens the browser (with ``BrowserSignInLinks/opener``) or prints the
    /// authorization URL on the user's terminal, and returns without waiting for the browser
    /// (the redirect is answered only after it returns); the browser must come back within `timeout`.
    case browser(open: @Sendable (BrowserSignInLinks) async -> Void, timeout: Duration = .seconds(300))
    /// A new guest account from the provider's guest endpoint.
    case guest
}

/// The two ways into a browser sign-in.
public struct BrowserSignInLinks: Sendable {
    /// The authorization URL itself (state, PKCE challenge, nonce): for the user's own
    /// terminal, never for another process's arguments or environment.
    public var authorization: URL
    /// A one-time loopback URL that redirects this user's browser to ``authorization``; the
    /// one to give a browser launcher (`xdg-open URL` is readable by every user in
    /// `/proc/PID/cmdline`, and this URL answers only this user).
    public var opener: URL

    public init(authorization: URL, opener: URL) {
        self.authorization = authorization
        self.opener = opener
    }
}

/// What to sign in to, as whom, and how.
public struct SignInRequest: Sendable {
    /// The provider's endpoints: discovered (``SessionService/discoverProvider(issuer:pins:caFile:)``),
    /// or built by hand (`ProviderMetadata.Source.explicit`).
    public var provider: ProviderMetadata
    public var clientID: String
    /// A confidential client's secret (HTTP Basic, RFC 6749 §2.3.1, unless ``secretInBody``).
    public var clientSecret: String?
    /// Send ``clientSecret`` in the form body (`client_secret_post`) instead of HTTP Basic, for
    /// providers that take no Basic credentials. Nil: the account's method when signing it in
    /// again, else Basic.
    public var secretInBody: Bool?
    /// Bind the account's tokens to a key the vault keeps (RFC 9449, DPoP): a new key, or the
    /// account's when it has one (signing it in again keeps its key either way).
    public var dpop: Bool
    public var scopes: [String]
    /// SPKI pins of the provider's TLS key, `sha256/BASE64`.
    public var pins: [String]
    public var method: SignInMethod
    /// Sign this account in again: the user who signs in must be its subject.
    public var account: AccountID?
    /// OpenID Connect `max_age` (`Duration.zero`: authenticate again now, with `prompt=login`).
    public var maxAge: Duration?
    /// The session policy; nil keeps the account's (or the service's default).
    public var policy: SessionPolicy?
    /// A display name; nil takes the ID token's name, username or e-mail.
    public var label: String?
    /// The guest account to upgrade. Nil: the active account when it is a guest of this provider.
    public var upgrading: AccountID?
    /// The loopback redirect URI the provider registered, stored with the account; nil: the
    /// account's stored one, else `LoopbackRedirect.default`.
    public var redirect: LoopbackRedirect?
    /// A PEM bundle of the certificate authorities the provider's TLS chains to, stored with the
    /// account for its later requests; nil: the account's stored one, else the service's roots.
    public var caFile: String?

    public init(
        provider: ProviderMetadata, clientID: String, clientSecret: String? = nil, scopes: [String] = ["openid"],
        pins: [String] = [], method: SignInMethod, account: AccountID? = nil, maxAge: Duration? = nil,
        policy: SessionPolicy? = nil, label: String? = nil, upgrading: AccountID? = nil, redirect: LoopbackRedirect? = nil,
        caFile: String? = nil, secretInBody: Bool? = nil, dpop: Bool = false
    ) {
        self.secretInBody = secretInBody
        self.dpop = dpop
        self.provider = provider
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scopes = scopes
        self.pins = pins
        self.method = method
        self.account = account
        self.maxAge = maxAge
        self.policy = policy
        self.label = label
        self.upgrading = upgrading
        self.redirect = redirect
        self.caFile = caFile
    }
}

/// What a sign-in stored.
public struct SignInResult: Sendable {
    public var account: Account
    /// The verified ID token's claims; nil when `openid` was not asked for.
    public var idToken: VerifiedIDToken?
    /// The account was in the vault already (same issuer and subject): same id, new session.
    public var replacedExisting: Bool
    /// The guest account this sign-in took over, if any.
    public var upgradedGuest: GuestUpgrade?
    /// Whether the provider converted the guest itself (its conversion endpoint) rather than
    /// the vault linking it locally and revoking the guest's grant.
    public var convertedAtProvider: Bool
    /// The grant brought no ID token and the subject came from the userinfo endpoint (recorded
    /// as not verified).
    public var subjectFromUserinfo: Bool
    /// Whether a sign-out will be able to end this sign-in at the provider.
    public var revocation: RevocationSupport
}

extension SessionService {
    /// Reads the provider's metadata from its issuer identifier (OpenID Connect Discovery,
    /// then RFC 8414). See `OAuthClient.discover(issuer:pins:)`.
    public func discoverProvider(issuer: URL, pins: [String] = [], caFile: String? = nil) async throws -> ProviderMetadata {
        try await oauthClient(trusting: caFile).discover(issuer: issuer, pins: try SPKIPin.parse(pins))
    }

    /// Signs the user in, verifies who they are, and stores the account and its session — the
    /// same code `vault login` runs.
    ///
    /// With `openid` in the scopes, the ID token is required and verified against the
    /// provider's JWKS (signature, `iss`, `aud`/`azp`, `exp`/`iat`, `nonce`, `auth_time` when
    /// `maxAge` is set); the account's subject is its `sub`, and the session's last
    /// authentication its `auth_time`. Any failure stores nothing, and tokens already obtained
    /// are revoked at the provider (best effort) so no grant is left behind.
    ///
    /// ```swift
    /// let provider = try await session.discoverProvider(issuer: URL(string: "https://id.example.com")!)
    /// let result = try await session.signIn(using: SignInRequest(
    ///     provider: provider, clientID: "vault-cli", scopes: ["openid", "offline_access"],
    ///     method: .device { print("Open \($0.verificationURI) and enter \($0.userCode)") }))
    /// ```
    @discardableResult
    public func signIn(using request: SignInRequest) async throws -> SignInResult {
        guard case .browser = request.method else { return try await signIn(using: request, listener: nil) }
        // The browser's page waits for the outcome: "Signed in" only once the account is
        // checked and stored, else what failed.
        let listener = try await LoopbackRedirectListener.start(redirect: try await redirect(for: request))
        do {
            let result = try await signIn(using: request, listener: listener)
            await listener.finish(.signedIn)
            return result
        } catch {
            await listener.finish(Task.isCancelled ? .unfinished : .failed(Self.pageReason(error)))
            throw error
        }
    }

    /// The redirect URI a browser sign-in listens on: the one asked for, else the account's,
    /// else the default.
    private func redirect(for request: SignInRequest) async throws -> LoopbackRedirect {
        if let redirect = request.redirect { return redirect }
        guard let id = request.account, let stored = try await vaultCall({ [vault] in try vault.accounts.find(id) })?.client.redirectURI else {
            return .default
        }
        return try LoopbackRedirect(parsing: stored)
    }

    /// A secret-free sentence for the browser's page.
    static func pageReason(_ error: any Error) -> String {
        switch error {
        case let error as SignInError: "\(error.code): \(error)"
        case let error as SessionError: "\(error)"
        default: "the vault could not finish the sign-in"
        }
    }

    private func signIn(using request: SignInRequest, listener: LoopbackRedirectListener?) async throws -> SignInResult {
        let provider = request.provider
        try provider.checkEndpoints()
        let pins = try SPKIPin.parse(request.pins)
        var existing: Account?
        if let id = request.account {
            guard let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else { throw SessionError.notSignedIn(id) }
            existing = account
        }
        let inBody = request.secretInBody ?? (existing?.client.authentication == .clientSecretPost)
        let method: ClientAuthentication = request.clientSecret == nil ? .none : inBody ? .clientSecretPost : .clientSecretBasic
        // Tokens bound to a key: the account's (a sign-in again keeps it), else a new one if asked.
        let dpopKey = try await self.dpopKey(signingIn: existing, asked: request.dpop)
        let client = ClientCredentials(
            clientID: request.clientID,
            authentication: request.clientSecret.map { inBody ? .clientSecretPost(ClientSecret($0)) : .clientSecretBasic(ClientSecret($0)) } ?? .none,
            dpopKey: dpopKey)
        if let existing, existing.issuer != provider.issuer {
            throw SignInError.wrongAccount(expected: Self.name(of: existing), signedInAs: "a user of \(provider.issuer)")
        }
        // Every request of this sign-in trusts the CA file asked for, else the account's.
        let oauth = try oauthClient(trusting: request.caFile ?? existing?.client.caFile)
        let verifier = try idTokenVerifier(trusting: request.caFile ?? existing?.client.caFile)

        // 1. The user's tokens.
        var nonce: String?
        let response: TokenResponse
        switch request.method {
        case .device(let present):
            guard let endpoint = provider.deviceAuthorizationEndpoint else { throw SignInError.missingMetadata(field: "device_authorization_endpoint") }
            let authorization = try await oauth.requestDeviceAuthorization(endpoint: endpoint, client: client, scopes: request.scopes, pins: pins)
            await present(authorization)
            response = try await oauth.pollDeviceAuthorization(authorization, tokenEndpoint: provider.tokenEndpoint, client: client, pins: pins)
        case .browser(let open, let timeout):
            guard let endpoint = provider.authorizationEndpoint else { throw SignInError.missingMetadata(field: "authorization_endpoint") }
            guard let listener else { throw SignInError.listenerFailed(reason: "no loopback listener") }
            let (tokens, sent) = try await browserSignIn(
                endpoint: endpoint, provider: provider, client: client, request: request,
                pins: pins, listener: listener, open: open, timeout: timeout, oauth: oauth)
            response = tokens
            nonce = sent
        case .guest:
            guard let endpoint = provider.guestEndpoint else { throw SignInError.missingMetadata(field: "guest_endpoint") }
            response = try await oauth.registerGuest(endpoint: endpoint, client: client, scopes: request.scopes, pins: pins)
        }

        // Tokens that were to be bound to the key and are not (a provider that ignores DPoP):
        // nothing is stored, and what the provider issued is revoked rather than left standing.
        if let dpopKey, let problem = response.dpopBindingProblem(for: dpopKey) {
            await revokeUnstored(response, provider: provider, client: client, pins: pins, oauth: oauth)
            throw SignInError.tokenRequestFailed(.clientMisconfigured(code: "dpop_binding", description: problem), step: Self.tokenStep(request.method))
        }

        // 2. Who signed in. From here on a failure revokes what the provider just granted.
        let verified: VerifiedIDToken?
        var userinfo: UserInfo?
        let subject: String
        let source: SubjectSource
        do {
            verified = try await verifyIDToken(in: response, provider: provider, request: request, nonce: nonce, pins: pins, verifier: verifier)
            if let verified {
                (subject, source) = (verified.subject, .verified)
            } else if response.idToken == nil, request.scopes.contains("openid"), Self.mayLackIDToken(request.method),
                let endpoint = provider.userinfoEndpoint
            {
                // openid asked, no ID token sent by a device grant (django-oauth-toolkit's): the
                // userinfo endpoint names the user, over the same transport rules; unsigned,
                // so the subject is recorded as not verified. The code flow must send one.
                let info = try await oauth.userinfo(endpoint: endpoint, accessToken: response.accessToken, dpopKey: dpopKey, pins: pins)
                (subject, source, userinfo) = (info.subject, .unverified, info)
            } else if let existing {
                (subject, source) = (existing.subject, existing.subjectSource ?? .given)
            } else {
                (subject, source) = (NewAccount.unnamedSubject(), .generated)
            }
            if let existing, existing.subject != subject {
                throw SignInError.wrongAccount(
                    expected: Self.name(of: existing),
                    signedInAs: verified.map(Self.name(of:)) ?? userinfo.flatMap { $0.preferredUsername ?? $0.email } ?? subject)
            }
        } catch {
            await revokeUnstored(response, provider: provider, client: client, pins: pins, oauth: oauth)
            throw error
        }

        // An opaque subject (a database id) with no name in the ID token: the userinfo
        // endpoint may name the user. Only a label is taken from it, and only for this subject.
        if let verified, request.label == nil, existing?.label == nil, userinfo == nil,
            verified.name == nil, verified.preferredUsername == nil, verified.email == nil,
            let endpoint = provider.userinfoEndpoint,
            let info = try? await oauth.userinfo(endpoint: endpoint, accessToken: response.accessToken, dpopKey: dpopKey, pins: pins),
            info.subject == verified.subject
        {
            userinfo = info
        }

        // 3. Store it (and take over a guest).
        let isGuest = { if case .guest = request.method { true } else { false } }()
        let settings = OAuthClientSettings(
            tokenEndpoint: provider.tokenEndpoint, revocationEndpoint: provider.revocationEndpoint, clientID: request.clientID,
            authentication: method, scopes: request.scopes, pins: request.pins,
            redirectURI: request.redirect?.description, caFile: request.caFile)
        let new = NewAccount(
            issuer: provider.issuer, subject: subject,
            label: request.label ?? existing?.label ?? verified.flatMap { $0.name ?? $0.preferredUsername ?? $0.email }
                ?? userinfo.flatMap { $0.name ?? $0.preferredUsername ?? $0.email },
            email: verified?.email ?? userinfo?.email ?? existing?.email, client: settings, clientSecret: request.clientSecret,
            providerMetadata: provider.encoded(), subjectSource: source, kind: isGuest ? .guest : .registered,
            dpopKey: dpopKey?.pemRepresentation)
        let guest = isGuest ? nil : try await guestToUpgrade(request, provider: provider)
        let tokens = tokenSet(from: response, previous: nil, account: settings)
        let policy: SessionPolicy?
        if let policyGiven = request.policy {
            policy = policyGiven
        } else if let existing {
            policy = try? await sessionPolicy(for: existing.id)
        } else {
            policy = nil
        }
        let record = try await store(new, tokens: tokens, policy: policy, authTime: verified?.authTime)
        logger.info(
            "signed in",
            metadata: [
                "account": "\(record.account.id)", "subject_source": "\(source.rawValue)", "guest": "\(isGuest)",
                "method": "\(Self.methodName(request.method))",
            ])

        var upgrade: GuestUpgrade?
        var converted = false
        if let guest, guest.id != record.account.id {
            (upgrade, converted) = try await takeOver(
                guest, by: record.account, userAccessToken: response.accessToken,
                provider: provider, client: client, pins: pins, oauth: oauth)
        }
        return SignInResult(
            account: record.account, idToken: verified, replacedExisting: record.replacedExisting,
            upgradedGuest: upgrade, convertedAtProvider: converted, subjectFromUserinfo: userinfo != nil && verified == nil,
            revocation: .judge(
                endpoint: provider.revocationEndpoint, methods: provider.revocationEndpointAuthMethods, authentication: settings.authentication))
    }

    /// Upgrades a guest account to a registered one already in the vault, without signing in
    /// (`vault login --upgrade-guest` after the sign-in, or a tool that signed the user in itself).
    @discardableResult
    public func upgradeGuest(_ guest: AccountID, to registered: AccountID) async throws -> GuestUpgrade {
        guard let guestAccount = try await vaultCall({ [vault] in try vault.accounts.find(guest) }) else { throw SessionError.notSignedIn(guest) }
        guard let user = try await vaultCall({ [vault] in try vault.accounts.find(registered) }) else { throw SessionError.notSignedIn(registered) }
        let token = try? await validAccessToken(for: registered)
        let metadata = user.providerMetadata.flatMap(ProviderMetadata.decoded)
        let client = try await clientCredentials(for: user)
        return try await takeOver(
            guestAccount, by: user, userAccessToken: token?.value, provider: metadata,
            client: client, pins: try pins(of: user), oauth: try oauthClient(trusting: user.client.caFile)
        ).0
    }

    /// Verifies the ID token of a token response obtained elsewhere (`vault accounts add`),
    /// when the provider's metadata and keys can be reached: its claims, or nil when they
    /// could not be (the subject then stays unverified). A token that reaches the keys and
    /// fails a check throws `SignInError.idTokenRejected(_:)`. Its expiry is not held against
    /// it: it may have been received a while ago, and its signature still says whom it names.
    public func verifyImportedIDToken(
        _ idToken: String, issuer: String, clientID: String, pins: [String] = [], caFile: String? = nil
    ) async throws -> VerifiedIDToken? {
        guard let url = URL(string: issuer), url.scheme != nil, url.host != nil else { return nil }
        let provider: ProviderMetadata
        do {
            provider = try await discoverProvider(issuer: url, pins: pins, caFile: caFile)
        } catch {
            logger.notice("the imported ID token is not verified: no provider metadata", metadata: ["error": "\(error)"])
            return nil
        }
        guard let jwksURI = provider.jwksURI else { return nil }
        var expectations = IDTokenExpectations(issuer: provider.issuer, clientID: clientID, skew: configuration.idTokenClockSkew, now: now())
        expectations.checksExpiry = false
        let parsedPins = try SPKIPin.parse(pins)
        let verifier = try idTokenVerifier(trusting: caFile)
        do {
            return try await verifier.verify(idToken, jwksURI: jwksURI, expecting: expectations, pins: parsedPins)
        } catch .keySetUnavailable {
            logger.notice("the imported ID token is not verified: the provider's keys cannot be read")
            return nil
        } catch {
            throw SignInError.idTokenRejected(error)
        }
    }

    // MARK: - Steps

    private func browserSignIn(
        endpoint: URL, provider: ProviderMetadata, client: ClientCredentials, request: SignInRequest,
        pins: [SPKIPin], listener: LoopbackRedirectListener, open: @Sendable (BrowserSignInLinks) async -> Void,
        timeout: Duration, oauth: OAuthClient
    ) async throws -> (TokenResponse, String?) {
        do {
            let authorization = try AuthorizationRequest(
                endpoint: endpoint, clientID: request.clientID, redirectURI: listener.redirectURI, scopes: request.scopes,
                maxAge: request.maxAge, prompt: request.maxAge == .zero ? "login" : nil)
            await open(BrowserSignInLinks(authorization: authorization.url, opener: listener.opener(for: authorization.url)))
            let query = try await withThrowingTaskGroup(of: [URLQueryItem]?.self) { group in
                group.addTask { try await listener.nextRedirect() }
                group.addTask { [clock] in
                    try await clock.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let query = first else {
                    throw SignInError.timedOut(seconds: Int(timeout.components.seconds))
                }
                return query
            }
            let code = try authorization.code(from: query, issuer: provider.issuer, issuerRequired: provider.issuesIssuerParameter)
            let tokens = try await oauth.exchangeCode(code, of: authorization, tokenEndpoint: provider.tokenEndpoint, client: client, pins: pins)
            return (tokens, authorization.nonce)
        } catch {
            if Task.isCancelled { throw SignInError.cancelled }
            throw error
        }
    }

    /// Verifies the ID token when `openid` was asked for (required then), or when one came and
    /// the provider publishes its keys. Nil: no ID token to verify.
    private func verifyIDToken(
        in response: TokenResponse, provider: ProviderMetadata, request: SignInRequest,
        nonce: String?, pins: [SPKIPin], verifier: IDTokenVerifier
    ) async throws -> VerifiedIDToken? {
        let asked = request.scopes.contains("openid")
        guard let idToken = response.idToken else {
            // Without one, the userinfo endpoint (when published) names a device grant's user.
            if asked && (provider.userinfoEndpoint == nil || !Self.mayLackIDToken(request.method)) { throw SignInError.missingIDToken }
            return nil
        }
        guard let jwksURI = provider.jwksURI else {
            if asked { throw SignInError.missingMetadata(field: "jwks_uri") }
            return nil
        }
        let expectations = IDTokenExpectations(
            issuer: provider.issuer, clientID: request.clientID, nonce: nonce, maxAge: request.maxAge,
            skew: configuration.idTokenClockSkew, now: now(),
            algorithms: provider.idTokenSigningAlgorithms.isEmpty ? IDTokenExpectations.supportedAlgorithms : Set(provider.idTokenSigningAlgorithms))
        do {
            return try await verifier.verify(idToken, jwksURI: jwksURI, expecting: expectations, pins: pins)
        } catch {
            logger.notice("ID token rejected", metadata: ["check": "\(error.check)"])
            throw SignInError.idTokenRejected(error)
        }
    }

    /// The guest this sign-in takes over: the one asked for, else the active account when it
    /// is a guest of the same provider.
    private func guestToUpgrade(_ request: SignInRequest, provider: ProviderMetadata) async throws -> Account? {
        if let id = request.upgrading {
            guard let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else { throw SessionError.notSignedIn(id) }
            guard account.kind == .guest, account.upgradedTo == nil else {
                throw SessionError.vault(VaultError(.invalidArgument, "account \(id) is not a guest account"))
            }
            return account
        }
        guard let active = try await activeAccount(),
            let account = try await vaultCall({ [vault] in try vault.accounts.find(active) }),
            account.kind == .guest, account.upgradedTo == nil, account.issuer == provider.issuer
        else { return nil }
        return account
    }

    /// Converts the guest at the provider when it can, else revokes the guest's grant; then
    /// links it locally in one transaction.
    private func takeOver(
        _ guest: Account, by user: Account, userAccessToken: String?, provider: ProviderMetadata?,
        client: ClientCredentials, pins: [SPKIPin], oauth: OAuthClient
    ) async throws -> (GuestUpgrade, Bool) {
        let guestTokens = try? await vaultCall { [vault] in try vault.tokens.current(for: guest.id) }
        var converted = false
        if let endpoint = provider?.guestConversionEndpoint, let userAccessToken,
            let guestRefresh = guestTokens?.tokens.refreshToken
        {
            do {
                try await oauth.convertGuest(
                    endpoint: endpoint, userAccessToken: userAccessToken, guestRefreshToken: guestRefresh,
                    client: client, pins: pins)
                converted = true
            } catch {
                logger.warning("the provider did not convert the guest; linking it locally", metadata: ["account": "\(guest.id)", "error": "\(error)"])
            }
        }
        // The upgrade and the guest's end, in one transaction.
        let recorded = recording { (_: GuestUpgrade) in [(SessionEvent.stateChanged(guest.id, .signedOut), nil)] }
        let upgrade = try await vaultCall { [vault] in try vault.accounts.upgradeGuest(guest.id, to: user.id, recording: recorded) }
        if !converted, let tokens = upgrade.guestTokens {
            await revokeReplaced(tokens, of: guest)
        }
        announce([.stateChanged(guest.id, .signedOut)])
        try await settle()
        logger.info(
            "guest upgraded",
            metadata: [
                "account": "\(guest.id)", "registered": "\(user.id)", "converted_at_provider": "\(converted)",
            ])
        return (upgrade, converted)
    }

    /// Revokes tokens that were obtained but will not be stored (a failed check), best effort.
    func revokeUnstored(
        _ response: TokenResponse, provider: ProviderMetadata, client: ClientCredentials, pins: [SPKIPin], oauth: OAuthClient
    ) async {
        guard let endpoint = provider.revocationEndpoint else { return }
        let (token, hint) = response.refreshToken.map { ($0, TokenTypeHint.refreshToken) } ?? (response.accessToken, .accessToken)
        do {
            try await oauth.revoke(token: token, hint: hint, endpoint: endpoint, client: client, pins: pins, deadline: configuration.requestDeadline)
        } catch {
            logger.notice("could not revoke the tokens of a sign-in that was not stored", metadata: ["error": "\(error)"])
        }
    }

    // MARK: - Step-up

    /// A valid access token, only if the user authenticated within `maxAuthenticationAge`
    /// (the session's `SessionRecord.lastAuthentication`); otherwise throws
    /// ``SessionError/authenticationTooOld(_:authenticatedAt:maximumAge:)`` and serves nothing —
    /// the user signs in again with `max_age` (step-up) before a sensitive action.
    public func validAccessToken(for account: AccountID? = nil, maxAuthenticationAge: Duration) async throws -> AccessToken {
        guard let id = try await accountOrActive(account) else { throw SessionError.noActiveAccount }
        let session = try await vaultCall { [vault] in try vault.sessions.current(for: id) }
        guard let session else { throw SessionError.notSignedIn(id) }
        let age = now().timeIntervalSince(session.lastAuthentication)
        guard age <= maxAuthenticationAge.timeInterval else {
            throw SessionError.authenticationTooOld(id, authenticatedAt: session.lastAuthentication, maximumAge: maxAuthenticationAge)
        }
        let token = try await validAccessToken(for: id)
        return token
    }

    // MARK: - Names

    static func name(of account: Account) -> String {
        account.label ?? account.email ?? account.subject
    }

    static func name(of token: VerifiedIDToken) -> String {
        token.preferredUsername ?? token.name ?? token.email ?? token.subject
    }

    /// Whether a grant may come back without an ID token although `openid` was asked: the
    /// device grant (RFC 8628 says nothing of ID tokens; some providers send none). The code
    /// flow must send one (OpenID Connect Core §3.1.3.3).
    static func mayLackIDToken(_ method: SignInMethod) -> Bool {
        if case .device = method { return true }
        return false
    }

    /// The request of `method` that brings the tokens.
    static func tokenStep(_ method: SignInMethod) -> SignInStep {
        switch method {
        case .device: .devicePoll
        case .browser: .codeExchange
        case .guest: .guestRegistration
        }
    }

    static func methodName(_ method: SignInMethod) -> String {
        switch method {
        case .device: "device"
        case .browser: "browser"
        case .guest: "guest"
        }
    }
}
