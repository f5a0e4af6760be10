import VaultStore

/// What ``SessionService/signOut(_:revoke:)`` did, in the order it did it: the revocation at
/// the identity service first, then the removal from the vault.
///
/// ```swift
/// let report = try await session.signOut(account)
/// if case .failed(let why) = report.revocation { print("warning: the server may still accept the grant: \(why)") }
/// if report.removal.checkpoint?.isComplete == false { print("warning: run `vault compact` later") }
/// ```
public struct SignOutReport: Sendable, Hashable {
    /// How the revocation at the identity service (RFC 7009) went.
    public enum Revocation: Sendable, Hashable {
        /// The server revoked the token (or answered that it was not valid anyway).
        case revoked
        /// No request was sent, and why: the account has no revocation endpoint or no token,
        /// the vault is locked, or the caller asked for none.
        case notAttempted(String)
        /// The request failed (redacted description): the grant may still be alive at the server.
        case failed(String)
    }

    /// The account signed out.
    public var account: AccountID
    /// The revocation, attempted before anything was removed.
    public var revocation: Revocation
    /// The removal from the vault, and the new active account.
    public var removal: AccountRemoval

    public init(account: AccountID, revocation: Revocation, removal: AccountRemoval) {
        self.account = account
        self.revocation = revocation
        self.removal = removal
    }
}
