import Foundation
import Logging

// MARK: - Revocation (RFC 7009)

extension OAuthClient {
    /// Asks the server to revoke a token (RFC 7009 §2.1).
    ///
    /// Returns normally on 200, which is also the answer for an unknown or already-invalid
    /// token. Revoking a refresh token usually revokes its whole grant.
    ///
    /// `pins` and `deadline` work as for ``refresh(refreshToken:scope:endpoint:client:pins:deadline:)``.
    ///
    /// ```swift
    /// try await client.revoke(token: refreshToken, hint: .refreshToken, endpoint: revokeURL, client: credentials)
    /// ```
    public func revoke(
        token: String,
        hint: TokenTypeHint,
        endpoint: URL,
        client: ClientCredentials,
        pins: [SPKIPin] = [],
        deadline: Duration? = nil
    ) async throws(RevocationError) {
        var logger = logger(for: endpoint, operation: "revoke")
        logger[metadataKey: "oauth.token_type_hint"] = "\(hint.rawValue)"
        logger[metadataKey: "oauth.client_id"] = "\(client.clientID)"

        guard endpoint.isAcceptableOAuthEndpoint else {
            logger.debug("token revocation refused", metadata: ["oauth.outcome": "insecure_endpoint"])
            throw .clientMisconfigured(
                code: "insecure_endpoint",
                description: EndpointRule.violation(endpoint).map { "the revocation endpoint is refused: \($0)" })
        }
        if let reason = EndpointRule.pinViolation(endpoint, pins: pins) {
            logger.debug("token revocation refused", metadata: ["oauth.outcome": "pinning_failed"])
            throw .pinningFailed(host: endpoint.hostForMessages, reason: reason)
        }
        guard !Task.isCancelled else {
            logger.debug("token revocation not sent", metadata: ["oauth.outcome": "cancelled"])
            throw .cancelled
        }

        logger.debug("sending token revocation", metadata: pins.isEmpty ? nil : ["oauth.pins": "\(pins.count)"])
        let response: HTTPResponse
        let sent: [String]
        do {
            (response, sent) = try await sendForm(
                to: endpoint, form: [("token", token), ("token_type_hint", hint.rawValue)], client: client, pins: pins, deadline: deadline)
        } catch {
            let failure = RevocationError(transportFailure: error)
            logger.debug("token revocation finished", metadata: ["oauth.outcome": "\(failure.outcomeName)"])
            throw failure
        }

        if let failure = Self.classifyRevocation(response, secrets: [token] + client.secrets + sent, now: now()) {
            logger.debug("token revocation finished", metadata: ["oauth.outcome": "\(failure.outcomeName)", "http.status": "\(response.status)"])
            throw failure
        }
        logger.debug("token revocation finished", metadata: ["oauth.outcome": "success", "http.status": "\(response.status)"])
    }

    /// Classifies a revocation response: nil means revoked (or never valid). Every spelling of
    /// `secrets` is scrubbed from any server text kept (`Redaction`). `now` is when it
    /// arrived, for a `Retry-After` date.
    static func classifyRevocation(_ response: HTTPResponse, secrets: [String], now: Date) -> RevocationError? {
        let status = response.status
        switch status {
        case 200..<300:
            return nil
        case 408:
            return .transient(.timeout)
        case 429:
            return .transient(.rateLimited(retryAfter: TransientFailure.retryAfter(in: response.headers, now: now)))
        case 503:
            return .transient(.server(status: status, retryAfter: TransientFailure.retryAfter(in: response.headers, now: now)))
        case 500..<600:
            return .transient(.server(status: status))
        case 400..<500:
            guard let error = OAuthErrorResponse.parse(response.body, redaction: Redaction(secrets: secrets)) else {
                return .malformedResponse(status: status, reason: "error response without a JSON error code")
            }
            switch error.error {
            case "unsupported_token_type":
                return .unsupportedTokenType
            case "server_error", "temporarily_unavailable":
                return .transient(.server(status: status))
            default:
                return .clientMisconfigured(code: error.error, description: error.errorDescription)
            }
        default:
            return .malformedResponse(status: status, reason: "unexpected HTTP status")
        }
    }
}

extension RevocationError {
    /// Classifies an error thrown by a transport.
    init(transportFailure error: any Error) {
        if case .pinningFailed(let host, let reason)? = error as? TransportError {
            self = .pinningFailed(host: host, reason: reason)
        } else {
            self = TransientFailure(transportFailure: error).map { .transient($0) } ?? .cancelled
        }
    }

    /// A short, secret-free name for log metadata.
    var outcomeName: String {
        switch self {
        case .unsupportedTokenType: "unsupported_token_type"
        case .clientMisconfigured(let code, _): "client_misconfigured.\(code)"
        case .transient(let failure): failure.outcomeName
        case .malformedResponse: "malformed_response"
        case .cancelled: "cancelled"
        case .pinningFailed: "pinning_failed"
        }
    }
}
