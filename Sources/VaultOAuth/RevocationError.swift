import Foundation

/// Why a revocation (RFC 7009) failed.
///
/// An unknown or already-invalid token is not an error: the server answers 200.
///
/// ```swift
/// do {
///     try await client.revoke(token: refreshToken, hint: .refreshToken, endpoint: url, client: credentials)
/// } catch where error.isTransient {
///     remember(refreshToken, forLaterRevocation: true)
/// }
/// ```
public enum RevocationError: Error, Sendable, Hashable {
    /// The server does not revoke this type of token (`unsupported_token_type`, RFC 7009 §2.2.1).
    case unsupportedTokenType
    /// The server rejected the client or request: `invalid_client`, `unauthorized_client`,
    /// `invalid_request`, …, or `insecure_endpoint` for plain HTTP off loopback.
    case clientMisconfigured(code: String, description: String?)
    /// The token may still be valid: 503, another 5xx, 429, or a network failure. Retry later.
    case transient(TransientFailure)
    /// A response RFC 7009 does not describe.
    case malformedResponse(status: Int, reason: String)
    /// The calling task was cancelled before an answer arrived; the token may still be valid.
    case cancelled
    /// The request carried SPKI pins and the server's TLS chain holds none of them: nothing was
    /// sent, the token may still be valid.
    case pinningFailed(host: String, reason: String)

    /// Whether retrying the same request later may succeed.
    public var isTransient: Bool {
        if case .transient = self { return true }
        return false
    }
}

extension RevocationError: CustomStringConvertible {
    /// What happened, in one line.
    public var description: String {
        switch self {
        case .unsupportedTokenType:
            "the authorization server does not revoke this type of token (unsupported_token_type)"
        case .clientMisconfigured(let code, let detail):
            "the authorization server rejected this client (\(code)\(detail.map { ": \($0)" } ?? "")); check the client id, secret and endpoint"
        case .transient(let failure):
            "token revocation failed temporarily: \(failure); the token may still be valid, retry later"
        case .malformedResponse(let status, let reason):
            "the authorization server sent an invalid revocation response (HTTP \(status)): \(reason)"
        case .cancelled:
            "token revocation was cancelled; the token may still be valid"
        case .pinningFailed(let host, let reason):
            "the revocation endpoint \(host) did not present a pinned TLS key (\(reason)); nothing was sent, the token may still be valid"
        }
    }
}

extension RevocationError: LocalizedError {
    /// Same as ``description``, so `localizedDescription` is useful too.
    public var errorDescription: String? { description }
}
