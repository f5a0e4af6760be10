import Foundation
import Logging

// MARK: - Refresh (RFC 6749 §6)

extension OAuthClient {
    /// Exchanges a refresh token for new tokens (RFC 6749 §6).
    ///
    /// Sends `grant_type=refresh_token&refresh_token=…[&scope=…][&resource=…]…[&client_id=…]` as
    /// a form POST: each of `resources` as a `resource` parameter (RFC 8707 §2.2), for a token
    /// meant for those APIs only.
    /// If the result has no `TokenResponse.refreshToken` the server did not rotate it: keep
    /// using the one presented. Errors are classified by ``RefreshError``.
    ///
    /// With `pins`, the request is sent only over TLS whose validated chain holds one of them
    /// (else ``RefreshError/pinningFailed(host:reason:)``, nothing sent). The whole exchange,
    /// from connecting to the last byte of the answer, ends by `deadline` (default
    /// ``requestDeadline``) on ``clock``, or fails as `.transient(.timeout)`.
    ///
    /// ```swift
    /// let tokens = try await client.refresh(refreshToken: stored, endpoint: tokenURL, client: credentials)
    /// store(tokens.refreshToken ?? stored)
    /// ```
    public func refresh(
        refreshToken: String,
        scope: String? = nil,
        resources: [String] = [],
        endpoint: URL,
        client: ClientCredentials,
        pins: [SPKIPin] = [],
        deadline: Duration? = nil
    ) async throws(RefreshError) -> TokenResponse {
        var form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let scope { form.append(("scope", scope)) }
        form += resources.map { ("resource", $0) }
        return try await tokenRequest(
            grantType: "refresh_token", form: form, endpoint: endpoint, client: client, pins: pins, deadline: deadline, secrets: [refreshToken])
    }

    /// One request to the token endpoint for a grant that needs no user (a refresh, the client
    /// credentials grant): endpoint and pins checked before anything is sent, bounded by
    /// `deadline`, the answer classified by ``RefreshError`` with `secrets` (and the client's)
    /// scrubbed from any server text kept.
    func tokenRequest(
        grantType: String, form: [(String, String)], endpoint: URL, client: ClientCredentials, pins: [SPKIPin],
        deadline: Duration?, secrets: [String]
    ) async throws(RefreshError) -> TokenResponse {
        var logger = logger(for: endpoint, operation: "token")
        logger[metadataKey: "oauth.grant_type"] = "\(grantType)"
        logger[metadataKey: "oauth.client_id"] = "\(client.clientID)"

        guard endpoint.isAcceptableOAuthEndpoint else {
            logger.debug("token request refused", metadata: ["oauth.outcome": "insecure_endpoint"])
            throw .clientMisconfigured(
                code: "insecure_endpoint",
                description: EndpointRule.violation(endpoint).map { "the token endpoint is refused: \($0)" })
        }
        if let reason = EndpointRule.pinViolation(endpoint, pins: pins) {
            logger.debug("token request refused", metadata: ["oauth.outcome": "pinning_failed"])
            throw .pinningFailed(host: endpoint.hostForMessages, reason: reason)
        }
        guard !Task.isCancelled else {
            logger.debug("token request not sent", metadata: ["oauth.outcome": "cancelled"])
            throw .cancelled
        }

        logger.debug("sending token request", metadata: pins.isEmpty ? nil : ["oauth.pins": "\(pins.count)"])
        let response: HTTPResponse
        let sent: [String]
        do {
            (response, sent) = try await sendForm(to: endpoint, form: form, client: client, pins: pins, deadline: deadline)
        } catch {
            let failure = RefreshError(transportFailure: error)
            logger.debug("token request finished", metadata: ["oauth.outcome": "\(failure.outcomeName)"])
            throw failure
        }

        // A DPoP binding the server did not make is the caller's to judge (TokenResponse.dpopBindingProblem):
        // the same answer may carry a rotated refresh token that must not be lost.
        let result = Self.classifyRefresh(response, secrets: secrets + client.secrets + sent, now: now())
        switch result {
        case .success:
            logger.debug("token request finished", metadata: ["oauth.outcome": "success", "http.status": "\(response.status)"])
        case .failure(let failure):
            logger.debug("token request finished", metadata: ["oauth.outcome": "\(failure.outcomeName)", "http.status": "\(response.status)"])
        }
        return try result.get()
    }

    /// Classifies a token endpoint response. Every spelling of `secrets` is scrubbed from any
    /// server text kept (`Redaction`). `now` is when it arrived, for a `Retry-After` date.
    static func classifyRefresh(_ response: HTTPResponse, secrets: [String], now: Date) -> Result<TokenResponse, RefreshError> {
        let status = response.status
        switch status {
        case 200..<300:
            do {
                return .success(try TokenResponse.parse(response.body))
            } catch {
                return .failure(.malformedResponse(status: status, reason: error.description))
            }
        case 408:
            return .failure(.transient(.timeout))
        case 429:
            return .failure(.transient(.rateLimited(retryAfter: TransientFailure.retryAfter(in: response.headers, now: now))))
        case 503:
            return .failure(.transient(.server(status: status, retryAfter: TransientFailure.retryAfter(in: response.headers, now: now))))
        case 500..<600:
            return .failure(.transient(.server(status: status)))
        case 400..<500:
            guard let error = OAuthErrorResponse.parse(response.body, redaction: Redaction(secrets: secrets)) else {
                return .failure(.malformedResponse(status: status, reason: "error response without a JSON error code"))
            }
            let detail = error.errorDescription
            switch error.error {
            case "invalid_grant":
                return .failure(.invalidGrant(description: detail))
            case "invalid_client", "unauthorized_client", "unsupported_grant_type", "invalid_request", "invalid_scope", "invalid_target":
                return .failure(.clientMisconfigured(code: error.error, description: detail))
            case "server_error", "temporarily_unavailable":
                return .failure(.transient(.server(status: status)))
            default:
                return .failure(.unrecognizedError(status: status, code: error.error, description: detail))
            }
        default:
            return .failure(.malformedResponse(status: status, reason: "unexpected HTTP status"))
        }
    }
}

extension RefreshError {
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
        case .invalidGrant: "invalid_grant"
        case .clientMisconfigured(let code, _): "client_misconfigured.\(code)"
        case .transient(let failure): failure.outcomeName
        case .unrecognizedError: "unrecognized_error"
        case .malformedResponse: "malformed_response"
        case .cancelled: "cancelled"
        case .pinningFailed: "pinning_failed"
        }
    }
}
