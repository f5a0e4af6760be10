import Foundation
import Logging

/// The client side of an OAuth 2.0 authorization server's token and revocation endpoints.
///
/// Stateless and `Sendable`: it sends one request per call and classifies the answer. It logs
/// at debug level the endpoint's host and path, the grant type and the outcome — never a
/// token, a secret, or a request or response body.
///
/// ```swift
/// let client = OAuthClient(transport: NIOTransport(timeout: .seconds(15)), logger: logger)
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
    /// The longest a request may take in all, from connecting to the last byte of the answer,
    /// when the call does not give its own. A server that trickles its answer byte by byte never
    /// trips an idle timeout; this it cannot outlast.
    public var requestDeadline: Duration
    /// The nonces servers gave for DPoP proofs; shared by every copy of this client.
    public let dpopNonces = DPoPNonces()
    /// What ``requestDeadline`` is measured on; tests pass a test clock.
    public var clock: any Clock<Duration>
    /// The wall-clock time now: a `Retry-After` HTTP date in a response without a `Date`
    /// header is measured against it. Tests pass the wall clock their vault uses.
    public var now: @Sendable () -> Date

    /// Creates a client that sends requests through `transport` and logs to `logger`, each
    /// request bounded by `requestDeadline` on `clock`.
    public init(
        transport: any HTTPTransport = NIOTransport(), logger: Logger,
        requestDeadline: Duration = .seconds(30), clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.transport = transport
        self.logger = logger
        self.requestDeadline = requestDeadline
        self.clock = clock
        self.now = now
    }

    /// Sends a form POST to `endpoint` (``formRequest(to:form:client:pins:)``), and when the
    /// client proves possession of a DPoP key and the server answers that it wants a nonce it
    /// has just handed out (RFC 9449 §8), sends it once more with a new proof carrying it. Every
    /// `DPoP-Nonce` the server sends is remembered for its next proof.
    func sendForm(
        to endpoint: URL, form: [(String, String)], client: ClientCredentials, pins: [SPKIPin], deadline: Duration?
    ) async throws -> (response: HTTPResponse, secrets: [String]) {
        var retried = false
        while true {
            let (request, sent) = await formRequest(to: endpoint, form: form, client: client, pins: pins)
            let response = try await transport.send(request, deadline: deadline ?? requestDeadline, clock: clock)
            let fresh = client.dpopKey != nil && dpopNonces.remember(response, from: endpoint)
            if fresh, !retried, response.asksForDPoPNonce {
                retried = true
                continue
            }
            return (response, sent)
        }
    }

    /// Builds a form POST with JSON accepted, client authentication applied, and what that
    /// authentication added that must be scrubbed from any answer (a client assertion).
    func formRequest(
        to endpoint: URL, form: [(String, String)], client: ClientCredentials, pins: [SPKIPin] = []
    ) async -> (request: HTTPRequest, secrets: [String]) {
        var form = form
        var headers: HTTPHeaderFields = [
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        ]
        let added = await client.apply(to: &headers, form: &form, endpoint: endpoint, now: now())
        // A proof that cannot be made (no such case for a stored key and a checked endpoint)
        // leaves the request without one: the server then answers with a bearer token, which
        // the caller's binding check (`TokenResponse.dpopBindingProblem`, made by the session
        // layer for every grant) refuses, so nothing unbound is kept.
        if let key = client.dpopKey,
            let proof = try? key.proof(method: "POST", url: endpoint, nonce: dpopNonces.nonce(for: endpoint), now: now())
        {
            headers["DPoP"] = proof
        }
        let request = HTTPRequest(method: .post, url: endpoint, headers: headers, body: Data(FormURLEncoding.encode(form).utf8), pins: pins)
        return (request, added)
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

extension URL {
    /// The host (and port, when given) for an error message: never user information, path or query.
    public var hostForMessages: String {
        let components = URLComponents(url: self, resolvingAgainstBaseURL: false)
        var host = components?.host ?? "<no host>"
        if let port = components?.port { host += ":\(port)" }
        return host
    }
}
