import Foundation
import Logging
import VaultOAuth
import VaultStore

// MARK: - Tokens for other resources and scopes (RFC 8707, RFC 6749 §6)

extension SessionService {
    /// A token for `target` — other APIs (RFC 8707 resource indicators) or a narrower scope set
    /// (RFC 6749 §6) — that stays valid for at least ``SessionConfiguration/leeway``, for the
    /// given account or the active one.
    ///
    /// Obtained with the account's one refresh token and kept beside the account's own token;
    /// refreshed ahead of expiry and shared like it, in this process and across processes.
    /// Refreshes of one account, for any target, take the account's refresh lease one at a
    /// time, so a rotating refresh token never forks; a refresh token the server rotates with a
    /// target's token becomes the account's. The session rules are those of
    /// ``validAccessToken(for:)``: a served token is activity, a locked, expired or ended
    /// session serves nothing.
    ///
    /// Throws ``SessionError/targetRefused(_:target:code:description:)`` when the server refuses
    /// the target (`invalid_target`, `invalid_scope`), or answers with a JWT whose `aud` does not
    /// name every resource asked for (a server that ignores `resource`): nothing is stored then.
    /// An opaque token's audience cannot be seen; such a token is kept as the server sent it.
    ///
    /// ```swift
    /// let files = try TokenTarget(resources: ["https://files.example.com/"], scopes: ["files.read"])
    /// let token = try await session.validAccessToken(for: account, target: files)
    /// request.setValue(token.authorizationHeader, forHTTPHeaderField: "Authorization")
    /// ```
    public func validAccessToken(for account: AccountID? = nil, target: TokenTarget) async throws -> AccessToken {
        if target.isAccount { return try await validAccessToken(for: account) }
        let request = TokenRequest(account, target: target)
        while true {
            let stamp: VaultChangeStamp?
            switch try cachedAccessToken(for: account, target: target) {
            case .hit(let token): return token
            case .miss(let taken): stamp = taken
            }
            let (serving, joined) = broker.serving(request)
            do {
                let token =
                    try await joined
                    ? serving.value() : serving.lead { try await serveTargetToken(for: account, target: target, stamp: stamp) }
                broker.release(serving, for: request)
                return token
            } catch {
                broker.release(serving, for: request)
                if error is CancellationError, !Task.isCancelled { continue }
                if joined, case SessionError.accountChanged = error { continue }
                throw error
            }
        }
    }

    /// ``validAccessToken(for:target:)`` for resource indicators and scopes as given (checked
    /// by ``TokenTarget/init(resources:scopes:)``, whose error is thrown as it is).
    ///
    /// ```swift
    /// let token = try await session.validAccessToken(resources: ["https://api.example.com/"], scopes: ["read"])
    /// ```
    public func validAccessToken(for account: AccountID? = nil, resources: [String], scopes: [String] = []) async throws -> AccessToken {
        try await validAccessToken(for: account, target: try TokenTarget(resources: resources, scopes: scopes))
    }

    /// ``validAccessToken(for:minimumValidity:)`` for a target: a token for it valid for at
    /// least `minimumValidity`, refreshed first when it is not (once: a server whose tokens live
    /// shorter gets its token back as it is).
    public func validAccessToken(for account: AccountID? = nil, target: TokenTarget, minimumValidity: Duration) async throws -> AccessToken {
        if target.isAccount { return try await validAccessToken(for: account, minimumValidity: minimumValidity) }
        let token = try await validAccessToken(for: account, target: target)
        guard let expiry = token.expiresAt, expiry.timeIntervalSince(now()) < minimumValidity.timeInterval else { return token }
        let key = TargetKey(account: token.account, target: target)
        if let lifetime = broker.lifetime(of: key), lifetime < minimumValidity.timeInterval + Self.minimumValidityMargin { return token }
        let refreshed = try await refresh(key, seenToken: token.generation, force: true)
        if let expiry = refreshed.expiresAt { broker.observeLifetime(expiry.timeIntervalSince(now()), of: key) }
        return AccessToken(refreshed)
    }

