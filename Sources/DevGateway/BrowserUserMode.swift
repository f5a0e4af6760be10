/// What the user signed in at the gateway's pretend browser session does with an authorization
/// request: the authorization endpoint answers for them, at once.
///
/// ```swift
/// await gateway.signInBrowserUser("alice", mode: .deny)
/// ```
public enum BrowserUserMode: String, Sendable, Hashable, Codable {
    /// Approve: redirect back with a code.
    case approve
    /// Deny: redirect back with `error=access_denied`.
    case deny
}
