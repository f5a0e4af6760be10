import Foundation
import Logging
import VaultCrypto
import VaultOAuth
import VaultStore

// MARK: - Tokens

extension SessionService {
    /// A token that stays valid for at least ``SessionConfiguration/leeway``, for the given
    /// account or the active one, refreshing ahead of expiry when needed.
    ///
    /// Concurrent callers share one refresh, in this process and across processes using the
    /// same vault. Throws ``SessionError``: locked, expired, revoked, not signed in,
    /// temporarily unavailable (transient failures, with no valid token left), or
    /// ``SessionError/accountChanged(from:to:)`` when asked for the active account and
    /// another became active meanwhile, so one account's token is never served for another.
    public func validAccessToken(for account: AccountID? = nil) async throws -> AccessToken {
        let request = TokenRequest(account)
        while true {
            let stamp: VaultChangeStamp?
            switch try cachedAccessToken(for: account) {
            case .hit(let token): return token
            case .miss(let taken): stamp = taken
            }
            // One caller's request is worked out at a time, by that caller (no task, no hop: the
            // common case is one caller): the others asking the same meanwhile (waiting on the
            // server or another process's refresh) share its answer without reading anything,
            // and one cancelled while waiting leaves at once. The refresh underneath is shared
            // work of its own that finishes whoever leaves.
            let (serving, joined) = broker.serving(request)
            do {
                let token = try await joined ? serving.value() : serving.lead { try await serveAccessToken(for: account, stamp: stamp) }
                broker.release(serving, for: request)
                return token
            } catch {
                broker.release(serving, for: request)
                // Cancelled work this caller did not cancel (a refresh stopped by a sign-out whose
                // session lives on), or an active account that changed while another caller's
                // request was worked out, which may be the one this caller asked for: ask again.
                if error is CancellationError, !Task.isCancelled { continue }
                if joined, case SessionError.accountChanged = error { continue }
                throw error
            }
        }
    }

    /// The slow path of ``validAccessToken(for:)``: one read of everything the answer depends
    /// on, then the token, or a refresh. `stamp` was taken before the read (nil: take one now).
    private func serveAccessToken(for account: AccountID?, stamp: VaultChangeStamp?) async throws -> AccessToken {
        if vault.isLocked {
            // No sealed value opens: the session's state says why (locked, expired, signed out).
            _ = try await servableSession(try await resolve(account))
        }
        let (stamp, read) = try await lockAware(account) { try await self.stampedSnapshot(for: account, stamp: stamp) }
        guard let snapshot = read else { throw SessionError.noActiveAccount }
        let id = snapshot.account
        var (session, warning) = try await judgedSession(id, current: snapshot.session, policy: snapshot.policy)
        guard let token = snapshot.token else { throw try await noTokensError(id) }
        if snapshot.policy.activity == .any {
            // A token served is activity (a script's session lives while it works).
            if let touched = try await touch(session, policy: snapshot.policy, raising: warning) { session = touched }
        } else if let warning {
            announce(warning)
        }
        if isFresh(token.expiresAt) {
            cacheAccessToken(
                token, session: session, policy: snapshot.policy, stamp: stamp, activeAccount: account == nil ? id : nil,
                revision: snapshot.revision)
            return AccessToken(token)
        }
        let refreshed = try await refresh(id, from: token.generation, force: false)
        // Judged again on the vault as it is after the wait (another process may have switched
        // the active account or ended the session), and cached for the callers after this one.
        let (after, reread) = try await stampedSnapshot(for: account, stamp: nil)
        guard let now = reread, now.account == id else {
            throw SessionError.accountChanged(from: id, to: try await activeAccount())
        }
        if let current = now.token, current.generation == refreshed.generation, let session = now.session,
            case .active = SessionJudge.judge(session, policy: now.policy, now: self.now()), isFresh(current.expiresAt)
        {
            cacheAccessToken(
                current, session: session, policy: now.policy, stamp: after, activeAccount: account == nil ? id : nil,
                revision: now.revision)
        }
        return AccessToken(StoredAccessToken(refreshed))
    }

