import Foundation

/// Why no HTTP response was received. Carries no URL query, header value or body.
///
/// ```swift
/// do { _ = try await transport.send(request) }
/// catch TransportError.timedOut { /* retry later */ }
/// ```
public enum TransportError: Error, Sendable, Hashable {
    /// No response arrived within the timeout.
    case timedOut
    /// The connection could not be made or was lost (refused, unreachable, DNS, TLS).
    case connectionFailed(reason: String)
    /// Something answered, but not with an HTTP response the transport understands.
    case invalidResponse(reason: String)
    /// The calling task was cancelled.
    case cancelled
    /// The request carried SPKI pins and the server's TLS certificate chain holds none of them
    /// (or the pins could not be checked: plain http, or a transport that cannot see the chain).
    /// Nothing of the request was sent. Not transient: a retry meets the same key.
    case pinningFailed(host: String, reason: String)
}

extension TransportError: CustomStringConvertible {
    /// What happened, in one line.
    public var description: String {
        switch self {
        case .timedOut: "the server did not answer in time"
        case .connectionFailed(let reason): "could not reach the server: \(reason)"
        case .invalidResponse(let reason): "the server's answer was not valid HTTP: \(reason)"
        case .cancelled: "the request was cancelled"
        case .pinningFailed(let host, let reason): "the TLS key of \(host) matches none of the pins (\(reason)); nothing was sent"
        }
    }
}

extension TransportError: LocalizedError {
    /// Same as ``description``, so `localizedDescription` is useful too.
    public var errorDescription: String? { description }
}
