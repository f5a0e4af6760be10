import Foundation

/// An HTTP request handed to an ``HTTPTransport``.
///
/// Its `description` names the method, the URL without its query, the header names and
/// the body size — never header values or the body, which carry credentials.
///
/// ```swift
/// let request = HTTPRequest(
///     method: .post,
///     url: URL(string: "https://id.example.com/oauth/token")!,
///     headers: ["Content-Type": "application/x-www-form-urlencoded"],
///     body: Data("grant_type=refresh_token&refresh_token=…".utf8)
/// )
/// ```
public struct HTTPRequest: Sendable, Hashable {
    /// An HTTP request method.
    public struct Method: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The method token, e.g. `POST`.
        public var rawValue: String
        /// Creates a method from its token.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The method token.
        public var description: String { rawValue }

        /// `GET`.
        public static let get = Method(rawValue: "GET")
        /// `POST`.
        public static let post = Method(rawValue: "POST")
    }

    /// The request method.
    public var method: Method
    /// The absolute URL to send the request to.
    public var url: URL
    /// The request header fields.
    public var headers: HTTPHeaderFields
    /// The request body (empty for none).
    public var body: Data
    /// How long to wait without progress before giving up; `nil` uses the transport's default.
    /// (``NIOTransport`` counts it from the start of the request to the end of the answer.)
    public var timeout: Duration?
    /// SPKI pins of the server's TLS key. Non-empty: the request is sent only over TLS whose
    /// validated chain holds one of them, by a transport that can see the chain; anything else
    /// throws ``TransportError/pinningFailed(host:reason:)`` having sent nothing.
    public var pins: [SPKIPin]

    /// Creates a request.
    public init(
        method: Method,
        url: URL,
        headers: HTTPHeaderFields = [:],
        body: Data = Data(),
        timeout: Duration? = nil,
        pins: [SPKIPin] = []
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.pins = pins
    }
}

extension HTTPRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// A summary without header values or body, e.g. `POST https://host/oauth/token [Authorization, Content-Type] body: 93 bytes`.
    public var description: String {
        "\(method) \(url.redactedForLogging) [\(headers.names.joined(separator: ", "))] body: \(body.count) bytes"
            + (pins.isEmpty ? "" : " pinned to \(pins.count) key(s)")
    }

    /// Same as ``description``: a request always carries credentials.
    public var debugDescription: String { description }

    /// A mirror without children, so `dump(request)` cannot print credentials.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

extension URL {
    /// Scheme, host, port and path: never user info, query or fragment.
    var redactedForLogging: String {
        guard let components = URLComponents(url: self, resolvingAgainstBaseURL: false) else {
            return "<unparseable URL>"
        }
        var result = ""
        if let scheme = components.scheme { result += "\(scheme)://" }
        result += components.host ?? ""
        if let port = components.port { result += ":\(port)" }
        result += components.path
        return result
    }

    /// Host and path, for log metadata.
    var hostAndPath: String {
        let components = URLComponents(url: self, resolvingAgainstBaseURL: false)
        var result = components?.host ?? ""
        if let port = components?.port { result += ":\(port)" }
        return result + (components?.path ?? "")
    }
}
