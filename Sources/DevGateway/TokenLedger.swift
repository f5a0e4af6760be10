import Foundation

/// The token area's state: registered clients, grants, and every token issued.
///
/// A grant is one refresh token family (RFC 9700 §4.14.2). Refreshing rotates the family's
/// active refresh token; presenting a rotated one revokes the whole family. Pure value logic:
/// the ``DevGateway`` actor owns the only instance.
struct TokenLedger: Sendable {
    struct Client: Sendable {
        var secret: String?
    }

    struct Grant: Sendable {
        let id: String
        let subject: String
        let clientID: String
        let scope: String
        let accessTokenLifetime: Duration
        /// When the subject last authenticated for this grant (the ID token's `auth_time`).
        let authTime: Date
        /// A guest account's grant (its ID tokens say `"guest": true`).
        let isGuest: Bool
        /// nil follows ``TokenLedger/rotatesRefreshTokens``.
        var rotatesRefreshTokens: Bool?
        var revoked = false
        /// Why, when a simulated forced logout revoked it (its refusal then says so as the
        /// provider it imitates documents).
        var forcedLogout: ForcedLogout?
        /// The RFC 7638 thumbprint of the DPoP key the grant's refresh tokens are bound to
        /// (RFC 9449 §5): set by the first token request with a proof; a refresh must then
        /// carry a proof by that key.
        var dpopThumbprint: String?
    }

    enum RefreshTokenStatus: Sendable {
        case active
        case rotated
    }

    struct RefreshTokenRecord: Sendable {
        let grantID: String
        var status: RefreshTokenStatus
    }

    /// One access token: its grant, the resources it is for and the scope it carries.
    struct AccessTokenRecord: Sendable {
        let grantID: String
        /// The resource URIs it was issued for (RFC 8707); empty for a token without an
        /// audience restriction (every token issued without `resource`).
        let audiences: [String]
        let scope: String
        /// The thumbprint of the DPoP key the token is bound to (RFC 9449 §6); nil for a
        /// bearer token.
        var dpopThumbprint: String?
        /// When it stops being valid: its minting plus the grant's access-token lifetime (what
        /// `expires_in` said). The resource endpoints do not refuse it after; tests that hold a
        /// client to its expiry ask ``DevGateway/accessTokenExpiries()``.
        var expiresAt: Date
    }

    private(set) var clients: [String: Client] = [:]
    private(set) var grants: [String: Grant] = [:]
    private var refreshTokens: [String: RefreshTokenRecord] = [:]
    private var accessTokens: [String: AccessTokenRecord] = [:]
    /// Whether grants that do not say otherwise issue a new refresh token on every refresh.
    var rotatesRefreshTokens = true
    /// How long a grant's refresh tokens live from its sign-in (the provider's maximum refresh
    /// token lifetime): introspection's `exp`. Nil: unbounded.
    var refreshTokenLifetime: Duration?

    // MARK: - Grants

    /// Registers (or updates) the client and opens a new grant with fresh tokens.
    mutating func issueGrant(
        subject: String,
        clientID: String,
        clientSecret: String?,
        scope: String,
        accessTokenLifetime: Duration,
        rotatesRefreshTokens: Bool?,
        authTime: Date
    ) -> IssuedTokens {
        clients[clientID] = Client(secret: clientSecret)
        return openGrant(
            subject: subject, clientID: clientID, scope: scope, authTime: authTime,
            accessTokenLifetime: accessTokenLifetime, rotatesRefreshTokens: rotatesRefreshTokens)
    }

    /// Opens a new grant for a registered client (a redeemed code, an approved device code, a
    /// guest) and returns its first tokens; the access token is for `audiences` (none: any).
    /// With `dpopThumbprint` (a token request with a DPoP proof) the grant's tokens are bound
    /// to that key.
    mutating func openGrant(
        subject: String,
        clientID: String,
        scope: String,
        authTime: Date,
        isGuest: Bool = false,
        accessTokenLifetime: Duration = .seconds(3600),
        rotatesRefreshTokens: Bool? = nil,
        audiences: [String] = [],
        dpopThumbprint: String? = nil
    ) -> IssuedTokens {
        let grant = Grant(
            id: TokenMint.identifier(prefix: "grant_"),
            subject: subject,
            clientID: clientID,
            scope: scope,
            accessTokenLifetime: accessTokenLifetime,
            authTime: authTime,
            isGuest: isGuest,
            rotatesRefreshTokens: rotatesRefreshTokens,
            dpopThumbprint: dpopThumbprint
        )
        grants[grant.id] = grant
        return mintTokens(for: grant, scope: scope, audiences: audiences, withRefreshToken: true)
    }

