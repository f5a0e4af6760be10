import Foundation

/// Why a refresh (RFC 6749 §6) failed, classified for the caller's next step.
///
/// - ``invalidGrant(description:)``: the refresh token is dead — sign the user out.
/// - ``clientMisconfigured(code:description:)``: this app's OAuth setup is wrong — keep the
///   grant, report it, don't retry.
/// - ``transient(_:)``: try again later (``isTransient`` is true).
/// - ``malformedResponse(status:reason:)``: the server answered nonsense — a server bug.
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
