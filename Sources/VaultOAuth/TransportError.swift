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
}

extension TransportError: CustomStringConvertible {
    /// What happened, in one line.
    public var description: String {
        switch self {
        case .timedOut: "the server did not answer in time"
        case .connectionFailed(let reason): "could not reach the server: \(reason)"
        case .invalidResponse(let reason): "the server's answer was not valid HTTP: \(reason)"
        case .cancelled: "the request was cancelled"
        }
    }
}

extension TransportError: LocalizedError {
    /// Same as ``description``, so `localizedDescription` is useful too.
    public var errorDescription: String? { description }
}