    /// The read behind a token request and, unless the caller took one, the change stamp taken
    /// just before it, in one trip to the I/O threads: the stamp's connection is opened there
    /// on first use (file I/O that must not run on the actor), and a commit landing after the
    /// stamp makes the cache entry made from this read unusable.
    /// Runs `read`; when it fails because this process's timer locked the vault while the read
    /// was away from the actor (its keys went mid-read), the session's own state is the answer
    /// (``SessionError/locked(_:_:)``), not the read's error.
    func lockAware<T>(_ account: AccountID?, _ read: () async throws -> T) async throws -> T {
        do {
            return try await read()
        } catch let error as SessionError {
            guard case .vault = error, vault.isLocked else { throw error }
            _ = try await servableSession(try await resolve(account))
            throw error
        }
    }

    func stampedSnapshot(for account: AccountID?, stamp: VaultChangeStamp?, target: TokenTarget = .account) async throws -> (VaultChangeStamp?, AccessSnapshot?)
    {
        try await vaultCall { [vault] in
            let stamp = stamp ?? (try? vault.changeStamp())
            return (stamp, try vault.tokens.accessSnapshot(for: account, target: target))
        }
    }

    /// A valid token that stays valid for at least `minimumValidity` (`vault token --min-ttl`,
    /// `vault exec`): the usual token when it does, else refreshed first (one refresh, shared
    /// with every other caller and process like any other). Once a refresh has shown that the
    /// server's tokens do not live longer than `minimumValidity` (and half a minute), this
    /// process stops refreshing for it: the token is returned as it is, not refreshed on every
    /// call (a long-running process, the agent, learns it once; a one-shot process each time).
    public func validAccessToken(for account: AccountID? = nil, minimumValidity: Duration) async throws -> AccessToken {
        let token = try await validAccessToken(for: account)
        guard let expiry = token.expiresAt, expiry.timeIntervalSince(now()) < minimumValidity.timeInterval else { return token }
        guard let stored = try await vaultCall({ [vault] in try vault.tokens.current(for: token.account) }) else {
            throw try await noTokensError(token.account)
        }
        // Replaced meanwhile (a refresh token rotated by a target's refresh alone raises the
        // generation and keeps the access token: not a replacement).
        if stored.generation != token.generation, !ConstantTime.equals(stored.tokens.accessToken, token.value) { return AccessToken(stored) }
        if let lifetime = broker.lifetime(of: token.account), lifetime < minimumValidity.timeInterval + Self.minimumValidityMargin {
            logger.debug("the server's tokens do not live as long as asked; not refreshing", metadata: ["account": "\(token.account)"])
            return token
        }
        logger.debug("token valid for less than asked; refreshing", metadata: ["account": "\(token.account)"])
        let refreshed = try await refresh(token.account, from: stored.generation, force: true, replacing: token.value)
        if let expiry = refreshed.tokens.accessTokenExpiresAt { broker.observeLifetime(expiry.timeIntervalSince(now()), of: token.account) }
        return AccessToken(refreshed)
    }

    /// How much longer than asked a server's tokens must live for `minimumValidity` to keep refreshing.
    static let minimumValidityMargin: TimeInterval = 30

    /// Reports that an API answered 401 to `token`. Refreshes once (unless the token was
    /// already replaced) and returns the new token; throws ``SessionError/revoked(_:description:)``
    /// when the server refuses the refresh token.
    /// A target's token (``AccessToken/target``) is refreshed for its target.
    public func reportUnauthorized(_ token: AccessToken) async throws -> AccessToken {
        if !token.target.isAccount { return try await reportTargetUnauthorized(token) }
        _ = try await servableSession(token.account)
        guard let stored = try await vaultCall({ [vault] in try vault.tokens.current(for: token.account) }) else {
            throw try await noTokensError(token.account)
        }
        if stored.generation != token.generation, !ConstantTime.equals(stored.tokens.accessToken, token.value) { return AccessToken(stored) }
        logger.debug("API refused an access token; refreshing once", metadata: ["account": "\(token.account)"])
        return AccessToken(try await refresh(token.account, from: stored.generation, force: true, replacing: token.value))
    }

