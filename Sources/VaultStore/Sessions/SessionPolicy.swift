import Foundation

/// The timeout rules of an account's sessions, stored in the vault so every process applies
/// the same ones. Defaults follow NIST SP 800-63B (AAL2) and OWASP session guidance.
///
/// ```swift
/// var policy = SessionPolicy()            // 15 min idle, 60 s warning, 3 extensions, 12 h absolute
/// policy.idleTimeout = nil                // a daemon that never idles out
/// policy.backgroundTimeout = .seconds(60)
/// policy.activity = .interactive          // only the user's own activity keeps the session
/// ```
public struct SessionPolicy: Sendable, Hashable, Codable {
    /// What an idle timeout does to the session.
    public enum IdleAction: String, Sendable, Hashable, Codable {
        /// Drop the keys; an explicit unlock resumes the session.
        case lock
        /// End the session; the user signs in again.
        case expire
    }

    /// Which uses of the session count as activity (move the idle deadline).
    public enum Activity: String, Sendable, Hashable, Codable {
        /// Every token served counts, as does reported activity: a script or daemon that asks
        /// for a token keeps its session alive. The default.
        case any
        /// Only what the tool reports as the user's own activity
        /// (`SessionService.recordActivity(for:)`): an interactive tool that wants its session
        /// to lock while the person is away, however often it polls. An extension moves the idle
        /// deadline but is never activity, under either setting.
        case interactive
    }

    /// Inactivity after which the session ends (nil: never).
    public var idleTimeout: Duration?
    /// How long before the idle deadline the warning is raised.
    public var warningBefore: Duration
    /// How many times the idle deadline may be extended by ``SessionPolicy`` extension requests.
    public var maxExtensions: Int
    /// Lifetime from sign-in after which the session expires, whatever the activity. Not
    /// extendable. Nil: none, the session lasts as long as its grant (a daemon's); a stolen
    /// unlocked vault then serves tokens until the grant is revoked at the server.
    public var absoluteLifetime: Duration?
    /// Time in the background after which the session locks on return (nil: never).
    public var backgroundTimeout: Duration?
    public var idleAction: IdleAction
    /// Which uses count as activity (``Activity/any`` by default).
    public var activity: Activity
    /// Para's "a sensitive action extends the session by its length": a sensitive action
    /// (`SessionService.recordSensitiveAction(for:)`) moves the absolute deadline to now +
    /// ``absoluteLifetime``, never past the session's start + this cap (schema 17). Nil: a
    /// sensitive action is activity, nothing more. Needs an absolute lifetime no longer than it.
    public var sensitiveActionCap: Duration?
    /// How long the provider lets a grant's refresh tokens live from the sign-in, when nothing
    /// the vault can read says so (schema 17): the grant watch warns before it. Nil: not known.
    public var refreshTokenLifetime: Duration?

    public init(
        idleTimeout: Duration? = .seconds(15 * 60), warningBefore: Duration = .seconds(60),
        maxExtensions: Int = 3, absoluteLifetime: Duration? = .seconds(12 * 3600),
        backgroundTimeout: Duration? = .seconds(5 * 60), idleAction: IdleAction = .lock,
        activity: Activity = .any, sensitiveActionCap: Duration? = nil, refreshTokenLifetime: Duration? = nil
    ) {
        self.sensitiveActionCap = sensitiveActionCap
        self.refreshTokenLifetime = refreshTokenLifetime
        self.idleTimeout = idleTimeout
        self.warningBefore = warningBefore
        self.maxExtensions = maxExtensions
        self.absoluteLifetime = absoluteLifetime
        self.backgroundTimeout = backgroundTimeout
        self.idleAction = idleAction
        self.activity = activity
    }

    /// Throws ``VaultError/Code/invalidArgument`` for a policy that cannot be applied.
    public func validate() throws {
        func positive(_ d: Duration?) -> Bool { d.map { $0 > .zero } ?? true }
        guard positive(idleTimeout), positive(backgroundTimeout), positive(absoluteLifetime), positive(sensitiveActionCap),
            positive(refreshTokenLifetime),
            warningBefore >= .zero, maxExtensions >= 0
        else {
            throw VaultError(.invalidArgument, "session policy durations must be positive and the extension limit not negative")
        }
        if let idleTimeout, warningBefore >= idleTimeout {
            throw VaultError(.invalidArgument, "the idle warning must come before the idle timeout")
        }
        if let cap = sensitiveActionCap {
            guard let lifetime = absoluteLifetime else {
                throw VaultError(.invalidArgument, "a sensitive action moves the absolute deadline: the policy needs an absolute lifetime")
            }
            guard cap >= lifetime else {
                throw VaultError(.invalidArgument, "the sensitive-action cap must be at least the absolute lifetime")
            }
        }
    }
}

extension Duration {
    /// Whole milliseconds, the unit durations are stored in.
    var milliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}
