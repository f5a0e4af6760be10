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
        let checked = grantChecks[id] ?? now
        if grantChecks[id] == nil { grantChecks[id] = now }  // the first check one interval after the watch starts
        let checkDue = watch.checkInterval.map { stored.tokens.refreshToken != nil && checked.addingTimeInterval($0.timeInterval) <= now } ?? false
        let refreshAt = stored.tokens.accessTokenExpiresAt.map { $0.addingTimeInterval(-configuration.leeway.timeInterval) }
        let aheadDue = watch.refreshAhead.contains(id) && refreshAt.map { $0 <= now } == true
        if checkDue || aheadDue {
            do {
                // The check must reach the server; ahead of expiry a refresh another process
                // made meanwhile does.
                stored = try await refresh(id, from: stored.generation, force: checkDue)
                logger.debug(checkDue ? "grant checked" : "refreshed ahead of expiry", metadata: ["account": "\(id)"])
            } catch {
                // A revoked grant was recorded (the session expired, `revoked` told) by the
                // refresh; anything else waits for the next check.
                logger.debug("watch: refresh failed", metadata: ["account": "\(id)", "error": "\(error)"])
            }
            if checkDue { grantChecks[id] = now }
        }
        var due: [Date] = []
        if let interval = watch.checkInterval, stored.tokens.refreshToken != nil {
            due.append((grantChecks[id] ?? now).addingTimeInterval(interval.timeInterval))
        }
        if watch.refreshAhead.contains(id), let expiry = stored.tokens.accessTokenExpiresAt {
            // Not again before a second has passed (a token that lives shorter than the leeway).
            due.append(max(expiry.addingTimeInterval(-configuration.leeway.timeInterval), now.addingTimeInterval(1)))
        }
        if let warning = watch.refreshExpiryWarning, let refreshToken = stored.tokens.refreshToken,
            let expiry = TokenResponse.unverifiedExpiry(ofJWT: refreshToken)
        {
            let warnAt = expiry.addingTimeInterval(-warning.timeInterval)
            if warnAt <= now {
                if refreshExpiryWarned[id] != expiry, expiry > now {
                    refreshExpiryWarned[id] = expiry
                    logger.info("refresh token expires soon", metadata: ["account": "\(id)", "expires_at": "\(expiry)"])
                    publish(.refreshTokenExpiring(id, expiresAt: expiry), session: session)
                }
            } else {
                due.append(warnAt)
            }
        }
        return due.min()
    }
}