    /// Reports that an API no longer accepts the account's current token, whichever it is (a
    /// `docker logout`, which names none): refreshes once from the stored generation, without
    /// first refreshing a token near its expiry as ``validAccessToken(for:)`` would.
    @discardableResult
    public func reportCurrentTokenUnauthorized(for account: AccountID) async throws -> AccessToken {
        _ = try await servableSession(account)
        guard let stored = try await vaultCall({ [vault] in try vault.tokens.current(for: account) }) else {
            throw try await noTokensError(account)
        }
        logger.debug("the current access token is not to be used again; refreshing once", metadata: ["account": "\(account)"])
        return AccessToken(try await refresh(account, from: stored.generation, force: true, replacing: stored.tokens.accessToken))
    }

    /// Whether the token stays valid for at least the leeway. (A server whose tokens live
    /// shorter than the leeway makes every call refresh: configure a smaller leeway for it.)
    func isFresh(_ stored: StoredTokens) -> Bool { isFresh(stored.tokens.accessTokenExpiresAt) }

    func isFresh(_ expiry: Date?) -> Bool {
        guard let expiry else { return true }
        return expiry.timeIntervalSince(now()) >= configuration.leeway.timeInterval
    }

    private func isUnexpired(_ tokens: TokenSet) -> Bool {
        guard let expiry = tokens.accessTokenExpiresAt else { return true }
        return expiry > now()
    }

    func noTokensError(_ id: AccountID) async throws -> SessionError {
        guard let session = try await vaultCall({ [vault] in try vault.sessions.current(for: id) }) else { return .notSignedIn(id) }
        if session.state == .active { return .expired(id, .tokenExpired) }
        return try await endedError(id, state: session.state, reason: session.endReason.map(SessionEndReason.init(rawValue:)))
    }

    /// One refresh per account in this process; callers arriving meanwhile share its result.
    /// `replacing`: with `force`, the access token the caller needs replaced (an API refused it):
    /// tokens that changed meanwhile but still hold it (a target's refresh rotated only the
    /// refresh token) do not answer the caller.
    func refresh(_ id: AccountID, from generation: Int64, force: Bool, replacing refused: String? = nil) async throws -> StoredTokens {
        let refresh = broker.refresh(of: id) {
            // Every caller of the account waits on it: ahead of them in the actor's queue, where
            // hundreds of callers arriving at once would otherwise delay the request they wait for.
            Coalesced(whenAbandoned: .finish, priority: .high) {
                try await self.performRefresh(id, seen: generation, force: force, replacing: refused)
            }
        }
        defer { broker.release(refresh, of: id) }
        return try await outcome(of: refresh, for: id)
    }

    /// The shared refresh's result. A refresh cancelled because the account was signed out or
    /// its session ended reports that, not a cancellation the caller never asked for. A caller
    /// that was cancelled itself leaves at once with `CancellationError`.
    func outcome<Value: Sendable>(of refresh: Coalesced<Value>, for id: AccountID) async throws -> Value {
        do {
            return try await refresh.value()
        } catch is CancellationError {
            try Task.checkCancellation()
            guard let session = try await vaultCall({ [vault] in try vault.sessions.current(for: id) }) else { throw SessionError.notSignedIn(id) }
            if session.state != .active {
                throw try await endedError(id, state: session.state, reason: session.endReason.map(SessionEndReason.init(rawValue:)))
            }
            throw CancellationError()
        }
    }

