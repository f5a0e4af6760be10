/// Sends one HTTP request and returns the response, whatever its status.
///
/// Implementations throw ``TransportError`` when no HTTP response was received (timeout,
/// refused connection, cancellation); an HTTP error status is a response, not an error.
/// They give up promptly when their task is cancelled (that is how
/// ``send(_:deadline:clock:)`` ends a request at its deadline), and a request with
/// ``HTTPRequest/pins`` is either checked against the server's TLS chain or not sent at all.
/// ``NIOTransport`` is the production implementation (and the only one that can check pins);
/// `URLSessionTransport` (module `VaultURLSession`) is the Foundation one; tests may supply their own.
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

    /// The same transport (bounds, proxy) trusting only the certificate authorities of the PEM
    /// bundle at `path`: for an account whose provider chains to a private CA. Throws when the
    /// transport cannot choose its trust roots (the default, and `URLSessionTransport`).
    func trusting(caFile path: String) throws(TrustRootsError) -> any HTTPTransport
}

extension HTTPTransport {
    public func trusting(caFile path: String) throws(TrustRootsError) -> any HTTPTransport {
        throw TrustRootsError("\(type(of: self)) cannot trust a CA file (\(path)); use NIOTransport")
    }
}