    /// Opens a grant of the client credentials grant (RFC 6749 §4.4) and returns its one access
    /// token, for `audiences` (none: any resource). The client is the grant's subject (RFC 9068
    /// §2.2); there is no refresh token (RFC 6749 §4.4.3). Revoking the access token revokes
    /// the grant, that token alone. With `dpopThumbprint` the token is bound to that DPoP key.
    mutating func issueClientCredentials(
        clientID: String, scope: String, accessTokenLifetime: Duration, audiences: [String], now: Date,
        dpopThumbprint: String? = nil
    ) -> IssuedTokens {
        let grant = Grant(
            id: TokenMint.identifier(prefix: "grant_"),
            subject: clientID,
            clientID: clientID,
            scope: scope,
            accessTokenLifetime: accessTokenLifetime,
            authTime: now,
            isGuest: false,
            dpopThumbprint: dpopThumbprint
        )
        grants[grant.id] = grant
        return mintTokens(for: grant, scope: scope, audiences: audiences, withRefreshToken: false)
    }

    /// Registers (or updates) a client: confidential with a secret, public without.
    mutating func registerClient(id: String, secret: String?) {
        clients[id] = Client(secret: secret)
    }

    /// Whether `clientID` is registered.
    func isRegistered(_ clientID: String) -> Bool { clients[clientID] != nil }

    /// Revokes every grant of `subject` (admin sign-out); returns how many were still live.
    /// With `forcedLogout`, later refreshes are refused as that provider documents the case.
    mutating func revokeGrants(subject: String, forcedLogout: ForcedLogout? = nil) -> Int {
        let live = grants.values.filter { $0.subject == subject && !$0.revoked }
        for grant in live {
            revokeFamily(grant.id)
            grants[grant.id]?.forcedLogout = forcedLogout
        }
        return live.count
    }

    // MARK: - Client authentication

    /// Checks a client's credentials: a secret for confidential clients, none for public ones.
    func authenticate(clientID: String, secret: String?) -> Bool {
        guard let client = clients[clientID] else { return false }
        switch (client.secret, secret) {
        case (nil, nil): return true
        case (let expected?, let presented?): return TokenMint.constantTimeEquals(expected, presented)
        default: return false
        }
    }

    // MARK: - Refresh and revocation

    enum RefreshOutcome: Sendable {
        case issued(IssuedTokens)
        case rejected(OAuthRejection, reuseDetected: Bool)
    }

    /// Refreshes for an authenticated client: rotates, or detects reuse and revokes the family.
    /// The new access token is for `audiences` (RFC 8707; none: any resource).
    ///
    /// `dpopThumbprint` is the key of the request's DPoP proof, if it had one. A grant bound to
    /// a key refreshes only with a proof by that key (RFC 9449 §5: `invalid_grant`, nothing
    /// spent); an unbound grant refreshed with a proof is bound to its key from then on. Either
    /// way the new access token is bound to the proof's key.
    mutating func refresh(
        refreshToken: String, clientID: String, requestedScope: String?, audiences: [String] = [],
        dpopThumbprint: String? = nil
    ) -> RefreshOutcome {
        guard let record = refreshTokens[refreshToken], let grant = grants[record.grantID] else {
            return .rejected(.invalidGrant("unknown refresh token"), reuseDetected: false)
        }
        guard grant.clientID == clientID else {
            return .rejected(.invalidGrant("refresh token was issued to another client"), reuseDetected: false)
        }
        guard !grant.revoked else {
            return .rejected(.invalidGrant(grant.forcedLogout?.description ?? "the grant has been revoked"), reuseDetected: false)
        }
        guard record.status == .active else {
            revokeFamily(grant.id)
            return .rejected(.invalidGrant("refresh token reuse detected; the grant has been revoked"), reuseDetected: true)
        }
        if let bound = grant.dpopThumbprint, dpopThumbprint != bound {
            let description =
                dpopThumbprint == nil
                ? "the refresh token is bound to a DPoP key: send a DPoP proof signed by that key"
                : "the refresh token is bound to another DPoP key than the proof's"
            return .rejected(.invalidGrant(description), reuseDetected: false)
        }

        var scope = grant.scope
        if let requestedScope {
            let granted = Set(grant.scope.split(separator: " "))
            let requested = Set(requestedScope.split(separator: " "))
            guard !requested.isEmpty, requested.isSubset(of: granted) else {
                return .rejected(.invalidScope("requested scope exceeds the grant"), reuseDetected: false)
            }
            scope = requestedScope
        }

        let rotates = grant.rotatesRefreshTokens ?? rotatesRefreshTokens
        if rotates {
            refreshTokens[refreshToken]?.status = .rotated
        }
        var bound = grant
        if let dpopThumbprint, grant.dpopThumbprint == nil {
            bound.dpopThumbprint = dpopThumbprint
            grants[grant.id] = bound
        }
        return .issued(mintTokens(for: bound, scope: scope, audiences: audiences, withRefreshToken: rotates))
    }

    enum RevocationOutcome: Sendable {
        case revoked
        case unknownToken
        case otherClient
    }