    /// The slow path of ``validAccessToken(for:target:)``: one read of the session, the policy
    /// and the target's token, then the token or a refresh for it.
    private func serveTargetToken(for account: AccountID?, target: TokenTarget, stamp: VaultChangeStamp?) async throws -> AccessToken {
        if vault.isLocked {
            _ = try await servableSession(try await resolve(account))
        }
        let (stamp, read) = try await lockAware(account) { try await self.stampedSnapshot(for: account, stamp: stamp, target: target) }
        guard let snapshot = read else { throw SessionError.noActiveAccount }
        let id = snapshot.account
        var (session, warning) = try await judgedSession(id, current: snapshot.session, policy: snapshot.policy)
        guard snapshot.grantGeneration != nil else { throw try await noTokensError(id) }
        if snapshot.policy.activity == .any {
            if let touched = try await touch(session, policy: snapshot.policy, raising: warning) { session = touched }
        } else if let warning {
            announce(warning)
        }
        if let token = snapshot.token, isFresh(token.expiresAt) {
            cacheAccessToken(
                token, session: session, policy: snapshot.policy, stamp: stamp, activeAccount: account == nil ? id : nil,
                revision: snapshot.revision)
            return AccessToken(token)
        }
        let refreshed = try await refresh(TargetKey(account: id, target: target), seenToken: snapshot.token?.generation, force: false)
        let (after, reread) = try await stampedSnapshot(for: account, stamp: nil, target: target)
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
        return AccessToken(refreshed)
    }

    /// Reports that an API answered 401 to `token`, a target's token: refreshes that target once
    /// (unless its token was already replaced) and returns the new token.
    func reportTargetUnauthorized(_ token: AccessToken) async throws -> AccessToken {
        _ = try await servableSession(token.account)
        let key = TargetKey(account: token.account, target: token.target)
        let stored = try await vaultCall { [vault] in try vault.tokens.token(for: key.account, target: key.target) }
        if let stored, stored.generation != token.generation { return AccessToken(stored) }
        logger.debug("API refused a token for a target; refreshing once", metadata: ["account": "\(token.account)"])
        return AccessToken(try await refresh(key, seenToken: stored?.generation, force: true))
    }

    /// One refresh per account and target in this process; callers arriving meanwhile share it.
    /// `seenToken`: the generation of the target's token the caller saw (nil: none).
    private func refresh(_ key: TargetKey, seenToken: Int64?, force: Bool) async throws -> StoredAccessToken {
        let refresh = broker.refresh(of: key) {
            Coalesced(whenAbandoned: .finish, priority: .high) { try await self.performTargetRefresh(key, seenToken: seenToken, force: force) }
        }
        defer { broker.release(refresh, of: key) }
        return try await outcome(of: refresh, for: key.account)
    }

    /// The lease holder a refresh for `key`'s target runs as: not this service's own, so the
    /// account's lease keeps it apart from the account's own refresh and from other targets'
    /// in this process too (a holder takes its own lease again), and one refresh token is
    /// presented at a time.
    func targetHolder(_ key: TargetKey) -> String {
        "\(holderID) target \(broker.holderNumber(for: key))"
    }

    /// Waits for the refresh of this process that holds the account's lease, if one does (its
    /// own or another target's), and returns true (also when the lease was let go meanwhile);
    /// false when the holder is another process, whose commit the caller waits for by watching
    /// the file.
    func awaitLeaseHeldHere(_ id: AccountID) async throws -> Bool {
        // Let go meanwhile: look again at once.
        guard let holder = try await vaultCall({ [vault] in try vault.leases.state(for: id) }).leaseHolder else { return true }
        guard
            let running = broker.refresh(
                of: id, heldBy: holder, own: holderID,
                holderOf: { [holderID] key in self.broker.knownHolderNumber(for: key).map { "\(holderID) target \($0)" } })
        else {
            // A holder of this process no longer running finished after the lease was read: it let
            // the lease go before it left (look again at once). Only a lease still held in its name
            // (left behind) is waited out as another process's is, so this never spins.
            let ours = holder == holderID || holder.hasPrefix("\(holderID) target ")
            if ours, try await vaultCall({ [vault] in try vault.leases.state(for: id) }).leaseHolder != holder { return true }
            return false
        }
        await running()
        return true
    }

    /// The target's token stored now, if another caller (here or in another process) replaced
    /// the one seen and it is fresh (or, with `force`, merely replaced).
    private func replacedTargetToken(_ key: TargetKey, seenToken: Int64?, force: Bool) async throws -> StoredAccessToken? {
        guard let stored = try await vaultCall({ [vault] in try vault.tokens.token(for: key.account, target: key.target) }),
            stored.generation != seenToken, force || isFresh(stored.expiresAt)
        else { return nil }
        return stored
    }

