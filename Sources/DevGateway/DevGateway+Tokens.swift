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

    /// The grant itself: client authentication, the DPoP proof (RFC 9449 §5: its key binds the
    /// tokens), then the grant type's rules. A `resource` (RFC 8707) is checked before a
    /// refresh token or code is spent, so `invalid_target` changes nothing; so is the proof.
    private func exchange(_ request: HTTPRequest, form: Result<FormBody, OAuthRejection>) async -> HTTPResponse {
        var metadata: Logger.Metadata = ["gateway.endpoint": "/oauth/token"]
        // The nonce of the authorization request, for the ID token of a code exchange only.
        var nonce: String?
        // The client credentials grant has no user, so no ID token (OpenID Connect Core §3.1.3.3).
        var attachesIDToken = true
        let outcome: Result<IssuedTokens, OAuthRejection>
        switch await boundGrantRequest(request, form: form, metadata: &metadata) {
        case .failure(let rejection):
            outcome = .failure(rejection)
        case .success(let (parameters, grantType, clientID, dpopThumbprint)):
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
                        ? refresh(parameters, clientID: clientID, audiences: audiences, dpopThumbprint: dpopThumbprint, metadata: &metadata)
                        : redeemCode(
                            parameters, clientID: clientID, audiences: audiences, dpopThumbprint: dpopThumbprint, nonce: &nonce,
                            metadata: &metadata)
                case DeviceGrantLedger.grantType:
                    return pollDeviceCode(parameters, clientID: clientID, dpopThumbprint: dpopThumbprint)
                case Self.clientCredentialsGrantType:
                    attachesIDToken = false
                    return grantClientCredentials(parameters, clientID: clientID, dpopThumbprint: dpopThumbprint, metadata: &metadata)
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
            metadata["gateway.token_type"] = "\(tokens.tokenType)"
            logger.debug("token request", metadata: metadata)
            if tokens.tokenType == "DPoP" {
                state.stats.dpopBoundTokens += 1
                statsDidChange()
            }
            let formatted = await formattingAccessToken(of: tokens)
            let answered = attachesIDToken ? await attachingIDToken(to: formatted, nonce: nonce) : formatted.with(idToken: nil)
            var body = GatewayJSON.Tokens(answered, includeGrantID: false)
            if answered.refreshToken != nil, let grant = state.tokens.grants[answered.grantID],
                let expiry = state.tokens.refreshTokenExpiry(of: grant)
            {
                body.refreshExpiresIn = max(1, Int(expiry.timeIntervalSince(state.signIn.now()).rounded(.down)))
            }
            return withDPoPNonce(.json(body))
        case .failure(let rejection):
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("token request", metadata: metadata)
            return withDPoPNonce(.oauthError(rejection), challenged: rejection.error == "use_dpop_nonce")
        }
    }

    /// ``authenticatedGrantRequest(_:form:metadata:)``, then the DPoP key the tokens are bound
    /// to (``tokenRequestBinding(_:clientID:)``).
    private func boundGrantRequest(
        _ request: HTTPRequest, form: Result<FormBody, OAuthRejection>, metadata: inout Logger.Metadata
    ) async -> Result<(FormBody, String, String, String?), OAuthRejection> {
        let parameters: FormBody
        let grantType: String
        let clientID: String
        switch await authenticatedGrantRequest(request, form: form, metadata: &metadata) {
        case .success(let value): (parameters, grantType, clientID) = value
        case .failure(let rejection): return .failure(rejection)
        }
        // A provider without DPoP: the proof is not read, the tokens are bearer tokens.
        if state.dpop.ignored { return .success((parameters, grantType, clientID, nil)) }
        switch await tokenRequestBinding(request, clientID: clientID) {
        case .success(let thumbprint):
            if let thumbprint { metadata["gateway.dpop_jkt"] = "\(thumbprint)" }
            return .success((parameters, grantType, clientID, thumbprint))
        case .failure(let rejection):
            return .failure(rejection)
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
    /// is for `audiences` (none: any resource); a grant bound to a DPoP key refreshes only with
    /// a proof by that key (``TokenLedger/refresh(refreshToken:clientID:requestedScope:audiences:dpopThumbprint:)``).
    private func refresh(
        _ parameters: FormBody, clientID: String, audiences: [String], dpopThumbprint: String?, metadata: inout Logger.Metadata
    ) -> Result<IssuedTokens, OAuthRejection> {
        guard let refreshToken = parameters["refresh_token"], !refreshToken.isEmpty else {
            return .failure(.invalidRequest("refresh_token is required"))
        }
        switch state.tokens.refresh(
            refreshToken: refreshToken, clientID: clientID, requestedScope: parameters["scope"], audiences: audiences,
            dpopThumbprint: dpopThumbprint)
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
    /// again revokes the grant it opened. The first access token is for `audiences`; the grant
    /// is bound to `dpopThumbprint`, which must be the authorization request's `dpop_jkt` if it
    /// had one (RFC 9449 §10).
    private func redeemCode(
        _ parameters: FormBody, clientID: String, audiences: [String], dpopThumbprint: String?, nonce: inout String?,
        metadata: inout Logger.Metadata
    ) -> Result<IssuedTokens, OAuthRejection> {
        guard let code = parameters["code"], !code.isEmpty else {
            return .failure(.invalidRequest("code is required"))
        }
        switch state.authorization.redeem(
            code: code, clientID: clientID, redirectURI: parameters["redirect_uri"],
            codeVerifier: parameters["code_verifier"], dpopThumbprint: dpopThumbprint, now: signInNow())
        {
        case .redeemed(let record):
            let tokens = state.tokens.openGrant(
                subject: record.subject, clientID: clientID, scope: record.scope,
                authTime: record.authTime, audiences: audiences, dpopThumbprint: dpopThumbprint)
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

    /// `POST /oauth/revoke` (RFC 7009): revokes the token's grant; unknown tokens are fine. A
    /// DPoP proof is optional; one that is sent must be valid (for a DPoP-bound access token,
    /// with its `ath`), else 400 `invalid_dpop_proof` (or `use_dpop_nonce`) and nothing is revoked.
    func handleRevocationRequest(_ request: HTTPRequest, body: Data) async -> HTTPResponse {
        state.stats.revocationRequests += 1
        statsDidChange()
        var metadata: Logger.Metadata = ["gateway.endpoint": "/oauth/revoke"]
        if let fault = state.faults.takeRevocationFailure() {
            metadata["gateway.outcome"] = "injected_fault"
            logger.debug("revocation request", metadata: metadata)
            return .fault(fault, echoing: (body, request.headers[.authorization]))
        }

        switch await revoke(request, body: body, metadata: &metadata) {
        case .success:
            metadata["gateway.outcome"] = "revoked"
            logger.debug("revocation request", metadata: metadata)
            return withDPoPNonce(.empty(status: 200))
        case .failure(let rejection):
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("revocation request", metadata: metadata)
            return withDPoPNonce(.oauthError(rejection), challenged: rejection.error == "use_dpop_nonce")
        }
    }

    /// The revocation itself: client authentication, the form, the optional DPoP proof, then
    /// the ledger.
    private func revoke(_ request: HTTPRequest, body: Data, metadata: inout Logger.Metadata) async -> Result<Void, OAuthRejection> {
        let parameters: FormBody
        let clientID: String
        switch await authenticatedEndpointForm(request, body: body, endpoint: revocationEndpoint) {
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
        // A DPoP-bound access token revoked with a proof: the proof carries its hash, as at a
        // resource (RFC 9449 §7.1).
        let isBoundAccessToken = state.tokens.accessToken(token)?.record.dpopThumbprint != nil
        if case .failure(let refusal) = await checkDPoPProof(request, accessToken: isBoundAccessToken ? token : nil) {
            return .failure(.dpopProof(refusal))
        }
        switch state.tokens.revoke(token: token, clientID: clientID) {
        case .revoked, .unknownToken:
            return .success(())
        case .otherClient:
            return .failure(.unauthorizedClient("the token was issued to another client"))
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
