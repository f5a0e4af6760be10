import Foundation
import VaultStore

// MARK: - Warm-process token cache

/// What ``SessionService/validAccessToken(for:)`` read from the vault the last time it served
/// a fresh token without refreshing, and the vault's ``VaultChangeStamp`` taken before reading.
///
/// While the stamp is unchanged no connection (in this or another process) has committed to
/// the vault, so every row read is still what the file holds: the session and its policy are
/// judged again against the current time and the token's freshness is checked again, but
/// nothing is re-read or re-opened. A lock or close makes the entry unusable; after a commit,
/// the account's own token entry is used again once the vault's state row shows the rows it
/// was read from unchanged (``AccessRevision``), which costs one row instead of five and a
/// sealed value.
struct TokenCacheEntry {
    var stamp: VaultChangeStamp
    /// The writes the entry was read from; nil for a target's entry (read from rows the
    /// revision does not cover), which any commit makes unusable.
    let revision: AccessRevision?
    /// The active account when the entry was made (every cached answer is for this account).
    let activeAccount: AccountID?
    let account: AccountID
    let session: SessionRecord
    let policy: SessionPolicy
    let token: StoredAccessToken
}

/// The outcome of looking in the cache: the answer, or the stamp taken while looking (nil
/// when there was no entry to check), to be used as the stamp of the read that follows, and
/// the entry a commit made stale (see ``SessionService/revalidated(_:stamp:for:)``).
enum TokenCacheLookup {
    case hit(AccessToken)
    case miss(VaultChangeStamp?, stale: TokenCacheEntry? = nil)
}

extension SessionService {
    /// The cached answer to `validAccessToken(for: account)`, or a miss when the slow path must
    /// run: the vault changed, is locked or closed, the session needs a decision (lock,
    /// expiry) or the token is no longer fresh. Costs one `PRAGMA data_version`, read on the
    /// actor: the one vault call made there, on the stamp's own connection (opened off the
    /// actor by the read that made the entry), which never waits for a writer.
    ///
    /// A `target` other than the account's own is looked up among the targets' entries, each
    /// judged the same way.
    func cachedAccessToken(for account: AccountID?, target: TokenTarget = .account) throws -> TokenCacheLookup {
        let key = TokenRequest(account, target: target)
        guard let entry = target.isAccount ? broker.cache : broker.targetCache[key] else { return .miss(nil) }
        guard !vault.isLocked, !vault.isClosed, lockReason == nil else {
            broker.cache = nil
            return .miss(nil)
        }
        guard let stamp = try? vault.changeStamp() else {
            broker.cache = nil
            return .miss(nil)
        }
        guard stamp == entry.stamp else {
            if target.isAccount { broker.cache = nil } else { broker.targetCache[key] = nil }
            return .miss(stamp, stale: entry.revision == nil ? nil : entry)
        }
        // Never another account's token: asked for the active one, it must be the cached one.
        guard (account ?? entry.activeAccount) == entry.account else { return .miss(stamp) }
        guard case .active(let warning, _) = SessionJudge.judge(entry.session, policy: entry.policy, now: now()),
            isFresh(entry.token.expiresAt)
        else { return .miss(stamp) }
        // A token served counts as activity: when it is time to write that, the slow path does.
        if entry.policy.activity == .any, activityIsDue(entry.session, policy: entry.policy) { return .miss(stamp) }
        if let warning { announce(warning) }
        return .hit(AccessToken(entry.token))
    }

    /// After a commit made `stale` unusable (the stamp moved to `stamp`): when the vault's state
    /// row shows the rows it was read from unchanged, the entry is cached again under `stamp`
    /// and judged as a cached entry is; nil when anything it was read from was written since
    /// (or the entry cannot be used for another reason), for the full read to follow.
    ///
    /// One trip to the I/O threads for one row: the commit wrote something else (another
    /// account's activity, a notification, an event, an agent's bookkeeping).
    func revalidated(_ stale: TokenCacheEntry?, stamp: VaultChangeStamp?, for account: AccountID?) async throws -> AccessToken? {
        guard let stale, let revision = stale.revision, let stamp, !vault.isLocked else { return nil }
        let current = try await vaultCall { [vault] in try vault.tokens.accessRevision(for: stale.account) }
        guard current == revision, broker.cache == nil, !vault.isLocked, lockReason == nil else { return nil }
        var entry = stale
        entry.stamp = stamp
        broker.cache = entry
        guard case .hit(let token) = try cachedAccessToken(for: account) else { return nil }
        return token
    }

    /// Remembers what the slow path read under `stamp` (taken before any of it was read), from
    /// the rows of `revision` (nil: rows it does not cover, a target's).
    func cacheAccessToken(
        _ token: StoredAccessToken, session: SessionRecord, policy: SessionPolicy,
        stamp: VaultChangeStamp?, activeAccount: AccountID?, revision: AccessRevision?
    ) {
        guard let stamp, !vault.isLocked else {
            broker.cache = nil
            return
        }
        let entry = TokenCacheEntry(
            stamp: stamp, revision: token.target.isAccount ? revision : nil, activeAccount: activeAccount, account: token.account,
            session: session, policy: policy, token: token)
        guard !token.target.isAccount else {
            broker.cache = entry
            return
        }
        // Asked for the active account (`activeAccount` set) or for this one by name.
        let key = TokenRequest(activeAccount == nil ? token.account : nil, target: token.target)
        if broker.targetCache.count >= Self.targetCacheLimit, broker.targetCache[key] == nil { broker.targetCache.removeAll() }
        broker.targetCache[key] = entry
    }

    /// How many targets' tokens a process keeps at hand (a tool calls a few APIs; past this,
    /// the entries are dropped and made again from the vault).
    static let targetCacheLimit = 32
}
