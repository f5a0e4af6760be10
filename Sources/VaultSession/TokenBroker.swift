import Foundation
import VaultStore

/// What a caller of ``SessionService/validAccessToken(for:)`` asked for: the active account
/// or a named one. Callers asking the same while one of them is served share its answer.
enum TokenRequest: Hashable {
    case active
    case account(AccountID)

    init(_ account: AccountID?) { self = account.map(TokenRequest.account) ?? .active }
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
    /// The last fresh token served and what it was judged on; dropped on lock and on any change.
    var cache: TokenCacheEntry?
    private var requests: [TokenRequest: Coalesced<AccessToken>] = [:]
    private var refreshes: [AccountID: Coalesced<StoredTokens>] = [:]
    private var lifetimes: [AccountID: TimeInterval] = [:]

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

    /// Stops the account's refresh (its session ended, or it was signed out); its callers get
    /// `CancellationError`, which the service words as the ended session.
    func cancelRefresh(of account: AccountID) {
        refreshes[account]?.cancel()
    }

    /// Every refresh running, to wait for before the keys go.
    var runningRefreshes: [Coalesced<StoredTokens>] { Array(refreshes.values) }

    // MARK: Token lifetimes

    /// How long the account's tokens lived when last refreshed to meet a minimum validity.
    func lifetime(of account: AccountID) -> TimeInterval? { lifetimes[account] }

    mutating func observeLifetime(_ lifetime: TimeInterval, of account: AccountID) { lifetimes[account] = lifetime }
}