    /// Takes the account's lease (the one its own refreshes take, so one refresh token is used at
    /// a time), refreshes for the target, and stores the result atomically.
    private func performTargetRefresh(_ key: TargetKey, seenToken: Int64?, force: Bool) async throws -> StoredAccessToken {
        let id = key.account
        let holder = targetHolder(key)
        // The generation alone: read without opening a sealed value.
        var seen = try await vaultCall { [vault] in try vault.tokens.metadata(for: id) }?.generation ?? 0
        while true {
            try Task.checkCancellation()
            if let replaced = try await replacedTargetToken(key, seenToken: seenToken, force: force) { return replaced }
            let (vault, holder, lease, cap, seenNow) = (self.vault, holder, configuration.leaseDuration, configuration.backoffCap, seen)
            let outcome = try await vaultCall {
                try vault.leases.begin(for: id, holder: holder, seenGeneration: seenNow, leaseDuration: lease, maximumBackoff: cap)
            }
            switch outcome {
            case .noTokens:
                throw try await noTokensError(id)
            case .changed(let tokens):
                seen = tokens.generation  // the account's own refresh (or a rotation): look again
            case .busy:
                if try await !awaitLeaseHeldHere(id) { try await waitForCommit(upTo: configuration.leasePollInterval) }
            case .backingOff(let until, _):
                if let held = try await vaultCall({ [vault] in try vault.tokens.token(for: id, target: key.target) }), !force,
                    held.expiresAt.map({ $0 > now() }) ?? true
                {
                    return held
                }
                let state = try await vaultCall { [vault] in try vault.leases.state(for: id) }
                throw SessionError.temporarilyUnavailable(id, reason: state.lastFailure ?? "refresh backing off", retryAt: until)
            case .acquired(let tokens, let interrupted):
                // Another process may have stored the target's token just before letting the lease go.
                if let replaced = try await replacedTargetToken(key, seenToken: seenToken, force: force) {
                    try await vaultCall { [vault] in try vault.leases.release(for: id, holder: holder) }
                    return replaced
                }
                if let stored = try await refreshTargetHoldingLease(key, from: tokens, interrupted: interrupted) { return stored }
                guard try await vaultCall({ [vault] in try vault.accounts.find(id) }) != nil else { throw SessionError.notSignedIn(id) }
                seen = try await vaultCall { [vault] in try vault.tokens.metadata(for: id) }?.generation ?? seen
            }
        }
    }

    /// Sends the refresh for the target and records its outcome. Nil when the result was
    /// discarded (account removed or lease lost meanwhile).
    private func refreshTargetHoldingLease(_ key: TargetKey, from stored: StoredTokens, interrupted: Bool) async throws -> StoredAccessToken? {
        let id = key.account
        let holder = targetHolder(key)
        let release = { [vault] in try? await Self.offPool { try vault.leases.release(for: id, holder: holder) } }
        guard let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else {
            _ = await release()
            throw SessionError.notSignedIn(id)
        }
        let refreshToken = stored.tokens.refreshToken
        if refreshToken == nil, account.grant == .delegated {
            _ = await release()
            throw SessionError.targetRefused(
                id, target: key.target, code: "no_refresh_token",
                description: "the account holds no refresh token to obtain tokens for other targets with")
        }
        let credentials: ClientCredentials
        let pins: [SPKIPin]
        let oauth: OAuthClient
        do {
            credentials = try await clientCredentials(for: account)
            pins = try self.pins(of: account)
            oauth = try oauthClient(trusting: account.client.caFile)
        } catch {
            _ = await release()
            throw error
        }
        let scope = key.target.scopes.isEmpty ? nil : key.target.scopes.joined(separator: " ")
        let renewal = renewLeaseWhileRefreshing(id, holder: holder)
        defer { renewal.cancel() }
        let answer: Result<TokenResponse, RefreshError>
        let requestedAt = now()
        do {
            answer = .success(
                try await requestTokens(
                    for: account, refreshToken: refreshToken, scope: scope, resources: key.target.resources, client: credentials,
                    pins: pins, oauth: oauth))
        } catch {
            answer = .failure(error)
        }
        renewal.cancel()
        guard try await vaultCall({ [vault] in try vault.sessions.current(for: id) }) != nil else {
            throw SessionError.notSignedIn(id)
        }
        switch answer {
        case .success(let response):
            do {
                return try await storeTargetToken(response, for: key, account: account, stored: stored, requestedAt: requestedAt)
            } catch {
                _ = await release()  // a store that failed leaves the lease to no one
                throw error
            }
        case .failure(.clientMisconfigured(let code, let description)):
            // The server refused this request (invalid_target, invalid_scope, or a server that
            // takes no `resource` at all), not the grant: the refresh token was not used up (an
            // error response rotates nothing), and the account's own refreshes go on with no
            // back-off. Only invalid_grant speaks for the grant.
            _ = await release()
            logger.notice("the identity service refused a token for a target", metadata: ["account": "\(id)", "error": "\(code)"])
            throw SessionError.targetRefused(id, target: key.target, code: code, description: description)
        case .failure(let error) where error.isUnexplainedRefusal:
            // Refusals the vault does not know: for a target, never counted toward ending the grant.
            _ = await release()
            logger.notice("the identity service refused a token for a target", metadata: ["account": "\(id)", "error": "\(error.summary)"])
            throw SessionError.targetRefused(id, target: key.target, code: "refused", description: "\(error)")
        case .failure(let error):
            // Whatever the refusal says about the grant holds for every target: handled as for the
            // account's own refresh (revocation ends the session, transient failures back off).
            // Nil: the refresh token refused was already replaced; look again.
            guard try await handle(error, for: id, stored: stored, interrupted: interrupted, holder: holder) != nil else { return nil }
            if let held = try await vaultCall({ [vault] in try vault.tokens.token(for: id, target: key.target) }),
                held.expiresAt.map({ $0 > now() }) ?? true
            {
                return held
            }
            let state = try await vaultCall { [vault] in try vault.leases.state(for: id) }
            throw SessionError.temporarilyUnavailable(id, reason: state.lastFailure ?? error.summary, retryAt: state.nextAttemptAt)
        }
    }

