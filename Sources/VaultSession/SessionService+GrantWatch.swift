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
            return nil
        }
        let now = now()
        if let retry = grantRetryAt[id], retry > now { return retry }  // after a failure, not every second
        grantRetryAt[id] = nil
        let checked = grantChecks[id] ?? now
        if grantChecks[id] == nil { grantChecks[id] = now }  // the first check one interval after the watch starts
        let checkDue = watch.checkInterval.map { stored.tokens.refreshToken != nil && checked.addingTimeInterval($0.timeInterval) <= now } ?? false
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
        if let warnAt = warnRefreshExpiry(of: id, stored, session: session, watch, now: now) { due.append(warnAt) }
        return due.min()
    }

    /// When to refresh `stored` ahead of its expiry: a leeway before it, or half its lifetime
    /// before when it lives no longer than twice the leeway (not every second); nil without an expiry.
    static func refreshAhead(of stored: StoredTokens, leeway: Duration) -> Date? {
        guard let expiry = stored.tokens.accessTokenExpiresAt else { return nil }
        let lifetime = expiry.timeIntervalSince(stored.updatedAt)
        return expiry.addingTimeInterval(-min(leeway.timeInterval, max(lifetime / 2, 1)))
    }

    /// Tells ``SessionEvent/refreshTokenExpiring(_:expiresAt:)`` once when the refresh token's
    /// `exp` is within the warning; when it falls due otherwise. A refresh token that lives no
    /// longer than the warning by design (`exp - iat`: Keycloak's slides with every refresh,
    /// 30 minutes by default) is renewed by use and never warned of.
    private func warnRefreshExpiry(of id: AccountID, _ stored: StoredTokens, session: SessionRecord, _ watch: GrantWatch, now: Date) -> Date? {
        guard let warning = watch.refreshExpiryWarning, let refreshToken = stored.tokens.refreshToken,
            let expiry = TokenResponse.unverifiedExpiry(ofJWT: refreshToken), expiry > now
        else { return nil }
        if let issued = TokenResponse.unverifiedDate(ofJWT: refreshToken, claim: "iat"), expiry.timeIntervalSince(issued) <= warning.timeInterval {
            return nil
        }
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
