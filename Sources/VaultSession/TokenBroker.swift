import Foundation
import VaultStore

/// What a caller of ``SessionService/validAccessToken(for:)`` asked for: the active account
/// or a named one, and the target (the account's own token, or one for other resources or
/// scopes). Callers asking the same while one of them is served share its answer.
struct TokenRequest: Hashable {
    /// Nil: the active account.
    var account: AccountID?
    var target: TokenTarget

    init(_ account: AccountID?, target: TokenTarget = .account) {
        self.account = account
        self.target = target
    }

    /// The active account's own token.
    static let active = TokenRequest(nil)

    /// The named account's own token.
    static func account(_ account: AccountID) -> TokenRequest { TokenRequest(account) }
}

/// One account's target, whose token one refresh in this process obtains at a time.
struct TargetKey: Hashable {
    var account: AccountID
    var target: TokenTarget
}

/// The session service's in-process sharing of token work, all of it on one ``Coalesced``:
/// the answer to each kind of ``TokenRequest`` being worked out (led by the first caller, joined
/// by the others), the refresh of each account (shared work that finishes whoever leaves), the
/// warm-process cache of the last fresh token (``TokenCacheEntry``), and how long the identity
/// service's tokens lived when refreshed to meet a minimum validity.
///
/// A value owned by the session actor: every method runs there, none waits. A caller cancelled
/// while waiting leaves at once (``Coalesced/value()``); the work it shared goes on for the others.
///
/// ```swift
/// let (work, joined) = broker.serving(request)
/// defer { broker.release(work, for: request) }
/// let token = try await joined ? work.value() : work.lead { try await serve() }
/// ```
struct TokenBroker {
    /// The last fresh token served and what it was judged on; dropped on lock and on any change
    /// (and the targets' entries with it).
    var cache: TokenCacheEntry? {
        didSet { if cache == nil { targetCache.removeAll() } }
    }
    /// The last fresh token served for each target other than an account's own (a few: the
    /// APIs one process calls), each judged like ``cache``.
    var targetCache: [TokenRequest: TokenCacheEntry] = [:]
    private var requests: [TokenRequest: Coalesced<AccessToken>] = [:]
    private var refreshes: [AccountID: Coalesced<StoredTokens>] = [:]
    private var targetRefreshes: [TargetKey: Coalesced<StoredAccessToken>] = [:]
    private var lifetimes: [AccountID: TimeInterval] = [:]
    private var targetLifetimes: [TargetKey: TimeInterval] = [:]
    private var holderNumbers: [TargetKey: Int] = [:]

    // MARK: Token requests

    /// The answer to `request` being worked out, to join (`joined`), or a new one for this
    /// caller to lead, registered for the callers that come next.
    mutating func serving(_ request: TokenRequest) -> (work: Coalesced<AccessToken>, joined: Bool) {
        if let running = requests[request], running.isJoinable { return (running, true) }
        let work = Coalesced<AccessToken>(ledBy: ())
        requests[request] = work
        return (work, false)
    }

    /// Called by each caller of `work` when it is back: the first back after the work finished
    /// unregisters it (a newer one registered meanwhile stays).
    mutating func release(_ work: Coalesced<AccessToken>, for request: TokenRequest) {
        if let current = requests[request], current === work, work.isFinished { requests[request] = nil }
    }

    // MARK: Refreshes

    /// The account's refresh running in this process, or the one `start` makes (registered).
    mutating func refresh(of account: AccountID, starting start: () -> Coalesced<StoredTokens>) -> Coalesced<StoredTokens> {
        if let running = refreshes[account], running.isJoinable { return running }
        let refresh = start()
        refreshes[account] = refresh
        return refresh
    }

    /// Called by each caller of `refresh` when it is back: the first back after it finished
    /// lets it go (a refresh every caller left is replaced by the next one instead).
    mutating func release(_ refresh: Coalesced<StoredTokens>, of account: AccountID) {
        if let current = refreshes[account], current === refresh, refresh.isFinished { refreshes[account] = nil }
    }

    /// The refresh for `key`'s target running in this process, or the one `start` makes (registered).
    mutating func refresh(
        of key: TargetKey, starting start: () -> Coalesced<StoredAccessToken>
    ) -> Coalesced<StoredAccessToken> {
        if let running = targetRefreshes[key], running.isJoinable { return running }
        let refresh = start()
        targetRefreshes[key] = refresh
        return refresh
    }

    /// ``release(_:of:)-(Coalesced<StoredTokens>,_)`` for a target's refresh.
    mutating func release(_ refresh: Coalesced<StoredAccessToken>, of key: TargetKey) {
        if let current = targetRefreshes[key], current === refresh, refresh.isFinished { targetRefreshes[key] = nil }
    }

    /// Stops the account's refreshes, its own and its targets' (its session ended, or it was
    /// signed out); their callers get `CancellationError`, which the service words as the ended session.
    func cancelRefresh(of account: AccountID) {
        refreshes[account]?.cancel()
        for (key, refresh) in targetRefreshes where key.account == account { refresh.cancel() }
    }

    /// Every refresh running, to wait for before the keys go.
    var runningRefreshes: [Coalesced<StoredTokens>] { Array(refreshes.values) }
    /// A number for `key`'s target, the same for the life of this service, unique among its
    /// targets: what tells its refresh lease apart from the account's own.
    mutating func holderNumber(for key: TargetKey) -> Int {
        if let known = holderNumbers[key] { return known }
        let next = holderNumbers.count + 1
        holderNumbers[key] = next
        return next
    }

    /// The refresh running in this process for `account` as `holder` (its own refresh as
    /// `own`, a target's as what `holderOf` says for its key), to await instead of polling
    /// the file while it holds the account's lease; nil when none does.
    func refresh(of account: AccountID, heldBy holder: String, own: String, holderOf: (TargetKey) -> String?) -> (@Sendable () async -> Void)? {
        if holder == own, let running = refreshes[account], !running.isFinished { return { await running.finished() } }
        for (key, running) in targetRefreshes where key.account == account && !running.isFinished && holderOf(key) == holder {
            return { await running.finished() }
        }
        return nil
    }

    /// The number ``holderNumber(for:)`` gave `key`, nil when it gave none.
    func knownHolderNumber(for key: TargetKey) -> Int? { holderNumbers[key] }

    /// Every refresh for a target running, to wait for before the keys go.
    var runningTargetRefreshes: [Coalesced<StoredAccessToken>] { Array(targetRefreshes.values) }

    // MARK: Token lifetimes

    /// How long the account's tokens lived when last refreshed to meet a minimum validity.
    func lifetime(of account: AccountID) -> TimeInterval? { lifetimes[account] }

    mutating func observeLifetime(_ lifetime: TimeInterval, of account: AccountID) { lifetimes[account] = lifetime }

    /// How long a target's tokens lived when last refreshed to meet a minimum validity.
    func lifetime(of key: TargetKey) -> TimeInterval? { targetLifetimes[key] }

    mutating func observeLifetime(_ lifetime: TimeInterval, of key: TargetKey) { targetLifetimes[key] = lifetime }
}
