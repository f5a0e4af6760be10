import Foundation
import Logging
import VaultOAuth
import VaultStore

// MARK: - The grant watch (``GrantWatch``)

extension SessionService {
    /// Starts ``SessionConfiguration/grantWatch`` (from ``start()``); ``stop()`` ends it.
    func startGrantWatch() {
        guard let watch = configuration.grantWatch, grantWatcher == nil else { return }
        grantWatcher = Task { [weak self, clock] in
            while !Task.isCancelled {
                guard let wait = await self?.watchGrants(watch) else { return }
                do {
                    try await clock.sleep(for: wait)
                } catch {
                    return
                }
            }
        }
    }

    /// One look at every account whose session is active: what is due is done (a refresh ahead
    /// of expiry, a grant check, a refresh-token expiry warning); the time until the next thing
    /// falls due (at least a second, at most the check interval or an hour).
    func watchGrants(_ watch: GrantWatch) async -> Duration {
        let started = now()
        let longest = watch.checkInterval?.timeInterval ?? 3600
        var next = started.addingTimeInterval(longest)
        guard let accounts = try? await vaultCall({ [vault] in try vault.accounts.all() }) else { return .seconds(60) }
        for account in accounts {
            if Task.isCancelled { break }
            if let due = await watchGrant(of: account.id, watch) { next = min(next, due) }
        }
        let wait = next.timeIntervalSince(now())
        return .milliseconds(Int64(min(max(wait, 1), longest) * 1000))
    }

    /// The watch's work for one account; when it next falls due (nil: nothing to watch).
    private func watchGrant(of id: AccountID, _ watch: GrantWatch) async -> Date? {
        // Judged, never changed: a session past a deadline is left for its timer or its next
        // request (a lock drops the keys of every account), and a refresh is not activity.
        guard let (session, policy) = try? await sessionAndPolicy(id), let session,
            case .active = SessionJudge.judge(session, policy: policy, now: now()),
            var stored = try? await vaultCall({ [vault] in try vault.tokens.current(for: id) })
        else {
            grantChecks[id] = nil
            knownRefreshExpiry[id] = nil
            return nil
        }
        let now = now()
        if let retry = grantRetryAt[id], retry > now { return retry }  // after a failure, not every second
        grantRetryAt[id] = nil
        let checked = grantChecks[id] ?? now
        if grantChecks[id] == nil { grantChecks[id] = now }  // the first check one interval after the watch starts
        var checkDue = watch.checkInterval.map { stored.tokens.refreshToken != nil && checked.addingTimeInterval($0.timeInterval) <= now } ?? false
        if checkDue, watch.introspection, let refreshToken = stored.tokens.refreshToken {
            switch await introspectGrant(of: id, refreshToken: refreshToken) {
            case .active:
                grantChecks[id] = now  // the grant stands: nothing rotated
                checkDue = false
            case .inactive, .unavailable, .failed:
                // A refresh confirms it, or checks instead: a check that cannot introspect (the
                // network, the server, a pin) still checks, so no revocation goes unnoticed.
                break
            }
        }
        let refreshAt = watch.refreshAhead.contains(id) ? Self.refreshAhead(of: stored, leeway: configuration.leeway) : nil
        if checkDue || refreshAt.map({ $0 <= now }) == true {
            let generation = stored.generation
            do {
                // The check must reach the server; ahead of expiry a refresh another process
                // made meanwhile does.
                stored = try await refresh(id, from: generation, force: checkDue)
                if stored.generation != generation {
                    logger.debug(checkDue ? "grant checked" : "refreshed ahead of expiry", metadata: ["account": "\(id)"])
                }
            } catch {
                // A revoked grant was recorded (the session expired, `revoked` told) by the
                // refresh; anything else is tried again in a minute (or at the next check).
                logger.debug("watch: refresh failed", metadata: ["account": "\(id)", "error": "\(error)"])
                grantRetryAt[id] = now.addingTimeInterval(min(60, watch.checkInterval?.timeInterval ?? 60))
            }
            if checkDue { grantChecks[id] = now }
        }
        var due: [Date] = grantRetryAt[id].map { [$0] } ?? []
        if let interval = watch.checkInterval, stored.tokens.refreshToken != nil {
            due.append((grantChecks[id] ?? now).addingTimeInterval(interval.timeInterval))
        }
        if watch.refreshAhead.contains(id), let at = Self.refreshAhead(of: stored, leeway: configuration.leeway) {
            due.append(max(at, now.addingTimeInterval(1)))
        }
        if let warnAt = warnRefreshExpiry(of: id, stored, session: session, policy: policy, watch, now: now) { due.append(warnAt) }
        return due.min()
    }

    /// Notes an expiry told for the account's refresh token. The first one told is not trusted
    /// alone: the same expiry told again (within a second) is a fixed one, worth a warning; one
    /// that moved on is a sliding one, renewed by use (Keycloak's `refresh_expires_in` is the
    /// time left of a sliding window), never warned of.
    func noteRefreshExpiry(_ told: Date, for id: AccountID) {
        let fixed = knownRefreshExpiry[id].map { abs(told.timeIntervalSince($0.expiresAt)) <= 1 } ?? false
        knownRefreshExpiry[id] = ToldRefreshExpiry(expiresAt: told, fixed: fixed)
    }