    /// Checks the token the server sent for the target and stores it (and a rotated refresh
    /// token as the account's), releasing the lease; nil when the result was discarded.
    /// `requestedAt`: when the request was sent (the token's lifetime counts from it).
    private func storeTargetToken(
        _ response: TokenResponse, for key: TargetKey, account: Account, stored: StoredTokens, requestedAt: Date
    ) async throws -> StoredAccessToken? {
        var response = response
        // A client's account holds no refresh token, not even one a server sends unasked.
        if account.grant == .clientCredentials { response.refreshToken = nil }
        let id = key.account
        if let dpop = try await dpopKey(of: account), let problem = response.dpopBindingProblem(for: dpop) {
            try await refuseUnbound(response, problem: problem, for: account, stored: stored, holder: targetHolder(key))
        }
        let holder = targetHolder(key)
        let audience = response.unverifiedAccessTokenAudience  // decoded once
        if let audience, !key.target.resources.isEmpty,
            !key.target.resources.allSatisfy(audience.contains)
        {
            // A token for another API than the one asked for is never handed to this one. The
            // refresh token the server may have rotated with it is kept all the same.
            if try await !keepRotatedRefreshToken(of: response, stored: stored, for: id, holder: holder) {
                try await vaultCall { [vault] in try vault.leases.release(for: id, holder: holder) }
            }
            logger.warning(
                "the identity service sent a token for another audience than asked; refused",
                metadata: ["account": "\(id)", "audience": "\(audience.joined(separator: " "))"])
            throw SessionError.targetRefused(
                id, target: key.target, code: "audience_mismatch", description: "its aud is \(audience.joined(separator: " "))")
        }
        if audience == nil, !key.target.resources.isEmpty {
            logger.debug(
                "the token for a resource is opaque: whether the server honoured the resource cannot be checked",
                metadata: ["account": "\(id)"])
        }
        var tokens = tokenSet(from: response, previous: nil, account: account, requestedAt: requestedAt)
        if response.scope == nil { tokens.scopes = key.target.scopes }
        let recorded = recording { (record: TargetRefreshRecord?) in
            record?.rotatedGeneration.map { [(.tokenRefreshed(id, generation: $0), nil)] } ?? []
        }
        guard
            let record = try await vaultCall({ [vault, target = key.target, tokens] in
                try vault.leases.completeTarget(
                    for: id, holder: holder, from: stored.generation, target: target, tokens: tokens, recording: recorded)
            })
        else {
            logger.warning(
                "discarded a token for a target: the account was removed or another caller stored newer tokens meanwhile",
                metadata: ["account": "\(id)"])
            return nil
        }
        logger.info(
            "obtained a token for a target",
            metadata: ["account": "\(id)", "generation": "\(record.token.generation)", "rotated": "\(record.rotatedGeneration != nil)"])
        if let generation = record.rotatedGeneration { announce([.tokenRefreshed(id, generation: generation)]) }
        return record.token
    }
}