    /// Revokes the family of a refresh or access token presented by `clientID` (RFC 7009 §2.1).
    mutating func revoke(token: String, clientID: String) -> RevocationOutcome {
        guard let grantID = refreshTokens[token]?.grantID ?? accessTokens[token]?.grantID,
            let grant = grants[grantID]
        else {
            return .unknownToken
        }
        guard grant.clientID == clientID else { return .otherClient }
        revokeFamily(grantID)
        return .revoked
    }

    // MARK: - Bearer access (device and notification endpoints)

    /// Forgets every access token issued to `subject` (their grants and refresh tokens stay):
    /// every bearer endpoint (the resource, the device and notification API, revocation of an
    /// access token) refuses them from now on, as after a key rotation there. Returns how many.
    mutating func invalidateAccessTokens(subject: String) -> Int {
        let gone = accessTokens.filter { grants[$0.value.grantID]?.subject == subject }.map(\.key)
        for token in gone { accessTokens[token] = nil }
        return gone.count
    }

    /// The grant that issued `accessToken`, revoked or not (the caller decides what a revoked
    /// grant means); nil for a token this ledger never issued.
    func grant(forAccessToken accessToken: String) -> Grant? {
        accessTokens[accessToken].flatMap { grants[$0.grantID] }
    }

    /// What the ledger recorded of `accessToken` and its grant (revoked or not); nil for a
    /// token it never issued or has forgotten.
    func accessToken(_ accessToken: String) -> (record: AccessTokenRecord, grant: Grant)? {
        guard let record = accessTokens[accessToken], let grant = grants[record.grantID] else { return nil }
        return (record, grant)
    }

    /// Every access token issued and not invalidated, with its expiry.
    var accessTokenExpiries: [String: Date] { accessTokens.mapValues(\.expiresAt) }

    /// Puts `replacement` (the same token as a signed JWT) in the place of `accessToken`, with
    /// its record; returns false, recording nothing, if `accessToken` is gone (invalidated
    /// since it was issued).
    mutating func replaceAccessToken(_ accessToken: String, with replacement: String) -> Bool {
        guard let record = accessTokens.removeValue(forKey: accessToken) else { return false }
        accessTokens[replacement] = record
        return true
    }

    /// The grant of a refresh token that can still be used: issued, not rotated, grant not revoked.
    func liveGrant(forRefreshToken refreshToken: String) -> Grant? {
        guard let record = refreshTokens[refreshToken], record.status == .active,
            let grant = grants[record.grantID], !grant.revoked
        else { return nil }
        return grant
    }

    /// When `grant`'s refresh tokens expire (its sign-in + ``refreshTokenLifetime``); nil: never.
    func refreshTokenExpiry(of grant: Grant) -> Date? {
        refreshTokenLifetime.map { grant.authTime.addingTimeInterval(TimeInterval($0.components.seconds)) }
    }

    /// What introspection (RFC 7662) says of `token` presented by `clientID`: nil when it is not
    /// active (unknown, rotated, revoked, another client's, an expired access token).
    func introspect(_ token: String, clientID: String, now: Date) -> (subject: String, scope: String, tokenType: String, expiresAt: Date?)? {
        if let grant = liveGrant(forRefreshToken: token), grant.clientID == clientID {
            let expiry = refreshTokenExpiry(of: grant)
            if let expiry, expiry <= now { return nil }
            return (grant.subject, grant.scope, "refresh_token", expiry)
        }
        return nil
    }

    /// Revokes one grant's whole family (a terminated device's sign-in).
    mutating func revokeGrant(_ grantID: String) {
        revokeFamily(grantID)
    }

    // MARK: - Private

    private mutating func revokeFamily(_ grantID: String) {
        grants[grantID]?.revoked = true
    }

    private mutating func mintTokens(
        for grant: Grant, scope: String, audiences: [String], withRefreshToken: Bool
    ) -> IssuedTokens {
        let accessToken = TokenMint.token(prefix: "at_")
        let expiresIn = max(0, Int(grant.accessTokenLifetime.components.seconds))
        accessTokens[accessToken] = AccessTokenRecord(
            grantID: grant.id, audiences: audiences, scope: scope, dpopThumbprint: grant.dpopThumbprint,
            expiresAt: Date().addingTimeInterval(TimeInterval(expiresIn)))
        var refreshToken: String?
        if withRefreshToken {
            let token = TokenMint.token(prefix: "rt_")
            refreshTokens[token] = RefreshTokenRecord(grantID: grant.id, status: .active)
            refreshToken = token
        }
        return IssuedTokens(
            grantID: grant.id,
            accessToken: accessToken,
            tokenType: grant.dpopThumbprint == nil ? "Bearer" : "DPoP",
            expiresIn: expiresIn,
            refreshToken: refreshToken,
            idToken: nil,
            scope: scope
        )
    }
}
