import Foundation
import Logging

// MARK: - Introspection (RFC 7662)

/// What the authorization server says of a token (RFC 7662 §2.2): whether it is active and,
/// for an active one, when it expires when the server says so.
public struct TokenIntrospection: Sendable, Hashable {
    /// `active`: the token is current, was issued by this server and may be used.
    public var active: Bool
    /// `exp`, when sent: the token's expiry (for a refresh token, the grant's renewal deadline).
    public var expiresAt: Date?

    public init(active: Bool, expiresAt: Date? = nil) {
        self.active = active
        self.expiresAt = expiresAt
    }
}

/// Why an introspection request (RFC 7662) gave no answer.
public enum IntrospectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server does not let this client introspect (401/403, `invalid_client`,
    /// `unauthorized_client`, …): ask another way (a refresh). `code` is the server's error
    /// code when it sent one.
    case notPermitted(status: Int, code: String?)
    /// The endpoint is refused before anything is sent (plain HTTP off loopback).
    case insecureEndpoint(reason: String)
    /// 5xx, 429, 408 or a network failure: nothing is known; ask again later.
    case transient(TransientFailure)
    /// An answer RFC 7662 does not describe (no boolean `active`, not JSON).
    case malformedResponse(status: Int, reason: String)
    /// The calling task was cancelled.
    case cancelled
    /// The request carried SPKI pins and the server's TLS chain holds none of them; nothing was sent.
    case pinningFailed(host: String, reason: String)

    public var description: String {
        switch self {
        case .notPermitted(let status, let code):
            "the authorization server does not let this client introspect tokens (HTTP \(status)\(code.map { ", \($0)" } ?? ""))"
        case .insecureEndpoint(let reason): "the introspection endpoint is refused: \(reason)"
        case .transient(let failure): "token introspection failed temporarily: \(failure)"
        case .malformedResponse(let status, let reason): "the authorization server sent an invalid introspection response (HTTP \(status)): \(reason)"
        case .cancelled: "token introspection was cancelled"
        case .pinningFailed(let host, let reason): "the introspection endpoint \(host) did not present a pinned TLS key (\(reason)); nothing was sent"
        }
    }
}

extension OAuthClient {
    /// Asks the authorization server whether `token` is active (RFC 7662 §2.1), with this
    /// client's authentication as at the token endpoint. A token the server does not know, or
    /// one of another client, is `active: false` (§2.2). Nothing the server sends is kept but
    /// `active` and `exp`.
    ///
    /// `pins` and `deadline` work as for ``refresh(refreshToken:scope:endpoint:client:pins:deadline:)``.
    ///
    /// ```swift
    /// let answer = try await client.introspect(token: refreshToken, hint: .refreshToken, endpoint: url, client: credentials)
    /// if !answer.active { /* the grant is gone: confirm with a refresh */ }
    /// ```
    public func introspect(
        token: String,
        hint: TokenTypeHint,
        endpoint: URL,
        client: ClientCredentials,
        pins: [SPKIPin] = [],
        deadline: Duration? = nil
    ) async throws(IntrospectionError) -> TokenIntrospection {
        var logger = logger(for: endpoint, operation: "introspect")
        logger[metadataKey: "oauth.token_type_hint"] = "\(hint.rawValue)"
        logger[metadataKey: "oauth.client_id"] = "\(client.clientID)"
        if let reason = EndpointRule.violation(endpoint) {
            logger.debug("token introspection refused", metadata: ["oauth.outcome": "insecure_endpoint"])
            throw .insecureEndpoint(reason: reason)
        }
        if let reason = EndpointRule.pinViolation(endpoint, pins: pins) {
            throw .pinningFailed(host: endpoint.hostForMessages, reason: reason)
        }
        guard !Task.isCancelled else { throw .cancelled }
        let response: HTTPResponse
        let sent: [String]
        do {
            (response, sent) = try await sendForm(
                to: endpoint, form: [("token", token), ("token_type_hint", hint.rawValue)], client: client, pins: pins, deadline: deadline)
        } catch {
            if case .pinningFailed(let host, let reason)? = error as? TransportError { throw .pinningFailed(host: host, reason: reason) }
            throw TransientFailure(transportFailure: error).map { .transient($0) } ?? .cancelled
        }
        let outcome = Self.classifyIntrospection(response, secrets: [token] + client.secrets + sent, now: now())
        switch outcome {
        case .success(let answer):
            logger.debug("token introspection finished", metadata: ["oauth.outcome": "\(answer.active ? "active" : "inactive")"])
            return answer
        case .failure(let failure):
            logger.debug("token introspection finished", metadata: ["oauth.outcome": "failed", "http.status": "\(response.status)"])
            throw failure
        }
    }

    /// Reads an introspection response: 200 with a JSON object whose `active` is a boolean.
    /// Every spelling of `secrets` is scrubbed from an error code kept (`Redaction`), as for a
    /// refresh or a revocation: a server may echo what it was sent.
    static func classifyIntrospection(_ response: HTTPResponse, secrets: [String], now: Date) -> Result<TokenIntrospection, IntrospectionError> {
        let redaction = Redaction(secrets: secrets)
        let status = response.status
        switch status {
        case 200:
            guard response.body.count <= TokenResponse.maximumBodySize, let fields = JSONFields.parse(response.body) else {
                return .failure(.malformedResponse(status: status, reason: "the body is not a JSON object"))
            }
            guard case .bool(let active) = fields["active"] else {
                return .failure(.malformedResponse(status: status, reason: "active is missing or not a boolean"))
            }
            let expiry: Date? =
                switch fields["exp"] {
                case .integer(let seconds): Date(timeIntervalSince1970: TimeInterval(seconds))
                case .number(let seconds): Date(timeIntervalSince1970: seconds)
                default: nil
                }
            return .success(TokenIntrospection(active: active, expiresAt: active ? expiry : nil))
        case 401, 403:
            return .failure(.notPermitted(status: status, code: OAuthErrorResponse.parse(response.body, redaction: redaction)?.error))
        case 408:
            return .failure(.transient(.timeout))
        case 429:
            return .failure(.transient(.rateLimited(retryAfter: TransientFailure.retryAfter(in: response.headers, now: now))))
        case 500..<600:
            return .failure(.transient(.server(status: status, retryAfter: TransientFailure.retryAfter(in: response.headers, now: now))))
        case 400..<500:
            // invalid_client, unauthorized_client, invalid_request: this client cannot ask here.
            return .failure(.notPermitted(status: status, code: OAuthErrorResponse.parse(response.body, redaction: redaction)?.error))
        default:
            return .failure(.malformedResponse(status: status, reason: "unexpected HTTP status"))
        }
    }
}
