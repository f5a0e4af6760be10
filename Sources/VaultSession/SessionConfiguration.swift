import Foundation
import VaultStore

/// How the session service refreshes and watches. Timeouts themselves are per account
/// (`SessionPolicy`, stored in the vault).
public struct SessionConfiguration: Sendable {
    /// A served access token stays valid for at least this long; closer to expiry, it is refreshed first.
    public var leeway: Duration = .seconds(60)
    /// How long a refresh lease holds before another process may take over. Keep it above
    /// ``requestDeadline``: a lease that lapses while its request is still out lets a second
    /// process present the same refresh token, which a rotating server treats as reuse and
    /// revokes the grant. (The holder also renews its lease while the request is in flight.)
    public var leaseDuration: Duration = .seconds(60)
    /// How recent the user's authentication must be to answer a notification with an action
    /// that names an authentication level (`VaultStore.NotificationAction.authLevel`).
    public var stepUpMaximumAge: Duration = .seconds(300)
    /// The longest any token, revocation or device request may take in all, from connecting to
    /// the last byte of the answer, measured on the OAuth client's clock (`OAuthClient.clock`;
    /// the device API's own). A server that trickles its answer is cut off here and the
    /// failure is a transient timeout. Shorter than ``leaseDuration`` by default.
    public var requestDeadline: Duration = .seconds(30)
    /// How often a caller waiting for another process's refresh takes another look at the
    /// lease. Meanwhile it watches SQLite's `data_version` every ``leaseWatchInterval``, so it
    /// sees the other process's commit within that time rather than this one.
    public var leasePollInterval: Duration = .milliseconds(20)
    /// How often a caller waiting for another process's refresh checks whether anything was
    /// committed to the vault (one `PRAGMA data_version`, no transaction).
    public var leaseWatchInterval: Duration = .milliseconds(1)
    /// The first back-off after a transient refresh failure; doubles per failure, with jitter.
    public var backoffBase: Duration = .seconds(1)
    /// The longest back-off.
    public var backoffCap: Duration = .seconds(300)
    /// Activity is written to the vault at most this often (the idle deadline moves with it).
    public var activityWriteInterval: Duration = .seconds(1)
    /// How often a long-running process checks whether another process changed the vault.
    public var observationInterval: Duration = .seconds(1)
    /// How long the vault's event log keeps entries (`Vault.events(after:account:limit:)`,
    /// `vault events`): at most this many, none older than this.
    public var eventRetention = EventRetention()
    /// How long an access token is trusted when its token response has no `expires_in` and it
    /// is not a JWT with a believable `exp`: one ahead, by at most a year (RFC 6749 §5.1 makes
    /// `expires_in` only recommended). Refreshed ``leeway`` before that, as always.
    public var defaultTokenLifetime: Duration = .seconds(3600)
    /// How many refusals in a row whose meaning the vault does not know (an unknown 4xx error
    /// code, a 400/401 without a JSON body) end the grant with the `refused` verdict, as
    /// `invalid_grant` ends it with `revoked`. Until then they back off like transient failures.
    public var maximumRefusals = 3
    /// How far this machine's clock may be from the identity provider's when an ID token's
    /// `exp`, `iat` and `auth_time` are checked.
    public var idTokenClockSkew: Duration = .seconds(120)
    /// The policy for accounts signed in without one.
    public var defaultPolicy = SessionPolicy()
    /// Which answers of the identity service grant a session extension: plain HTTP success, the
    /// codelab's status 100 with error 0, or a service's own rule (``ExtensionAcceptance``).
    public var extensionAcceptance = ExtensionAcceptance.httpOrCodelab
    /// What a long-running process does between requests: refresh ahead, check grants, warn
    /// before refresh tokens expire (``GrantWatch``). Nil (the default): nothing.
    public var grantWatch: GrantWatch?

    public init() {}
}
