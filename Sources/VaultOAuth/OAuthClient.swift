import Foundation
import Logging

/// The client side of an OAuth 2.0 authorization server's token and revocation endpoints.
///
/// Stateless and `Sendable`: it sends one request per call and classifies the answer. It logs
/// at debug level the endpoint's host and path, the grant type and the outcome — never a
/// token, a secret, or a request or response body.
///
/// ```swift
/// let client = OAuthClient(transport: URLSessionTransport(timeout: .seconds(15)), logger: logger)
/// let tokens = try await client.refresh(
///     refreshToken: stored,
///     endpoint: URL(string: "https://id.example.com/oauth/token")!,
///     client: ClientCredentials(clientID: "vault-cli")
/// )
/// ```
public struct OAuthClient: Sendable {
    /// How requests reach the server.
    public var transport: any HTTPTransport
    /// Where debug lines about requests and outcomes go.
    public var logger: Logger

    /// Creates a client that sends requests through `transport` and logs to `logger`.
    public init(transport: any HTTPTransport = URLSessionTransport(), logger: Logger) {
        self.transport = transport
        self.logger = logger
    }

    /// Builds a form POST with JSON accepted, client authentication applied.
    func formRequest(to endpoint: URL, form: [(String, String)], client: ClientCredentials) -> HTTPRequest {
        var form = form
        var headers: HTTPHeaderFields = [
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        ]
        client.apply(to: &headers, form: &form)
        return HTTPRequest(method: .post, url: endpoint, headers: headers, body: Data(FormURLEncoding.encode(form).utf8))
    }

    /// A logger carrying the endpoint's host and path, and the operation, as metadata.
    func logger(for endpoint: URL, operation: String) -> Logger {
        var logger = self.logger
        logger[metadataKey: "oauth.endpoint"] = "\(endpoint.hostAndPath)"
        logger[metadataKey: "oauth.operation"] = "\(operation)"
        return logger
    }
}

extension URL {
    /// Credentials may only travel over TLS, or over plain HTTP to this machine (``EndpointRule``).
    var isAcceptableOAuthEndpoint: Bool { EndpointRule.violation(self) == nil }
}
