import FlyingFox
import Foundation
import Logging

// MARK: - Token and revocation endpoints

extension DevGateway {
    nonisolated static var tokenRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /oauth/token") { gateway, request in
                await gateway.handleTokenRequest(request, body: body(of: request))
            },
            GatewayRoute(route: "POST /oauth/revoke") { gateway, request in
                await gateway.handleRevocationRequest(request, body: body(of: request))
            },
        ]
    }

    /// `POST /oauth/token`: counts the request, applies faults and latency, then runs the grant.
    func handleTokenRequest(_ request: HTTPRequest, body: Data) async -> HTTPResponse {
        let form = Self.isForm(request) ? FormBody.parse(body) : .failure(.invalidRequest("the body must be application/x-www-form-urlencoded"))
        state.stats.tokenRequests += 1
        if case .success(let parameters) = form {
            if let presented = parameters["refresh_token"] { state.stats.presentedRefreshTokens.append(presented) }
            if !parameters.values("resource").isEmpty { state.stats.resourceTokenRequests += 1 }
        }
        let fault = state.faults.takeTokenFailure()
        let latency = state.faults.tokenLatency
        statsDidChange()

        if latency > .zero {
            do {
                try await Task.sleep(for: latency)
            } catch {
                return .empty(status: 503)  // the gateway is stopping
            }
        }
        if state.faults.holdsTokenResponses, await !heldUntilReleased() {
            return .empty(status: 503)  // the gateway is stopping
        }

        let response: HTTPResponse
        if let fault {
            logger.debug("token request", metadata: ["gateway.outcome": "injected_fault", "http.status": "\(fault.status)"])
            response = .fault(fault, echoing: (body, request.headers[.authorization]))
        } else {
            response = await exchange(request, form: form)
        }
        state.stats.tokenResponses += 1
        statsDidChange()
        return response
    }

    /// The grant itself: client authentication, then the grant type's rules. A `resource`
    /// (RFC 8707) is checked before a refresh token or code is spent, so `invalid_target`
    /// changes nothing.
    private func exchange(_ request: HTTPRequest, form: Result<FormBody, OAuthRejection>) async -> HTTPResponse {
        var metadata: Logger.Metadata = ["gateway.endpoint": "/oauth/token"]
        // The nonce of the authorization request, for the ID token of a code exchange only.
        var nonce: String?
        // The client credentials grant has no user, so no ID token (OpenID Connect Core §3.1.3.3).
        var attachesIDToken = true
        let outcome: Result<IssuedTokens, OAuthRejection>
        switch await authenticatedGrantRequest(request, form: form, metadata: &metadata) {
        case .failure(let rejection):
            outcome = .failure(rejection)
        case .success(let (parameters, grantType, clientID)):
            outcome = {
                switch grantType {
                case "refresh_token", "authorization_code":
                    let audiences: [String]
                    switch requestedAudiences(parameters) {
                    case .success(let value): audiences = value
                    case .failure(let rejection): return .failure(rejection)
                    }
                    if !audiences.isEmpty { metadata["gateway.audiences"] = "\(audiences)" }
                    return grantType == "refresh_token"
                        ? refresh(parameters, clientID: clientID, audiences: audiences, metadata: &metadata)
                        : redeemCode(parameters, clientID: clientID, audiences: audiences, nonce: &nonce, metadata: &metadata)
                case DeviceGrantLedger.grantType:
                    return pollDeviceCode(parameters, clientID: clientID)
                case Self.clientCredentialsGrantType:
                    attachesIDToken = false
                    return grantClientCredentials(parameters, clientID: clientID, metadata: &metadata)
                default:
                    return .failure(
                        .unsupportedGrantType(
                            "supported grant types: refresh_token, authorization_code, \(DeviceGrantLedger.grantType), "
                                + Self.clientCredentialsGrantType))
                }
            }()
        }

        switch outcome {
        case .success(let tokens):
            metadata["gateway.outcome"] = "issued"
            metadata["gateway.grant_id"] = "\(tokens.grantID)"
            metadata["gateway.rotated"] = "\(tokens.refreshToken != nil)"
            logger.debug("token request", metadata: metadata)
            let formatted = await formattingAccessToken(of: tokens)
            let answered = attachesIDToken ? await attachingIDToken(to: formatted, nonce: nonce) : formatted.with(idToken: nil)
            return .json(GatewayJSON.Tokens(answered, includeGrantID: false))
        case .failure(let rejection):
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("token request", metadata: metadata)
            return .oauthError(rejection)
        }
    }

    /// The form's parameters, its `grant_type` and the client it authenticates (any method:
    /// ``authenticateEndpointClient(_:_:endpoint:)``).
    private func authenticatedGrantRequest(
        _ request: HTTPRequest, form: Result<FormBody, OAuthRejection>, metadata: inout Logger.Metadata
    ) async -> Result<(FormBody, String, String), OAuthRejection> {
        let parameters: FormBody
        switch form {
        case .success(let value): parameters = value
        case .failure(let rejection): return .failure(rejection)
        }
        guard let grantType = parameters["grant_type"] else {
            return .failure(.invalidRequest("grant_type is required"))
        }
        metadata["gateway.grant_type"] = "\(grantType)"
        switch await authenticateEndpointClient(request, parameters, endpoint: tokenEndpoint) {
        case .success(let clientID):
            metadata["gateway.client_id"] = "\(clientID)"
            return .success((parameters, grantType, clientID))
        case .failure(let rejection):
            return .failure(rejection)
        }
    }

    /// `grant_type=refresh_token` (RFC 6749 §6): rotation, or reuse detection. The access token
    /// is for `audiences` (none: any resource).
    private func refresh(
        _ parameters: FormBody, clientID: String, audiences: [String], metadata: inout Logger.Metadata
    ) -> Result<IssuedTokens, OAuthRejection> {
        guard let refreshToken = parameters["refresh_token"], !refreshToken.isEmpty else {
            return .failure(.invalidRequest("refresh_token is required"))
        }
        switch state.tokens.refresh(
            refreshToken: refreshToken, clientID: clientID, requestedScope: parameters["scope"], audiences: audiences)
        {
        case .issued(let tokens):
            return .success(tokens)
        case .rejected(let rejection, let reuseDetected):
            if reuseDetected {
                state.stats.reuseDetections += 1
                metadata["gateway.reuse_detected"] = "true"
            }
            return .failure(rejection)
        }
    }

    /// `grant_type=authorization_code` (RFC 6749 §4.1.3, RFC 7636 §4.5): a code presented
    /// again revokes the grant it opened. The first access token is for `audiences`.
    private func redeemCode(
        _ parameters: FormBody, clientID: String, audiences: [String], nonce: inout String?,
        metadata: inout Logger.Metadata
    ) -> Result<IssuedTokens, OAuthRejection> {
        guard let code = parameters["code"], !code.isEmpty else {
            return .failure(.invalidRequest("code is required"))
        }
        switch state.authorization.redeem(
            code: code, clientID: clientID, redirectURI: parameters["redirect_uri"],
            codeVerifier: parameters["code_verifier"], now: signInNow())
        {
        case .redeemed(let record):
            let tokens = state.tokens.openGrant(
                subject: record.subject, clientID: clientID, scope: record.scope,
                authTime: record.authTime, audiences: audiences)
            state.authorization.recordGrant(tokens.grantID, forCode: code)
            nonce = record.nonce
            return .success(tokens)
        case .rejected(let rejection, let grantID):
            if let grantID {
                state.tokens.revokeGrant(grantID)
                metadata["gateway.code_reuse_revoked"] = "\(grantID)"
            }
            return .failure(rejection)
        }
    }

    /// `POST /oauth/revoke` (RFC 7009): revokes the token's grant; unknown tokens are fine.
    func handleRevocationRequest(_ request: HTTPRequest, body: Data) async -> HTTPResponse {
        state.stats.revocationRequests += 1
        statsDidChange()
        var metadata: Logger.Metadata = ["gateway.endpoint": "/oauth/revoke"]
        if let fault = state.faults.takeRevocationFailure() {
            metadata["gateway.outcome"] = "injected_fault"
            logger.debug("revocation request", metadata: metadata)
            return .fault(fault, echoing: (body, request.headers[.authorization]))
        }

        let authenticated = await authenticatedEndpointForm(request, body: body, endpoint: revocationEndpoint)
        let outcome: Result<Void, OAuthRejection> = {
            let parameters: FormBody
            let clientID: String
            switch authenticated {
            case .success(let form): (parameters, clientID) = form
            case .failure(let rejection): return .failure(rejection)
            }
            metadata["gateway.client_id"] = "\(clientID)"
            guard let token = parameters["token"], !token.isEmpty else {
                return .failure(.invalidRequest("token is required"))
            }
            if let hint = parameters["token_type_hint"], hint != "refresh_token", hint != "access_token" {
                return .failure(OAuthRejection(status: 400, error: "unsupported_token_type", description: "tokens of type \(hint) are not revocable here"))
            }
            switch state.tokens.revoke(token: token, clientID: clientID) {
            case .revoked, .unknownToken:
                return .success(())
            case .otherClient:
                return .failure(.unauthorizedClient("the token was issued to another client"))
            }
        }()

        switch outcome {
        case .success:
            metadata["gateway.outcome"] = "revoked"
            logger.debug("revocation request", metadata: metadata)
            return .empty(status: 200)
        case .failure(let rejection):
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("revocation request", metadata: metadata)
            return .oauthError(rejection)
        }
    }

    // MARK: - Client authentication (RFC 6749 §2.3)

    /// A form body and the client it authenticates: the first step of the form endpoints but
    /// the token and revocation endpoints (see ``authenticatedEndpointForm(_:body:endpoint:)``).
    func authenticatedForm(_ request: HTTPRequest, body: Data) -> Result<(FormBody, String), OAuthRejection> {
        guard Self.isForm(request) else {
            return .failure(.invalidRequest("the body must be application/x-www-form-urlencoded"))
        }
        switch FormBody.parse(body) {
        case .success(let parameters):
            return authenticateClient(request, parameters).map { (parameters, $0) }
        case .failure(let rejection):
            return .failure(rejection)
        }
    }

    /// The authenticated client id: HTTP Basic for confidential clients, `client_id` for public
    /// ones. The token and revocation endpoints accept more methods (``authenticateEndpointClient(_:_:endpoint:)``).
    func authenticateClient(_ request: HTTPRequest, _ parameters: FormBody) -> Result<String, OAuthRejection> {
        if let authorization = request.headers[.authorization] {
            guard let credentials = BasicCredentials(authorization: authorization) else {
                return .failure(.invalidClient("malformed HTTP Basic credentials"))
            }
            guard parameters["client_secret"] == nil else {
                return .failure(.invalidClient("use one client authentication method"))
            }
            if let bodyID = parameters["client_id"], bodyID != credentials.clientID {
                return .failure(.invalidClient("client_id does not match the authenticated client"))
            }
            guard state.tokens.authenticate(clientID: credentials.clientID, secret: credentials.secret) else {
                return .failure(.invalidClient("client authentication failed"))
            }
            return .success(credentials.clientID)
        }
        guard parameters["client_secret"] == nil else {
            return .failure(.invalidClient("client_secret in the body is not supported; use HTTP Basic"))
        }
        guard let clientID = parameters["client_id"] else {
            return .failure(.invalidClient("client authentication required"))
        }
        guard state.tokens.authenticate(clientID: clientID, secret: nil) else {
            return .failure(.invalidClient("unknown client, or the client must authenticate with HTTP Basic"))
        }
        return .success(clientID)
    }
}
