import Foundation
import VaultStore

/// What a long-running process (the agent) does for its accounts between requests
/// (``SessionConfiguration/grantWatch``): refresh ahead of expiry, check that each grant still
/// stands, and warn before a refresh token expires. Without it a process learns of a revoked
/// grant at the next request, and of an expiring refresh token when a script fails.
///
/// The watch never counts as activity: a session nobody uses still times out as its policy says
/// (an idle session is never kept alive by its own refreshes), and a locked or expired session
/// is left alone.
public struct GrantWatch: Sendable, Hashable {
    /// Which accounts.
    public enum Accounts: Sendable, Hashable {
        case none
        case all
        case only(Set<AccountID>)

        func contains(_ id: AccountID) -> Bool {
            switch self {
            case .none: false
            case .all: true
            case .only(let ids): ids.contains(id)
            }
        }
    }

    /// Refreshed when their token comes within ``SessionConfiguration/leeway`` of expiry, so a
    /// request never waits for a refresh.
    public var refreshAhead: Accounts = .none
    /// How often each signed-in account's grant is checked, so a revocation becomes a
    /// ``SessionEvent/revoked(_:description:)`` event and an expired session within this long.
    /// Nil: never. Minutes, not seconds: each check is a request.
    ///
    /// The check is an introspection of the refresh token (RFC 7662) where the account's
    /// provider publishes an `introspection_endpoint` and answers this client there (see
    /// ``introspection``): it rotates nothing. Otherwise, or when the provider refuses this
    /// client, it is a refresh (the one check every provider answers; it rotates the refresh
    /// token where the provider rotates them). An introspection that says the token is no
    /// longer active is confirmed with a refresh before the session ends: another process may
    /// have rotated it a moment before.
    public var checkInterval: Duration? = .seconds(900)
    /// Whether grant checks introspect where the provider allows it (true), or always refresh.
    public var introspection = true
    /// ``SessionEvent/refreshTokenExpiring(_:expiresAt:)`` this long before a refresh token
    /// expires, when its expiry is known: the refresh token's own `exp` when it is a JWT
    /// (decoded, not verified: it only decides when to warn), else the `exp` the last
    /// introspection of it told, or the `refresh_expires_in` of this process's last refresh
    /// (Keycloak's member). Nil: never.
    public var refreshExpiryWarning: Duration? = .seconds(3 * 86_400)

    public init(
        refreshAhead: Accounts = .none, checkInterval: Duration? = .seconds(900), introspection: Bool = true,
        refreshExpiryWarning: Duration? = .seconds(3 * 86_400)
    ) {
        (self.refreshAhead, self.checkInterval, self.introspection) = (refreshAhead, checkInterval, introspection)
        self.refreshExpiryWarning = refreshExpiryWarning
    }
}

/// An expiry a provider told for a refresh token that is not a JWT, and whether it was told
/// twice alike (fixed: the grant ends then, whatever its use).
struct ToldRefreshExpiry: Sendable {
    var expiresAt: Date
    var fixed: Bool
}