    /// What an introspection of the grant's refresh token said.
    enum GrantIntrospection {
        case active
        /// Not active: confirmed with a refresh before anything ends.
        case inactive
        /// No endpoint, or the provider does not let this client introspect (remembered).
        case unavailable
        /// Nothing known (the network, the server, a pin): this check refreshes instead.
        case failed
    }

    /// Introspects the account's refresh token (RFC 7662) at its provider's endpoint, with the
    /// client authentication, pins and CA file of its refreshes. A refusal of this client is
    /// remembered for the process's life: its checks refresh from then on.
    private func introspectGrant(of id: AccountID, refreshToken: String) async -> GrantIntrospection {
        guard !introspectionRefused.contains(id), let account = try? await vaultCall({ [vault] in try vault.accounts.find(id) }),
            let endpoint = account.providerMetadata.flatMap(ProviderMetadata.decoded)?.introspectionEndpoint
        else { return .unavailable }
        let answer: TokenIntrospection
        do {
            let (credentials, pins, oauth) = (
                try await clientCredentials(for: account), try self.pins(of: account), try oauthClient(trusting: account.client.caFile)
            )
            answer = try await oauth.introspect(
                token: refreshToken, hint: .refreshToken, endpoint: endpoint, client: credentials, pins: pins, deadline: configuration.requestDeadline)
        } catch let error as IntrospectionError {
            switch error {
            case .notPermitted, .insecureEndpoint, .malformedResponse:
                introspectionRefused.insert(id)
                logger.info("introspection is not available to this client; checking grants by refresh", metadata: ["account": "\(id)", "reason": "\(error)"])
                return .unavailable
            case .transient, .pinningFailed, .cancelled:
                logger.notice("introspection failed; checking the grant by refresh", metadata: ["account": "\(id)", "error": "\(error)"])
                return .failed
            }
        } catch {
            return .unavailable  // the account's credentials, pins or CA file: its refresh says what
        }
        if let expiry = answer.expiresAt { noteRefreshExpiry(expiry, for: id) }
        logger.debug("grant introspected", metadata: ["account": "\(id)", "active": "\(answer.active)"])
        return answer.active ? .active : .inactive
    }

    /// When to refresh `stored` ahead of its expiry: a leeway before it, or half its lifetime
    /// before when it lives no longer than twice the leeway (not every second); nil without an expiry.
    static func refreshAhead(of stored: StoredTokens, leeway: Duration) -> Date? {
        guard let expiry = stored.tokens.accessTokenExpiresAt else { return nil }
        let lifetime = expiry.timeIntervalSince(stored.updatedAt)
        return expiry.addingTimeInterval(-min(leeway.timeInterval, max(lifetime / 2, 1)))
    }

    /// Tells ``SessionEvent/refreshTokenExpiring(_:expiresAt:)`` once when the refresh token's
    /// expiry is within the warning; when it falls due otherwise. The expiry: a JWT's `exp`,
    /// else what introspections or `refresh_expires_in` told this process twice alike (a fixed
    /// expiry, see ``noteRefreshExpiry(_:for:)``), else the sign-in + the policy's
    /// ``SessionPolicy/refreshTokenLifetime``. A refresh token
    /// that lives no longer than the warning by design (`exp - iat`, `refresh_expires_in`:
    /// Keycloak's slides with every refresh, 30 minutes by default) is renewed by use and never
    /// warned of.
    private func warnRefreshExpiry(
        of id: AccountID, _ stored: StoredTokens, session: SessionRecord, policy: SessionPolicy, _ watch: GrantWatch, now: Date
    ) -> Date? {
        guard let warning = watch.refreshExpiryWarning, let refreshToken = stored.tokens.refreshToken else { return nil }
        let expiry: Date
        let lifetime: TimeInterval?
        if let jwtExpiry = TokenResponse.unverifiedExpiry(ofJWT: refreshToken) {
            expiry = jwtExpiry
            lifetime = TokenResponse.unverifiedDate(ofJWT: refreshToken, claim: "iat").map { jwtExpiry.timeIntervalSince($0) }
        } else if let known = knownRefreshExpiry[id], known.fixed {
            (expiry, lifetime) = (known.expiresAt, nil)
        } else if let configured = policy.refreshTokenLifetime {
            // The account's setting (`set-policy --refresh-lifetime`): from the sign-in.
            (expiry, lifetime) = (session.startedAt.addingTimeInterval(configured.timeInterval), configured.timeInterval)
        } else {
            return nil
        }
        guard expiry > now else { return nil }
        if let lifetime, lifetime <= warning.timeInterval { return nil }
        let warnAt = expiry.addingTimeInterval(-warning.timeInterval)
        guard warnAt <= now else { return warnAt }
        if refreshExpiryWarned[id] != expiry {
            refreshExpiryWarned[id] = expiry
            logger.info("refresh token expires soon", metadata: ["account": "\(id)", "expires_at": "\(expiry)"])
            publish(.refreshTokenExpiring(id, expiresAt: expiry), session: session)
        }
        return nil
    }
}
