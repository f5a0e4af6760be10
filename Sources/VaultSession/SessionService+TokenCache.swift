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
/// an entry is used on while the vault's state row shows the rows it was read from unchanged
/// (``AccessRevision``; for a target's token, the account's `resource_tokens` rows too), which
/// costs one row instead of five and a sealed value. The account's own entry takes the
/// account's new token when only its tokens were written (two rows and the sealed value,
/// ``TokenStore/recheckAccess(for:since:)``).
struct TokenCacheEntry {
    var stamp: VaultChangeStamp
    /// The writes the entry was read from (for a target's entry, the account's
    /// `resource_tokens` rows too); nil when not known, which any commit makes unusable.
    var revision: AccessRevision?
    /// The active account when the entry was made (every cached answer is for this account).
    let activeAccount: AccountID?
    let account: AccountID
    let session: SessionRecord
    let policy: SessionPolicy
    var token: StoredAccessToken
}

/// The outcome of looking in the cache: the answer, or the stamp taken while looking (nil
/// when there was no entry to check), to be used as the stamp of the read that follows.
enum TokenCacheLookup {
    case hit(AccessToken)
    case miss(VaultChangeStamp?)
}

extension SessionService {
    /// The cached answer to `validAccessToken(for: account)`, or a miss when the slow path must
    /// run: the vault changed what the entry was read from, is locked or closed, the session
    /// needs a decision (lock, expiry) or the token is no longer fresh. Costs one `PRAGMA
    /// data_version`, read on the actor: the one vault call made there, on the stamp's own
    /// connection (opened off the actor by the read that made the entry), which never waits for
    /// a writer. After a commit, an entry costs one row more on that connection
    /// (``TokenStore/accessRevision(for:)``: the state row, a page beside the one the stamp
    /// reads), instead of a trip to the I/O threads and five rows and a sealed value there; and
    /// when only the account's tokens were written, the tokens row and its access token too.
    ///
    /// A `target` other than the account's own is looked up among the targets' entries, each
    /// judged the same way; after a commit that wrote any of the account's target tokens, its
    /// entries are read again.
    func cachedAccessToken(for account: AccountID?, target: TokenTarget = .account) throws -> TokenCacheLookup {
        let key = TokenRequest(account, target: target)
        guard var entry = target.isAccount ? broker.cache : broker.targetCache[key] else { return .miss(nil) }
        guard !vault.isLocked, !vault.isClosed, lockReason == nil else {
            broker.cache = nil
            return .miss(nil)
        }
        guard let stamp = try? vault.changeStamp() else {
            broker.cache = nil
            return .miss(nil)
        }
        if stamp != entry.stamp {
            // A commit that wrote nothing the entry was read from (another account's activity, a
            // notification, an event) leaves it as good as a new read: kept under the new stamp.
            // One that wrote only the account's tokens (another process refreshed them) leaves
            // the session and policy as read: the token is read again beside the state row.
            switch entry.revision.flatMap({ try? vault.tokens.recheckAccess(for: entry.account, since: $0) }) {
            case .unchanged: break
            case .token(let token, let revision) where target.isAccount && token.target.isAccount:
                entry.token = token
                entry.revision = revision
            case .token, .changed, nil:
                if target.isAccount { broker.cache = nil } else { broker.targetCache[key] = nil }
                return .miss(stamp)
            }
            entry.stamp = stamp
            if target.isAccount { broker.cache = entry } else { broker.targetCache[key] = entry }
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

    /// Remembers what the slow path read under `stamp` (taken before any of it was read), from
    /// the rows of `revision` (nil: not known; any commit then makes the entry unusable).
    func cacheAccessToken(
        _ token: StoredAccessToken, session: SessionRecord, policy: SessionPolicy,
        stamp: VaultChangeStamp?, activeAccount: AccountID?, revision: AccessRevision?
    ) {
        guard let stamp, !vault.isLocked else {
            broker.cache = nil
            return
        }
        let entry = TokenCacheEntry(
            stamp: stamp, revision: revision, activeAccount: activeAccount, account: token.account,
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
