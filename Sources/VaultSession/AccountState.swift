import Foundation
import VaultStore

/// Where an account stands, in one vocabulary for the seeds' words: Para's `unknown`,
/// `inactive`, `active` (not fully signed in) and `activeLoggedIn`; the article's Loading,
/// Active, Locked and Expired.
///
/// | state | Para | article | when |
/// |---|---|---|---|
/// | ``unknown`` | unknown | Loading | not judged yet, or the session row fails its check |
/// | ``inactive`` | inactive | — | no session: never signed in, signed out, removed |
/// | ``activeDevicePending`` | active | Active | signed in, this device's activation awaits approval |
/// | ``activeSignedIn`` | activeLoggedIn | Active | signed in, tokens served |
/// | ``locked(_:)`` | — | Locked | an unlock resumes it |
/// | ``expired(_:)`` | — | Expired | over: sign in again |
///
/// A step-up (a sign-in more recent than an action allows) is asked per request (`vault token
/// --max-auth-age`), not a state of the account.
public enum AccountState: Sendable, Hashable, CustomStringConvertible {
    case unknown
    case inactive
    case activeDevicePending
    case activeSignedIn
    case locked(SessionEndReason)
    case expired(SessionEndReason)

    /// The state of an account whose current session is `session` under `policy` at `now`
    /// (deadlines that passed count, as at the next use), `thisDevice` the status of this
    /// install's registration for the account (nil: none).
    public init(session: SessionRecord?, policy: SessionPolicy, thisDevice: DeviceStatus?, now: Date) {
        guard let session else {
            self = .inactive
            return
        }
        let (state, reason) = session.stateAtNextUse(policy: policy, now: now)
        switch state {
        case .active: self = thisDevice == .pending ? .activeDevicePending : .activeSignedIn
        case .locked: self = .locked(reason ?? .lockedByUser)
        case .expired: self = .expired(reason ?? .absoluteTimeout)
        case .signedOut: self = .inactive
        }
    }

    /// The name in `--json` and in text: `unknown`, `inactive`, `active_device_pending`,
    /// `active_signed_in`, `locked`, `expired`.
    public var name: String {
        switch self {
        case .unknown: "unknown"
        case .inactive: "inactive"
        case .activeDevicePending: "active_device_pending"
        case .activeSignedIn: "active_signed_in"
        case .locked: "locked"
        case .expired: "expired"
        }
    }

    /// Why it is locked or expired.
    public var reason: SessionEndReason? {
        switch self {
        case .locked(let reason), .expired(let reason): reason
        default: nil
        }
    }

    public var description: String { reason.map { "\(name) (\($0))" } ?? name }
}

extension SessionService {
    /// The account's state now (the active account's when nil), judged without changing
    /// anything: ``AccountState/unknown`` when its session row fails its check.
    public func accountState(of account: AccountID? = nil) async throws -> AccountState {
        guard let id = try await accountOrActive(account) else { return .inactive }
        let vault = self.vault
        let read = try? await vaultCall { () -> (SessionRecord?, SessionPolicy, DeviceStatus?) in
            let device = try vault.devices.all(for: id).first { $0.deviceID == vault.deviceID }
            return (try vault.sessions.current(for: id), try vault.sessions.policy(for: id), device?.status)
        }
        guard let (session, policy, device) = read else { return .unknown }
        return AccountState(session: session, policy: policy, thisDevice: device, now: now())
    }
}

extension VaultMetadata {
    /// Every account's state at `now`, from the file's plain metadata (no key: `vault status`
    /// and `sessions list`): each account's newest session under its stored policy, and this
    /// install's registration for it. Not authenticated: a row edited without the key shows
    /// as edited here, and is refused where the vault acts on it.
    public func accountStates(now: Date) -> [AccountID: AccountState] {
        var newest: [AccountID: SessionRecord] = [:]
        for session in sessions where newest[session.account].map({ session.id > $0.id }) ?? true {
            newest[session.account] = session
        }
        let thisDevice = Dictionary(
            devices.filter { $0.deviceID == inspection.deviceID }.map { ($0.account, $0.status) }, uniquingKeysWith: { first, _ in first })
        return Dictionary(
            accounts.map { account in
                (
                    account.id,
                    AccountState(session: newest[account.id], policy: account.policy ?? SessionPolicy(), thisDevice: thisDevice[account.id], now: now)
                )
            }, uniquingKeysWith: { first, _ in first })
    }
}

extension AccountState {
    /// Every state's name, in the order `vault status` counts them.
    public static let names = ["active_signed_in", "active_device_pending", "locked", "expired", "inactive", "unknown"]
}