    /// Takes the lease in the vault (or waits for the process that holds it), refreshes,
    /// and stores the result atomically before anyone sees it.
    private func performRefresh(_ id: AccountID, seen: Int64, force: Bool, replacing refused: String?) async throws -> StoredTokens {
        var seen = seen
        while true {
            try Task.checkCancellation()
            let (vault, holder, lease, cap, seenNow) = (self.vault, holderID, configuration.leaseDuration, configuration.backoffCap, seen)
            let outcome = try await vaultCall {
                try vault.leases.begin(for: id, holder: holder, seenGeneration: seenNow, leaseDuration: lease, maximumBackoff: cap)
            }
            switch outcome {
            case .noTokens:
                throw try await noTokensError(id)
            case .changed(let tokens):
                // Someone else refreshed (or signed in again) since we looked; a rotation alone
                // (a target's refresh) leaves the access token the caller needs replaced.
                let stillRefused = refused.map { ConstantTime.equals($0, tokens.tokens.accessToken) } ?? false
                if (force && !stillRefused) || (!force && isFresh(tokens)) { return tokens }
                seen = tokens.generation
            case .busy:
                // A target's refresh in this process may hold the lease: awaited, not polled.
                if try await !awaitLeaseHeldHere(id) { try await waitForCommit(upTo: configuration.leasePollInterval) }
            case .backingOff(let until, let tokens):
                if isUnexpired(tokens.tokens) && !force { return tokens }
                let state = try await vaultCall { [vault] in try vault.leases.state(for: id) }
                throw SessionError.temporarilyUnavailable(id, reason: state.lastFailure ?? "refresh backing off", retryAt: until)
            case .acquired(let tokens, let interrupted):
                if let stored = try await refreshHoldingLease(id, from: tokens, interrupted: interrupted) {
                    return stored
                }
                // Discarded: another caller stored newer tokens meanwhile. Look again from the
                // generation refreshed from, so the next look finds them (`.changed`) and judges them.
                guard try await vaultCall({ [vault] in try vault.accounts.find(id) }) != nil else { throw SessionError.notSignedIn(id) }
                seen = tokens.generation
            }
        }
    }

    /// Waits until another connection commits to the vault (the lease holder storing its
    /// result, usually) or `limit` passes, whichever comes first.
    func waitForCommit(upTo limit: Duration) async throws {
        let step = max(.milliseconds(1), min(configuration.leaseWatchInterval, limit))
        // Read on the I/O threads like every vault call (the stamp's own connection never
        // waits for a writer; a commit of this process's ends the wait early, which only
        // costs a look).
        let vault = self.vault
        let seen = try? await Self.offPool { try vault.dataVersion() }
        var waited = Duration.zero
        while waited < limit {
            try await clock.sleep(for: step)
            waited += step
            if let seen, let now = try? await Self.offPool({ try vault.dataVersion() }), now != seen { return }
        }
    }

