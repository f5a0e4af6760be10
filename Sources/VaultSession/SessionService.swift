import Foundation
import Logging
import VaultOAuth
import VaultStore

/// The layer a client tool calls: "give me a valid access token for the active account,
/// or tell me exactly why not", with refresh, revocation, timeouts and accounts on top of a
/// `Vault`.
///
/// ```swift
/// let vault = try Vault.open(at: VaultLocation.defaultURL(), credential: .passphrase(pass))
/// let session = SessionService(vault: vault, oauth: OAuthClient(logger: logger))
/// try await session.start()
/// Task { for await event in session.events() { print(event) } }
///
/// let token = try await session.validAccessToken()
/// request.setValue(token.authorizationHeader, forHTTPHeaderField: "Authorization")
/// ```
///
/// Every timeout is judged from deadlines stored in the vault, so a tool that lives for a
/// second applies the same rules as a daemon; a long-running process also gets timer-driven
/// events (``SessionEvent``). Several processes may use one vault: refreshes are shared
/// through a lease in the vault, and state changes made by one are seen by the others.
public actor SessionService {
    /// The vault the service works on.
    public nonisolated let vault: Vault
    let oauth: OAuthClient
    let clock: any Clock<Duration>
    let wallClock: WallClock
    let configuration: SessionConfiguration
    let logger: Logger
    let backoff: RefreshBackoff
    let extensionHandler: (@Sendable (AccountID) async -> Bool)?
    /// This process's name in refresh leases.
    let holderID: String
    nonisolated let hub = Broadcast<SessionEvent>()

    /// The transport the service's OAuth client sends through (its trust roots, proxy and
    /// bounds): for a tool's own requests to the same provider, such as the device API.
    public nonisolated var transport: any HTTPTransport { oauth.transport }

    /// OAuth clients and ID-token verifiers for providers that chain to a private CA (an
    /// account's `caFile`), made once per file; the service's own serve every other request.
    var trustingClients: [String: (oauth: OAuthClient, verifier: IDTokenVerifier)] = [:]
    /// Token work shared in this process: requests, refreshes, the warm cache (``TokenBroker``).
    var broker = TokenBroker()
    /// The timer for the next deadline, and the idle warnings already raised.
    var timeouts = TimeoutScheduler()
    /// Why this process dropped the vault's keys (nil while unlocked).
    var lockReason: SessionEndReason?
    var watcher: Task<Void, Never>?
    /// The grant watch's task (``GrantWatch``), when configured; when each account's grant was
    /// last checked; the refresh-token expiries already warned of.
    var grantWatcher: Task<Void, Never>?
    var grantChecks: [AccountID: Date] = [:]
    /// When the watch tries an account again after a refresh of its failed.
    var grantRetryAt: [AccountID: Date] = [:]
    var refreshExpiryWarned: [AccountID: Date] = [:]
    /// Accounts whose provider did not let this client introspect: checked by refresh instead.
    var introspectionRefused: Set<AccountID> = []
    /// Refresh-token expiries told for tokens that are not JWTs, by an introspection's `exp` or a
    /// refresh answer's `refresh_expires_in` in this process (``noteRefreshExpiry(_:for:)``).
    var knownRefreshExpiry: [AccountID: ToldRefreshExpiry] = [:]
    var observed = Snapshot()
    /// Events on their way to the vault's log, and the task writing them.
    let logQueue = EventLogQueue()
    var eventWriter: Task<Void, Never>?
    /// The newest event log entry this process has seen.
    var lastEventSeq: Int64 = 0
    /// Checks ID tokens at sign-in; caches each provider's JWKS.
    let idTokenVerifier: IDTokenVerifier

    /// A session service over an open vault.
    ///
    /// - Parameters:
    ///   - vault: the open vault whose accounts, tokens and sessions the service serves; other
    ///     processes on the same file coordinate with it through the file.
    ///   - oauth: the OAuth client that refreshes and revokes tokens (its transport, pins and
    ///     endpoint rules apply to every request).
    ///   - clock: drives timers and waits; tests pass a `TestClock`.
    ///   - wallClock: the time written to and compared with the vault; must advance with `clock`.
    ///     By default the vault's own (`VaultOptions.clock`).
    ///   - configuration: refresh margins, back-off, watch and activity intervals.
    ///   - logger: where the service logs (never a token or key).
    ///   - extensionHandler: asked to confirm each extension with the server, if the identity
    ///     service has one (the codelab's extension request); nil extends locally.
    public init(
        vault: Vault,
        oauth: OAuthClient,
        clock: any Clock<Duration> = ContinuousClock(),
        wallClock: WallClock? = nil,
        configuration: SessionConfiguration = SessionConfiguration(),
        logger: Logger = Logger(label: "credentialvault.session"),
        extensionHandler: (@Sendable (AccountID) async -> Bool)? = nil
    ) {
        self.vault = vault
        self.oauth = oauth
        self.clock = clock
        self.wallClock = wallClock ?? vault.wallClock
        self.configuration = configuration
        self.logger = logger
        self.backoff = RefreshBackoff(base: configuration.backoffBase, cap: configuration.backoffCap)
        self.extensionHandler = extensionHandler
        self.holderID = "pid\(getpid())-\(UUID().uuidString.lowercased())"
        self.idTokenVerifier = IDTokenVerifier(oauth: oauth)
    }

    /// A stream of everything that happens to sessions from now on. Each call makes a new
    /// subscriber; the stream ends when the service is stopped.
    public nonisolated func events() -> AsyncStream<SessionEvent> { hub.subscribe() }

    /// Cold start: judges the stored sessions first (deadlines that passed while no process
    /// was running take effect now), then starts the timers and the watch for other processes.
    ///
    /// The active account is judged fully. Other accounts only expire here (absolute lifetime,
    /// idle with `SessionPolicy.IdleAction.expire`): their idle or background lock is applied
    /// when they are used, as a long-running process does, because a lock drops the vault's
    /// keys for every account.
    public func start() async throws {
        lastEventSeq = try await vaultCall { [vault] in try vault.events.lastSeq() }
        let active = try await activeAccount()
        for account in try await snapshot().states.keys {
            if account == active {
                _ = try? await servableSession(account)
            } else {
                try? await expireIfDue(account)
            }
        }
        observed = try await snapshot()
        scheduleTimer()
        startWatching()
        startGrantWatch()
    }

    /// Stops timers and the watches, lets the refreshes under way store their result (a
    /// rotated refresh token must not be lost to a vault closed right after), writes the events
    /// still queued for the vault's log, and ends every event stream.
    public func stop() async {
        timeouts.stop()
        watcher?.cancel()
        watcher = nil
        let grantWatch = grantWatcher
        grantWatcher = nil
        grantWatch?.cancel()
        await grantWatch?.value
        for refresh in broker.runningRefreshes { await refresh.finished() }
        for refresh in broker.runningTargetRefreshes { await refresh.finished() }
        broker.cache = nil
        logQueue.continuation.finish()
        if let eventWriter { await eventWriter.value }
        hub.finish()
    }

    // MARK: - Accounts

    /// Stores a completed sign-in (the interactive grant is the tool's job) and makes the
    /// account active. Signing in again to the same issuer and subject replaces its tokens.
    @discardableResult
    public func signIn(_ account: NewAccount, tokens response: TokenResponse, policy: SessionPolicy? = nil) async throws -> Account {
        try await signIn(account, tokens: tokenSet(from: response, previous: nil, account: account.client), policy: policy)
    }

    /// Stores a completed sign-in given as a `TokenSet`.
    ///
    /// Throws `EndpointError` (and stores nothing) when an endpoint may not receive a
    /// credential: plain http anywhere but this machine by loopback literal, user information,
    /// or plain http with pins. Throws `PinError` for a pin that is not `sha256/BASE64` of 32
    /// bytes. Pins are stored in their canonical form, each once.
    @discardableResult
    public func signIn(_ account: NewAccount, tokens: TokenSet, policy: SessionPolicy? = nil) async throws -> Account {
        try await store(account, tokens: tokens, policy: policy, authTime: nil).account
    }

    /// Stores a sign-in; `authTime` is when the user authenticated (nil: now).
    func store(_ account: NewAccount, tokens: TokenSet, policy: SessionPolicy?, authTime: Date?) async throws -> SignInRecord {
        var account = account
        account.client.pins = try checkedPins(of: account.client)
        let (vault, stored, policy) = (self.vault, account, policy ?? configuration.defaultPolicy)
        // The sign-in and its events, in one transaction.
        let recorded = recording { (record: SignInRecord) in Self.signInEvents(record).map { ($0, nil) } }
        let record = try await vaultCall { [vault] in
            try vault.accounts.signIn(stored, tokens: tokens, policy: policy, authTime: authTime, recording: recorded)
        }
        let id = record.account.id
        timeouts.forgetWarning(for: id)
        logger.info("signed in", metadata: ["account": "\(id)", "replaced": "\(record.replacedExisting)"])
        announce(Self.signInEvents(record))
        if let replaced = record.replacedTokens, replaced.refreshToken != tokens.refreshToken {
            // Replaced on purpose (the same issuer and subject): the grant it replaces ends at
            // the server too, so no second holder of that user's refresh token is left behind.
            await revokeReplaced(replaced, of: record.account)
        }
        try await settle()
        return record
    }

    /// The client's pins in canonical form, each once, after checking that its endpoints may
    /// receive a credential (``EndpointRule``) and its pins are well formed.
    func checkedPins(of client: OAuthClientSettings) throws -> [String] {
        let pins = try SPKIPin.parse(client.pins)
        try EndpointRule.check(client.tokenEndpoint, role: "token endpoint", pins: pins)
        if let revocation = client.revocationEndpoint {
            try EndpointRule.check(revocation, role: "revocation endpoint", pins: pins)
        }
        return pins.reduce(into: [String]()) { kept, pin in
            if !kept.contains(pin.description) { kept.append(pin.description) }
        }
    }

    /// Revokes the grant a sign-in replaced, best effort: a failure is logged, never thrown
    /// (the new sign-in is stored).
    func revokeReplaced(_ replaced: TokenSet, of account: Account) async {
        guard let endpoint = account.client.revocationEndpoint else {
            logger.notice(
                "the replaced grant cannot be revoked: the account has no revocation endpoint",
                metadata: ["account": "\(account.id)"])
            return
        }
        do {
            try await send(try await revocationRequest(for: replaced, of: account, at: endpoint))
            logger.info("revoked the grant the sign-in replaced", metadata: ["account": "\(account.id)"])
        } catch {
            logger.warning("could not revoke the grant the sign-in replaced", metadata: ["account": "\(account.id)", "error": "\(error)"])
        }
    }

    /// Every account in the vault.
    public func accounts() async throws -> [Account] { try await vaultCall { [vault] in try vault.accounts.all() } }

    /// The active account (persisted: every process sees the same one).
    public func activeAccount() async throws -> AccountID? { try await vaultCall { [vault] in try vault.accounts.activeID() } }

    /// Changes an account's session policy (the active account's by default); its open
    /// session's deadlines follow at once, in the same transaction as the policy.
    ///
    /// ```swift
    /// var policy = try await session.sessionPolicy()
    /// policy.absoluteLifetime = nil       // a daemon: the session lasts as long as its grant
    /// try await session.setSessionPolicy(policy)
    /// ```
    public func setSessionPolicy(_ policy: SessionPolicy, for account: AccountID? = nil) async throws {
        guard let id = try await accountOrActive(account) else { throw SessionError.noActiveAccount }
        _ = try await vaultCall { [vault] in try vault.sessions.changePolicy(policy, for: id) }
        broker.cache = nil
        timeouts.forgetWarning(for: id)
        logger.info("changed the session policy", metadata: ["account": "\(id)"])
        try await settle()
    }

    /// The account's session policy (the active account's by default).
    public func sessionPolicy(for account: AccountID? = nil) async throws -> SessionPolicy {
        guard let id = try await accountOrActive(account) else { throw SessionError.noActiveAccount }
        return try await vaultCall { [vault] in try vault.sessions.policy(for: id) }
    }

    /// `account`, or the active account when nil.
    func accountOrActive(_ account: AccountID?) async throws -> AccountID? {
        if let account { return account }
        return try await activeAccount()
    }

    /// What a sign-in tells: the switch to the account (when another was active), then its new session.
    nonisolated static func signInEvents(_ record: SignInRecord) -> [SessionEvent] {
        let id = record.account.id
        return (record.previousActive != id ? [.accountSwitched(from: record.previousActive, to: id)] : []) + [.stateChanged(id, .active)]
    }

    /// Makes another signed-in account active.
    public func switchAccount(to id: AccountID) async throws {
        guard try await activeAccount() != id else { return }
        // The switch and its event, in one transaction, from the account active in it.
        let recorded = recording { (previous: AccountID?) in previous == id ? [] : [(SessionEvent.accountSwitched(from: previous, to: id), nil)] }
        let previous = try await vaultCall { [vault] in try vault.accounts.setActive(id, recording: recorded) }
        guard previous != id else { return }
        logger.info("switched account", metadata: ["from": "\(previous.map(\.rawValue) ?? "none")", "to": "\(id)"])
        announce([.accountSwitched(from: previous, to: id)])
        try await settle()
    }

    /// Signs the account out (the active one by default), never stopping half-way:
    ///
    /// 1. Revokes its refresh token (or, without one, its access token) at the server when it
    ///    offers revocation (RFC 7009) and `revoke` is true. A failure is reported in the result
    ///    and logged as a warning; it does not stop the removal. Done first, while the account
    ///    and its token are still there: should the removal fail, a retry finds both.
    /// 2. Removes every record of the account and its key and, when it was the active account,
    ///    makes the oldest remaining account active, in one transaction.
    /// 3. Checkpoints the WAL; a checkpoint blocked by another process's reader is reported in
    ///    ``SignOutReport/removal`` (the data is cleared by a later checkpoint).
    ///
    /// Until the removal the account is signed in: a token asked for meanwhile is served (and a
    /// refresh that rotates the refresh token meanwhile is followed by a revocation of the new
    /// one). A refresh still in flight then is cancelled with the removal, with no suspension
    /// between them: whatever the server answers it, nothing is stored, served or announced.
    @discardableResult
    public func signOut(_ account: AccountID? = nil, revoke: Bool = true) async throws -> SignOutReport {
        guard let id = try await accountOrActive(account) else { throw SessionError.noActiveAccount }
        guard try await vaultCall({ [vault] in try vault.accounts.ids() }).contains(id) else { throw SessionError.notSignedIn(id) }
        let revocation = revoke ? await revokeAtServer(id) : .notAttempted("not requested")

        broker.cancelRefresh(of: id)
        // Removed on this actor's turn, with no suspension after the cancellation above: a
        // refresh that completes now finds the account gone (see the method's discussion).
        // The removal and its events, in one transaction.
        let recorded = recording { (outcome: (removed: Bool, previousActive: AccountID?, active: AccountID?)) in
            Self.signOutEvents(id, removed: outcome.removed, previousActive: outcome.previousActive, active: outcome.active).map { ($0, nil) }
        }
        let removal = try vaultCallBlocking { try vault.accounts.remove(id, recording: recorded) }
        timeouts.forgetWarning(for: id)
        logger.info("signed out", metadata: ["account": "\(id)", "checkpoint": "\(removal.checkpoint.map { "\($0)" } ?? "none")"])
        announce(Self.signOutEvents(id, removed: removal.removed, previousActive: removal.previousActive, active: removal.active))
        try await settle()
        return SignOutReport(account: id, revocation: revocation, removal: removal)
    }

    /// What a sign-out tells: the session ended, then the switch when it was the active account.
    nonisolated static func signOutEvents(_ id: AccountID, removed: Bool, previousActive: AccountID?, active: AccountID?) -> [SessionEvent] {
        guard removed else { return [] }
        return [.stateChanged(id, .signedOut)] + (previousActive == id ? [.accountSwitched(from: id, to: active)] : [])
    }

    /// Asks the server to revoke the account's refresh token (its access token when it has
    /// none). Should a refresh (here or in another process) store new tokens while the request
    /// is out, the new ones are revoked too: a server may not end the grant for a rotated-away
    /// token. Never throws: what happened is the result.
    func revokeAtServer(_ id: AccountID) async -> SignOutReport.Revocation {
        if vault.isLocked {
            logger.warning(
                "the vault is locked: removing the account without revoking its token at the server",
                metadata: ["account": "\(id)"])
            return .notAttempted("the vault is locked, so its token cannot be read")
        }
        var revokedGeneration: Int64?
        for _ in 0..<3 {
            let request: RevocationRequest
            let generation: Int64
            do {
                let vault = self.vault
                let (account, held) = try await vaultCall { (try vault.accounts.find(id), try vault.tokens.current(for: id)) }
                guard let stored = account else { return .notAttempted("the account is gone") }
                guard let endpoint = stored.client.revocationEndpoint else { return .notAttempted("the account has no revocation endpoint") }
                guard let tokens = held else { return .notAttempted("the account holds no token") }
                if tokens.generation == revokedGeneration { return .revoked }
                request = try await revocationRequest(for: tokens.tokens, of: stored, at: endpoint)
                generation = tokens.generation
            } catch {
                logger.warning(
                    "could not read what the revocation needs; removing the account without it",
                    metadata: ["account": "\(id)", "error": "\(error)"])
                return .notAttempted("its token or client settings could not be read: \(error)")
            }
            do {
                try await send(request)
                revokedGeneration = generation
            } catch {
                logger.warning(
                    "could not revoke the token at the server; removing the account anyway",
                    metadata: ["account": "\(id)", "error": "\(error)"])
                return .failed("\(error)")
            }
        }
        return .revoked
    }

    /// What revoking `tokens` sends (RFC 7009): the refresh token, or the access token when
    /// there is none, with the account's client credentials and SPKI pins.
    private struct RevocationRequest {
        var token: String
        var hint: TokenTypeHint
        var endpoint: URL
        var client: ClientCredentials
        var pins: [SPKIPin]
        var caFile: String?
    }

    private func revocationRequest(for tokens: TokenSet, of account: Account, at endpoint: URL) async throws -> RevocationRequest {
        let (token, hint) = tokens.refreshToken.map { ($0, TokenTypeHint.refreshToken) } ?? (tokens.accessToken, .accessToken)
        return RevocationRequest(
            token: token, hint: hint, endpoint: endpoint, client: try await clientCredentials(for: account),
            pins: try pins(of: account), caFile: account.client.caFile)
    }

    private func send(_ request: RevocationRequest) async throws {
        try await oauthClient(trusting: request.caFile).revoke(
            token: request.token, hint: request.hint, endpoint: request.endpoint, client: request.client,
            pins: request.pins, deadline: configuration.requestDeadline)
    }

    /// Where the account's session stands now (the active account by default), judged at this moment.
    public func status(of account: AccountID? = nil) async throws -> SessionStatus {
        guard let id = try await accountOrActive(account) else { return .signedOut }
        do {
            _ = try await servableSession(id)
            return .active
        } catch let error as SessionError {
            switch error {
            case .locked(_, let reason): return .locked(reason)
            case .expired(_, let reason): return .expired(reason)
            case .revoked: return .expired(.revoked)
            case .refused: return .expired(.refused)
            case .notSignedIn, .noActiveAccount: return .signedOut
            default: throw error
            }
        }
    }

    // MARK: - Helpers

    func now() -> Date { wallClock.now() }

    /// Runs a vault call on NIO's blocking-I/O thread pool, never on the cooperative pool
    /// (SQLite fsyncs and may wait up to its busy timeout for another process's lock), turning
    /// its errors into ``SessionError``. The actor is free for other callers meanwhile; every
    /// decision that must not rest on a stale read is made inside the call (a transition).
    func vaultCall<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await Self.offPool(body)
    }

    /// The same, on the calling thread: only where no suspension may come between this call and
    /// what came before it on the actor (``signOut(_:revoke:)`` cancelling a refresh).
    func vaultCallBlocking<T>(_ body: () throws -> T) throws -> T {
        try SessionError.wrapping(body)
    }

    /// Runs `body` off the cooperative pool (``BlockingWork``), turning ``VaultError`` into
    /// ``SessionError``.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingWork.run { try SessionError.wrapping(body) }
    }

    /// The OAuth client for a provider whose TLS chains to the PEM bundle `caFile` (an
    /// account's), with the same transport bounds and proxy; the service's own for nil.
    func oauthClient(trusting caFile: String?) throws -> OAuthClient {
        try trusting(caFile).oauth
    }

    /// The ID-token verifier for such a provider (its JWKS fetched trusting the same bundle).
    func idTokenVerifier(trusting caFile: String?) throws -> IDTokenVerifier {
        try trusting(caFile).verifier
    }

    private func trusting(_ caFile: String?) throws -> (oauth: OAuthClient, verifier: IDTokenVerifier) {
        guard let caFile else { return (oauth, idTokenVerifier) }
        if let made = trustingClients[caFile] { return made }
        var client = oauth
        client.transport = try oauth.transport.trusting(caFile: caFile)
        let made = (oauth: client, verifier: IDTokenVerifier(oauth: client))
        trustingClients[caFile] = made
        return made
    }

    /// The account's SPKI pins. A stored pin that does not parse (only a tool writing the store
    /// directly could put one there) fails closed: nothing is sent for the account.
    func pins(of account: Account) throws -> [SPKIPin] {
        do {
            return try SPKIPin.parse(account.client.pins)
        } catch {
            throw SessionError.pinningFailed(
                account.id, host: account.client.tokenEndpoint.hostForMessages,
                reason: "a stored pin is malformed (\(error.reason))")
        }
    }

    func clientCredentials(for account: Account) async throws -> ClientCredentials {
        var credentials = try await clientAuthentication(for: account)
        credentials.dpopKey = try await dpopKey(of: account)
        return credentials
    }

    /// The DPoP key a sign-in proves with: the account's when it has one (a sign-in again keeps
    /// its binding), else a new one when `asked`, else none.
    func dpopKey(signingIn existing: Account?, asked: Bool) async throws -> DPoPKey? {
        if let existing, let kept = try await dpopKey(of: existing) { return kept }
        return asked ? DPoPKey.generate() : nil
    }

    /// The key the account's tokens are bound to (RFC 9449), or nil for bearer tokens.
    func dpopKey(of account: Account) async throws -> DPoPKey? {
        guard account.hasDPoPKey else { return nil }
        guard let pem = try await vaultCall({ [vault] in try vault.accounts.dpopKey(for: account.id) }) else { return nil }
        do {
            return try DPoPKey(pem: pem)
        } catch {
            throw SessionError.clientMisconfigured(account.id, code: "unreadable_dpop_key", description: "the stored DPoP key \(error)")
        }
    }

    private func clientAuthentication(for account: Account) async throws -> ClientCredentials {
        let method = account.client.authentication
        switch method {
        case .none:
            return ClientCredentials(clientID: account.client.clientID)
        case .clientSecretBasic, .clientSecretPost:
            guard let secret = try await vaultCall({ [vault] in try vault.accounts.clientSecret(for: account.id) }) else {
                throw SessionError.clientMisconfigured(account.id, code: "missing_client_secret", description: "no client secret is stored")
            }
            return ClientCredentials(
                clientID: account.client.clientID,
                authentication: method == .clientSecretPost ? .clientSecretPost(ClientSecret(secret)) : .clientSecretBasic(ClientSecret(secret)))
        case .privateKeyJWT:
            guard let pem = try await vaultCall({ [vault] in try vault.accounts.clientSigningKey(for: account.id) }) else {
                throw SessionError.clientMisconfigured(account.id, code: "missing_signing_key", description: "no client signing key is stored")
            }
            do {
                return ClientCredentials(
                    clientID: account.client.clientID, authentication: .privateKeyJWT(try ClientSigningKey(pem: pem)),
                    assertionAudience: account.client.tokenEndpoint)
            } catch {
                throw SessionError.clientMisconfigured(account.id, code: "unreadable_signing_key", description: "the stored signing key \(error)")
            }
        }
    }

    /// New tokens for the account, by its grant: a refresh with `refreshToken` for a user's
    /// (which must then be given), or the client credentials grant for a client's. `resources`
    /// and `scope` ask for a target's token (RFC 8707, RFC 6749 §3.3).
    func requestTokens(
        for account: Account, refreshToken: String?, scope: String?, resources: [String] = [],
        client: ClientCredentials, pins: [SPKIPin], oauth: OAuthClient
    ) async throws(RefreshError) -> TokenResponse {
        let endpoint = account.client.tokenEndpoint
        switch (account.grant, refreshToken) {
        case (.clientCredentials, _):
            return try await oauth.clientCredentialsGrant(
                scope: scope, resources: resources, endpoint: endpoint, client: client, pins: pins, deadline: configuration.requestDeadline)
        case (.delegated, let refreshToken?):
            return try await oauth.refresh(
                refreshToken: refreshToken, scope: scope, resources: resources, endpoint: endpoint, client: client, pins: pins,
                deadline: configuration.requestDeadline)
        case (.delegated, nil):
            throw .clientMisconfigured(code: "no_refresh_token", description: "the account holds no refresh token")
        }
    }

    /// The tokens a response brings for `account`. A client's account keeps no refresh token:
    /// one sent with the client credentials grant (RFC 6749 §4.4.3 says it should not be) is
    /// never used, so it is not stored.
    func tokenSet(from response: TokenResponse, previous: TokenSet?, account: Account, requestedAt: Date? = nil) -> TokenSet {
        var tokens = tokenSet(from: response, previous: previous, account: account.client, requestedAt: requestedAt)
        if account.grant == .clientCredentials { tokens.refreshToken = nil }
        return tokens
    }

    /// `requestedAt`: when the request that brought `response` was sent (nil: now).
    func tokenSet(from response: TokenResponse, previous: TokenSet?, account client: OAuthClientSettings, requestedAt: Date? = nil) -> TokenSet {
        TokenSet(
            accessToken: response.accessToken,
            refreshToken: response.refreshToken ?? previous?.refreshToken,
            idToken: response.idToken ?? previous?.idToken,
            tokenType: response.tokenType,
            accessTokenExpiresAt: accessTokenExpiry(response, requestedAt: requestedAt),
            scopes: response.scope.map { $0.split(separator: " ").map(String.init) } ?? previous?.scopes ?? client.scopes)
    }

    /// The longest a JWT's own `exp` is believed ahead: a year. Beyond it the claim is taken for
    /// a mistake (milliseconds for seconds, say) and the default lifetime applies instead.
    static let longestBelievedJWTLifetime: TimeInterval = 365 * 86_400

    /// When the vault stops trusting its copy of an access token and refreshes ahead of it (less
    /// ``SessionConfiguration/leeway``). A token is never fresh forever:
    ///
    /// - the response's `expires_in`, when it has one, counted from `requestedAt`, when the
    ///   request was sent (nil: now): the server issued the token after that, so a slow answer
    ///   never makes the vault believe its token lives longer than the server does;
    /// - else the token's own `exp` when it is a JWT (``TokenResponse/unverifiedAccessTokenExpiry``):
    ///   decoded, not verified. That is enough here: the token came from the token endpoint like
    ///   `expires_in` would have, the claim only decides when the vault refreshes its own copy,
    ///   the resource server still checks the token, and an API's 401, reported
    ///   (``reportUnauthorized(_:)``), makes the vault refresh at once. Never later than `exp`.
    ///   An `exp` already past (a server clock behind this one; believed, every call would
    ///   refresh) or more than ``longestBelievedJWTLifetime`` ahead is ignored;
    /// - else ``SessionConfiguration/defaultTokenLifetime`` from now.
    func accessTokenExpiry(_ response: TokenResponse, requestedAt: Date? = nil) -> Date {
        let now = now()
        if let seconds = response.expiresIn { return min(requestedAt ?? now, now).addingTimeInterval(TimeInterval(seconds)) }
        if let exp = response.unverifiedAccessTokenExpiry, exp > now, exp <= now.addingTimeInterval(Self.longestBelievedJWTLifetime) {
            return exp
        }
        return now.addingTimeInterval(configuration.defaultTokenLifetime.timeInterval)
    }
}
