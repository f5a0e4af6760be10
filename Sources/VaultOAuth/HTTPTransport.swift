/// Sends one HTTP request and returns the response, whatever its status.
///
/// Implementations throw ``TransportError`` when no HTTP response was received (timeout,
/// refused connection, cancellation); an HTTP error status is a response, not an error.
/// ``URLSessionTransport`` is the production implementation; tests may supply their own.
///
/// ```swift
/// struct CannedTransport: HTTPTransport {
///     var response: HTTPResponse
///     func send(_ request: HTTPRequest) async throws -> HTTPResponse { response }
/// }
/// ```
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, or throws if none was received.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}
