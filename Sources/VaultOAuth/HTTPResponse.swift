import Foundation

/// An HTTP response returned by an ``HTTPTransport``.
///
/// Its `description` gives the status and body size, never the body, which may carry tokens.
///
/// ```swift
/// let response = try await transport.send(request)
/// if response.status == 429, let retryAfter = response.headers["Retry-After"] { … }
/// ```
public struct HTTPResponse: Sendable, Hashable {
    /// The HTTP status code.
    public var status: Int
    /// The response header fields; lookup ignores case.
    public var headers: HTTPHeaderFields
    /// The response body (empty for none).
    public var body: Data

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaderFields = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Whether the status is in the 2xx range.
    public var isSuccess: Bool { (200..<300).contains(status) }
}

extension HTTPResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// A summary without the body, e.g. `HTTP 200 body: 512 bytes`.
    public var description: String { "HTTP \(status) body: \(body.count) bytes" }

    /// Same as ``description``: a response body may carry tokens.
    public var debugDescription: String { description }

    /// A mirror without children, so `dump(response)` cannot print tokens.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