    /// Sends the refresh request and records its outcome. Returns nil when the result was
    /// discarded (account removed or lease lost meanwhile).
    private func refreshHoldingLease(_ id: AccountID, from stored: StoredTokens, interrupted: Bool) async throws -> StoredTokens? {
        guard let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else { throw SessionError.notSignedIn(id) }
        // A client's account holds no refresh token: it asks with its own credentials again.
        let refreshToken = stored.tokens.refreshToken
        if refreshToken == nil, account.grant == .delegated {
            if isUnexpired(stored.tokens) {
                try await vaultCall { [vault, holder = holderID] in
                    try vault.leases.fail(for: id, holder: holder, failure: "no refresh token", nextAttemptAt: nil)
                }
                return stored
            }
            try await applyExpiry(id, reason: .tokenExpired, timedOut: false)
            throw SessionError.expired(id, .tokenExpired)
        }
        let credentials: ClientCredentials
        do {
            credentials = try await clientCredentials(for: account)
        } catch {
            try? await vaultCall { [vault, holder = holderID] in
                try vault.leases.fail(for: id, holder: holder, failure: "missing client secret", nextAttemptAt: nil)
            }
            throw error
        }
        let pins: [SPKIPin]
        let oauth: OAuthClient
        do {
            pins = try self.pins(of: account)
            oauth = try oauthClient(trusting: account.client.caFile)
        } catch {
            try? await vaultCall { [vault, holder = holderID] in
                try vault.leases.fail(for: id, holder: holder, failure: "the account's pins or CA file cannot be used", nextAttemptAt: nil)
            }
            throw error
        }
        let scope = account.client.scopes.isEmpty ? nil : account.client.scopes.joined(separator: " ")
        let answer: Result<TokenResponse, RefreshError>
        // The lease is renewed while the request is in flight, so no other process takes it over
        // from a holder that is merely slow (the request's own deadline is shorter than the lease).
        let renewal = renewLeaseWhileRefreshing(id)
        defer { renewal.cancel() }
        let requestedAt = now()
        do {
            answer = .success(
                try await requestTokens(for: account, refreshToken: refreshToken, scope: scope, client: credentials, pins: pins, oauth: oauth))
        } catch {
            answer = .failure(error)
        }
        renewal.cancel()
        // Signed out while the request was in flight: whatever the server answered, nothing
        // of it is stored, announced or served (not even the old, still-valid access token).
        guard try await vaultCall({ [vault] in try vault.sessions.current(for: id) }) != nil else {
            logger.debug("discarded a refresh outcome: the account was signed out meanwhile", metadata: ["account": "\(id)"])
            throw SessionError.notSignedIn(id)
        }
        switch answer {
        case .success(let response):
            if let key = credentials.dpopKey, let problem = response.dpopBindingProblem(for: key) {
                try await refuseUnbound(response, problem: problem, for: account, stored: stored)
            }
            let tokens = tokenSet(from: response, previous: stored.tokens, account: account, requestedAt: requestedAt)
            // The new tokens and their event, in one transaction.
            let recorded = recording { (saved: StoredTokens?) in saved.map { [(.tokenRefreshed(id, generation: $0.generation), nil)] } ?? [] }
            guard
                let saved = try await vaultCall({ [vault, holder = holderID] in
                    try vault.leases.complete(for: id, holder: holder, from: stored.generation, tokens: tokens, recording: recorded)
                })
            else {
                logger.warning(
                    "discarded a refresh result: the account was removed or another caller stored newer tokens meanwhile",
                    metadata: ["account": "\(id)"])
                return nil
            }
            logger.info(
                "refreshed tokens",
                metadata: [
                    "account": "\(id)", "generation": "\(saved.generation)",
                    "rotated": "\(response.refreshToken != nil)",
                ])
            announce([.tokenRefreshed(id, generation: saved.generation)])
            if let seconds = response.refreshExpiresIn {
                noteRefreshExpiry(now().addingTimeInterval(TimeInterval(seconds)), for: id)
            } else if response.refreshToken != nil {
                knownRefreshExpiry[id] = nil  // a new refresh token whose expiry nobody told
            }
            return saved
        case .failure(let error):
            return try await handle(error, for: id, stored: stored, interrupted: interrupted)
        }
    }

    /// An answer to a DPoP-proved refresh whose access token is not bound to the account's key
    /// (a bearer token, or another key's): never stored or handed out. A refresh token it rotated
    /// is kept (the one presented may be dead), with the access token held before; otherwise the
    /// account backs off as for any misconfigured client (a provider that ignores DPoP is not
    /// asked again on every call), and the caller is told why (exit 76).
    func refuseUnbound(
        _ response: TokenResponse, problem: String, for account: Account, stored: StoredTokens, holder: String? = nil
    ) async throws -> Never {
        let id = account.id
        let holder = holder ?? holderID
        // A stored rotation lets the lease go; else a target's refresh lets it go for that target
        // only (as its other refusals do), and the account's own backs off.
        var rotationKept = false
        if account.grant == .delegated { rotationKept = try await keepRotatedRefreshToken(of: response, stored: stored, for: id, holder: holder) }
        if !rotationKept, holder != holderID {
            try await vaultCall { [vault] in try vault.leases.release(for: id, holder: holder) }
        } else if !rotationKept {
            let retryAt = now().addingTimeInterval(configuration.backoffCap.timeInterval)
            try await vaultCall { [vault] in
                try vault.leases.fail(for: id, holder: holder, failure: "dpop_binding", detail: problem, nextAttemptAt: retryAt)
            }
        }
        logger.warning("the identity service sent a token not bound to the account's DPoP key; refused", metadata: ["account": "\(id)"])
        throw SessionError.clientMisconfigured(id, code: "dpop_binding", description: problem)
    }

