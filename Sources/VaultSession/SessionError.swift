import Foundation
import VaultStore

/// Why the session service could not give a token or do what was asked.
/// Never carries a token, key or passphrase.
public enum SessionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No account is active: sign in first.
    case noActiveAccount
    /// The account is not in the vault, or has no session.
    case notSignedIn(AccountID)
    /// Locked: unlock with the passphrase or key file to resume.
    case locked(AccountID, SessionEndReason)
    /// Over: the user signs in again.
    case expired(AccountID, SessionEndReason)
    /// The server revoked the grant (`invalid_grant`); the session is expired(revoked).
    case revoked(AccountID, description: String?)
    /// The server kept refusing to refresh for a reason the vault does not know (an unknown
    /// error code, a 400/401 without JSON); the session is expired(refused), the tokens wiped.
    case refused(AccountID, description: String?)
    /// The OAuth client settings are wrong (`invalid_client`, `unauthorized_client`…): fix the configuration.
    case clientMisconfigured(AccountID, code: String, description: String?)
    /// Refreshing failed for a reason that may pass and no valid access token is left; retry after `retryAt`.
    case temporarilyUnavailable(AccountID, reason: String, retryAt: Date?)
    /// The active account changed while the token was being fetched; ask again.
    case accountChanged(from: AccountID, to: AccountID?)
    /// The account has SPKI pins and the identity service's TLS chain holds none of them:
    /// nothing was sent, the tokens are untouched. Either the service changed its key (pin the
    /// new one) or something on the network is impersonating it.
    case pinningFailed(AccountID, host: String, reason: String)
    /// The last authentication (`SessionRecord.lastAuthentication`) is older than the caller
    /// allows for this action: the user signs in again with `max_age` (step-up).
    case authenticationTooOld(AccountID, authenticatedAt: Date, maximumAge: Duration)
    /// The identity service would not issue a token for the target asked for (`invalid_target`,
    /// `invalid_scope`), or issued one whose audience is not the resource asked for
    /// (`audience_mismatch`: a server that ignores RFC 8707's `resource`). The account's grant and
    /// its other tokens are untouched; nothing was stored.
    case targetRefused(AccountID, target: TokenTarget, code: String, description: String?)
    /// The vault failed: its error, with its code (`VaultError.code`) and message.
    case vault(VaultError)

    /// Why the identity service ended the sign-in, for ``revoked(_:description:)`` (nil for
    /// every other error): ``ForcedLogoutReason/unspecified`` when it gave no documented reason.
    public var forcedLogoutReason: ForcedLogoutReason? {
        if case .revoked(_, let description) = self { return ForcedLogoutReason(refusal: description) }
        return nil
    }

    public var description: String {
        switch self {
        case .noActiveAccount: "no account is signed in"
        case .notSignedIn(let account): "account \(account) is not signed in"
        case .locked(let account, let reason):
            "the session of account \(account) is locked (\(reason)): unlock it with the vault's passphrase or key"
        case .expired(let account, .exported):
            "the session of account \(account) was moved to another vault (a session export): sign in again to use it here"
        case .expired(let account, let reason):
            "the session of account \(account) expired (\(reason)): sign in again"
        case .revoked(let account, let description):
            "the identity service ended the sign-in of account \(account): \(ForcedLogoutReason(refusal: description).explanation)"
                + "\(description.map { " (\($0))" } ?? ""): sign in again"
        case .refused(let account, let description):
            "the identity service kept refusing to refresh the sign-in of account \(account)\(description.map { " (\($0))" } ?? ""): sign in again"
        case .clientMisconfigured(let account, let code, let description):
            "the OAuth client settings of account \(account) were refused (\(code)\(description.map { ": \($0)" } ?? "")): fix the client configuration"
        case .temporarilyUnavailable(let account, let reason, let retryAt):
            "no valid token for account \(account) right now (\(reason))\(retryAt.map { "; retrying after \($0.messageText)" } ?? "")"
        case .accountChanged(let from, let to): "the active account changed from \(from) to \(to.map(\.rawValue) ?? "none") during the request; ask again"
        case .pinningFailed(let account, let host, let reason):
            "the identity service \(host) of account \(account) did not present a pinned TLS key: \(reason). Nothing was sent. "
                + "If the service changed its key, remove the account and add it again with the new pin; "
                + "otherwise something on the network is impersonating it"
        case .authenticationTooOld(let account, let at, let maximum):
            "the last sign-in of account \(account) was at \(at.messageText), longer ago than the \(maximum.components.seconds) s this action allows; sign in again, authenticating anew (max_age=0)"
        case .targetRefused(let account, let target, "audience_mismatch", let description):
            "the identity service of account \(account) sent a token for another audience than \(target)\(description.map { " (\($0))" } ?? ""); it was not stored or handed out: the service may not support resource indicators (RFC 8707)"
        case .targetRefused(let account, let target, let code, let description):
            "the identity service of account \(account) refused a token for \(target): \(code)\(description.map { " (\($0))" } ?? "")"
        case .vault(let error): error.message
        }
    }

    init(_ error: VaultError) {
        self = .vault(error)
    }

    /// Runs `body`, turning a ``VaultError`` it throws into ``SessionError/vault(_:)``.
    static func wrapping<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as VaultError {
            throw SessionError(error)
        }
    }
}
