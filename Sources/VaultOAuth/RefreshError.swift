import Foundation

/// Why a refresh (RFC 6749 §6) failed, classified for the caller's next step.
///
/// - ``invalidGrant(description:)``: the refresh token is dead — sign the user out.
/// - ``clientMisconfigured(code:description:)``: this app's OAuth setup is wrong — keep the
///   grant, report it, don't retry.
/// - ``transient(_:)``: try again later (``isTransient`` is true).
/// - ``malformedResponse(status:reason:)``: the server answered nonsense — a server bug.
/// - ``unrecognizedError(status:code:description:)``, and a 400/401 without JSON: refused, the
///   meaning unknown (``isUnexplainedRefusal``) — retry, but only a few times in a row.
///
/// ```swift
/// do {
///     tokens = try await client.refresh(refreshToken: stored, endpoint: tokenURL, client: credentials)
/// } catch .invalidGrant {
///     try await signOut()
/// } catch where error.isTransient {
///     scheduleRetry()
/// }
/// ```
public enum RefreshError: Error, Sendable, Hashable {
    /// `invalid_grant`: revoked, expired, or a rotated refresh token presented again
    /// (RFC 6749 §5.2, RFC 9700 §4.14.2). The grant cannot be used any more.
    case invalidGrant(description: String?)
    /// The server rejected the client or the request's shape: `invalid_client`,
    /// `unauthorized_client`, `unsupported_grant_type`, `invalid_request` or `invalid_scope`
    /// (`code` says which), or `insecure_endpoint` when the endpoint is plain HTTP off loopback.
    case clientMisconfigured(code: String, description: String?)
    /// A failure that may pass: network, timeout, rate limiting, server error.
    case transient(TransientFailure)
    /// A 4xx with an error code RFC 6749 does not define; the grant may still be alive.
    case unrecognizedError(status: Int, code: String, description: String?)
    /// A response that is not what RFC 6749 says: an unparseable 2xx body, a 4xx without a
    /// JSON error, a 1xx/3xx status.
    case malformedResponse(status: Int, reason: String)
    /// The calling task was cancelled before an answer arrived; the outcome is unknown.
    case cancelled
    /// The request carried SPKI pins and the server's TLS chain holds none of them: nothing was
    /// sent, the refresh token is untouched. Not transient and never a sign of revocation.
    case pinningFailed(host: String, reason: String)

    /// Whether retrying the same request later may succeed.
    public var isTransient: Bool {
        if case .transient = self { return true }
        return false
    }

    /// Whether the authorization server refused the refresh without saying why in words this
    /// client knows: a 4xx JSON error with an unregistered code (`interaction_required`, a
    /// vendor's own), or a 400 or 401 without a JSON error body. RFC 6749 §5.2 has the token
    /// endpoint answer every error with 400 (401 for client authentication) and a JSON `error`,
    /// so those two statuses come from the endpoint itself; another 4xx page without JSON (a
    /// 403 from a firewall, a 404 during a deployment) more likely comes from something in
    /// front of it, and stays a plain failure. The grant may be alive or dead: a caller retries,
    /// but not forever.
    ///
    /// ```swift
    /// if error.isUnexplainedRefusal { refusals += 1 }  // past a bound: sign in again
    /// ```
    public var isUnexplainedRefusal: Bool {
        switch self {
        case .unrecognizedError(let status, _, _): (400..<500).contains(status)
        case .malformedResponse(let status, _): status == 400 || status == 401
        default: false
        }
    }
}

extension RefreshError: CustomStringConvertible {
    /// What happened and what to do next, in one line.
    public var description: String {
        switch self {
        case .invalidGrant(let detail):
            "the refresh token is no longer valid (invalid_grant\(detail.map { ": \($0)" } ?? "")); sign in again"
        case .clientMisconfigured(let code, let detail):
            "the authorization server rejected this client (\(code)\(detail.map { ": \($0)" } ?? "")); check the client id, secret and endpoint"
        case .transient(let failure):
            "token refresh failed temporarily: \(failure); retry later"
        case .unrecognizedError(let status, let code, let detail):
            "the authorization server refused the refresh with HTTP \(status) \(code)\(detail.map { ": \($0)" } ?? "")"
        case .malformedResponse(let status, let reason):
            "the authorization server sent an invalid response (HTTP \(status)): \(reason)"
        case .cancelled:
            "token refresh was cancelled"
        case .pinningFailed(let host, let reason):
            "the token endpoint \(host) did not present a pinned TLS key (\(reason)); nothing was sent: "
                + "if the identity service changed its key, pin the new one, otherwise something on the network is impersonating it"
        }
    }
}

extension RefreshError: LocalizedError {
    /// Same as ``description``, so `localizedDescription` is useful too.
    public var errorDescription: String? { description }
}