    /// When an answer whose access token is refused rotated the refresh token, stores the new
    /// refresh token beside the access token held before (the one presented may be dead), which
    /// lets `holder`'s lease go. False when nothing was rotated: the lease is still held.
    func keepRotatedRefreshToken(of response: TokenResponse, stored: StoredTokens, for id: AccountID, holder: String) async throws -> Bool {
        guard let rotated = response.refreshToken, rotated != stored.tokens.refreshToken else { return false }
        var kept = stored.tokens
        kept.refreshToken = rotated
        let recorded = recording { (saved: StoredTokens?) in saved.map { [(.tokenRefreshed(id, generation: $0.generation), nil)] } ?? [] }
        let saved = try await vaultCall { [vault, kept] in
            try vault.leases.complete(for: id, holder: holder, from: stored.generation, tokens: kept, recording: recorded)
        }
        if let saved { announce([.tokenRefreshed(id, generation: saved.generation)]) }
        return true
    }

    /// Renews `holder`'s lease (this service's by default) every third of its duration until cancelled.
    func renewLeaseWhileRefreshing(_ id: AccountID, holder: String? = nil) -> Task<Void, Never> {
        let (vault, clock, holder, duration) = (self.vault, self.clock, holder ?? holderID, configuration.leaseDuration)
        let logger = self.logger
        return Task {
            while !Task.isCancelled {
                do {
                    try await clock.sleep(for: duration / 3)
                    guard try await Self.offPool({ try vault.leases.renew(for: id, holder: holder, leaseDuration: duration) }) else { return }
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("could not renew the refresh lease", metadata: ["account": "\(id)", "error": "\(error)"])
                    return
                }
            }
        }
    }

    /// `holder`: the lease holder the refresh ran as (this service's own by default; a
    /// target's refresh runs as another, see ``targetHolder(_:)``).
    func handle(
        _ error: RefreshError, for id: AccountID, stored: StoredTokens, interrupted: Bool, holder leaseHolder: String? = nil
    ) async throws -> StoredTokens? {
        let leaseHolder = leaseHolder ?? holderID
        switch error {
        case .invalidGrant(let description):
            let detail =
                interrupted
                ? "refused after a refresh interrupted by a crash; the server may have rotated the token then"
                : description
            // One transaction: tokens wiped, session expired(revoked), verdict, lease and events recorded.
            let events: [SessionEvent] = [.revoked(id, description: detail), .stateChanged(id, .expired(.revoked))]
            let recorded = recording { (outcome: (ended: Bool, session: SessionRecord?)) in outcome.ended ? events.map { ($0, nil) } : [] }
            let ended = try await vaultCall { [vault] in
                try vault.leases.endGrant(
                    for: id, reason: SessionEndReason.revoked.rawValue, detail: detail, ifTokensAt: stored.generation, recording: recorded)
            }
            // Refused a refresh token another caller has since replaced (its lease lapsed while
            // the server held our answer, say): the grant stands. Look again.
            guard ended.ended else { return try await refusedStale(id, holder: leaseHolder) }
            timeouts.forgetWarning(for: id)
            logger.notice("the server revoked the grant; tokens wiped", metadata: ["account": "\(id)"])
            announce(events)
            try await settle()
            throw SessionError.revoked(id, description: detail)
        case .clientMisconfigured(let code, let description):
            let retryAt = now().addingTimeInterval(configuration.backoffCap.timeInterval)
            try await vaultCall { [vault, holder = leaseHolder] in
                try vault.leases.fail(for: id, holder: holder, failure: error.summary, detail: error.description, nextAttemptAt: retryAt)
            }
            throw SessionError.clientMisconfigured(id, code: code, description: description)
        case .cancelled:
            try? await vaultCall { [vault, holder = leaseHolder] in try vault.leases.fail(for: id, holder: holder, failure: "cancelled", nextAttemptAt: nil) }
            throw CancellationError()
        case .pinningFailed(let host, let reason):
            // Nothing was sent, so the refresh token is as good as before: no back-off (the next
            // call checks again and reports the same), no revocation, tokens kept.
            let failed = SessionEvent.refreshFailed(id, reason: error.summary, retryAt: nil)
            let recorded = recording { (_: Void) in [(failed, nil)] }
            try await vaultCall { [vault, holder = leaseHolder] in
                try vault.leases.fail(
                    for: id, holder: holder, failure: error.summary, detail: error.description, nextAttemptAt: nil, recording: recorded)
            }
            logger.warning(
                "the identity service presented no pinned key; nothing was sent",
                metadata: ["account": "\(id)", "host": "\(host)"])
            announce([failed])
            throw SessionError.pinningFailed(id, host: host, reason: reason)
        case _ where error.isUnexplainedRefusal:
            // A refusal whose meaning is unknown: backed off like a transient failure, but only so
            // many times in a row; then the verdict, as for invalid_grant.
            let state = try await vaultCall { [vault] in try vault.leases.state(for: id) }
            let refusals = state.refusals + 1
            let reason = "\(error)"
            guard refusals >= configuration.maximumRefusals else {
                let failures = state.failures + 1
                let retryAt = now().addingTimeInterval(backoff.delay(afterFailures: failures).timeInterval)
                let failed = SessionEvent.refreshFailed(id, reason: reason, retryAt: retryAt)
                let recorded = recording { (_: Void) in [(failed, nil)] }
                try await vaultCall { [vault, holder = leaseHolder] in
                    try vault.leases.fail(
                        for: id, holder: holder, failure: error.summary, detail: reason, nextAttemptAt: retryAt, refusal: true,
                        recording: recorded)
                }
                logger.warning(
                    "the server refused the refresh for a reason the vault does not know; backing off",
                    metadata: ["account": "\(id)", "refusals": "\(refusals)", "reason": "\(error.summary)"])
                announce([failed])
                if isUnexpired(stored.tokens) { return stored }
                throw SessionError.temporarilyUnavailable(id, reason: reason, retryAt: retryAt)
            }
            let refused = SessionEvent.stateChanged(id, .expired(.refused))
            let recorded = recording { (outcome: (ended: Bool, session: SessionRecord?)) in outcome.ended ? [(refused, outcome.session)] : [] }
            let ended = try await vaultCall { [vault] in
                try vault.leases.endGrant(
                    for: id, reason: SessionEndReason.refused.rawValue, detail: reason, ifTokensAt: stored.generation, recording: recorded)
            }
            guard ended.ended else { return try await refusedStale(id, holder: leaseHolder) }
            timeouts.forgetWarning(for: id)
            logger.notice("the server kept refusing the refresh; tokens wiped", metadata: ["account": "\(id)", "refusals": "\(refusals)"])
            announce([refused])
            try await settle()
            throw SessionError.refused(id, description: reason)
        case .transient, .unrecognizedError, .malformedResponse:
            // The server's Retry-After (a 429's or a 503's), capped by the back-off.
            var retryAfter: Duration?
            if case .transient(let failure) = error { retryAfter = failure.retryAfter }
            let failures = try await vaultCall { [vault] in try vault.leases.state(for: id) }.failures + 1
            let retryAt = now().addingTimeInterval(backoff.delay(afterFailures: failures, retryAfter: retryAfter).timeInterval)
            let reason = "\(error)"
            // In plain: the vault's classification; the server's words (in `reason`) sealed.
            let failed = SessionEvent.refreshFailed(id, reason: reason, retryAt: retryAt)
            let recorded = recording { (_: Void) in [(failed, nil)] }
            try await vaultCall { [vault, holder = leaseHolder] in
                try vault.leases.fail(for: id, holder: holder, failure: error.summary, detail: reason, nextAttemptAt: retryAt, recording: recorded)
            }
            logger.warning("refresh failed; backing off", metadata: ["account": "\(id)", "failures": "\(failures)", "reason": "\(error.summary)"])
            announce([failed])
            if isUnexpired(stored.tokens) { return stored }
            throw SessionError.temporarilyUnavailable(id, reason: reason, retryAt: retryAt)
        }
    }

    /// A refusal of tokens that are no longer the account's (or of an account gone meanwhile):
    /// lets `holder`'s lease go and returns nil, for the caller to look again.
    private func refusedStale(_ id: AccountID, holder: String) async throws -> StoredTokens? {
        try await vaultCall { [vault] in try vault.leases.release(for: id, holder: holder) }
        guard try await vaultCall({ [vault] in try vault.accounts.find(id) }) != nil else { throw SessionError.notSignedIn(id) }
        logger.notice("the server refused a refresh token the vault has since replaced; the grant stands", metadata: ["account": "\(id)"])
        return nil
    }
}
