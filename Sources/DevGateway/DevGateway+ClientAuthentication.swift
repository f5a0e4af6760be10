import FlyingFox
import Foundation
import Logging

// MARK: - Client authentication at the token and revocation endpoints (RFC 6749 §2.3, RFC 7523 §2.2)

extension DevGateway {
    /// A form body and the client it authenticates, at `endpoint` (``tokenEndpoint`` or
    /// ``revocationEndpoint``): see ``authenticateEndpointClient(_:_:endpoint:)``.
    func authenticatedEndpointForm(_ request: HTTPRequest, body: Data, endpoint: URL) async -> Result<(FormBody, String), OAuthRejection> {
        guard Self.isForm(request) else {
            return .failure(.invalidRequest("the body must be application/x-www-form-urlencoded"))
        }
        switch FormBody.parse(body) {
        case .success(let parameters):
            return await authenticateEndpointClient(request, parameters, endpoint: endpoint).map { (parameters, $0) }
        case .failure(let rejection):
            return .failure(rejection)
        }
    }

    /// The client a request to the token or revocation endpoint authenticates as, by any
    /// method the gateway supports. A client registered for the client credentials grant must
    /// use its registered method (``registerServiceClient(id:authentication:scopes:accessTokenLifetime:)``);
    /// any other client authenticates as at every endpoint (HTTP Basic, or `client_id` alone).
    ///
    /// A refusal is 401 `invalid_client`, with `WWW-Authenticate: Basic` only when the request
    /// tried HTTP Basic (RFC 6749 §5.2), and is counted by the method tried.
    func authenticateEndpointClient(_ request: HTTPRequest, _ parameters: FormBody, endpoint: URL) async -> Result<String, OAuthRejection> {
        let authorization = request.headers[.authorization]
        let outcome: Result<String, ClientAuthenticationFailure>
        switch ClientAuthenticationAttempt.read(authorization: authorization, parameters) {
        case .success(let attempt):
            outcome = await authenticate(attempt, request, parameters, endpoint: endpoint)
        case .failure(let failure):
            outcome = .failure(failure)
        }
        switch outcome {
        case .success(let clientID):
            return .success(clientID)
        case .failure(var failure):
            failure.rejection.challengesBasic = authorization != nil
            state.stats.refusedClientAuthentications[failure.method.rawValue, default: 0] += 1
            statsDidChange()
            logger.debug(
                "client authentication refused",
                metadata: [
                    "gateway.endpoint": "\(endpoint.path)", "gateway.auth_method": "\(failure.method.rawValue)",
                    "gateway.reason": "\(failure.rejection.description)",
                ])
            return .failure(failure.rejection)
        }
    }

    /// Checks `attempt` against the client it names.
    private func authenticate(
        _ attempt: ClientAuthenticationAttempt, _ request: HTTPRequest, _ parameters: FormBody, endpoint: URL
    ) async -> Result<String, ClientAuthenticationFailure> {
        func refused(_ description: String) -> Result<String, ClientAuthenticationFailure> {
            .failure(ClientAuthenticationFailure(method: attempt.method, rejection: .invalidClient(description)))
        }
        guard let clientID = attempt.claimedClientID else {
            return refused("the client assertion names no client (sub), and the body has no client_id")
        }
        guard let client = state.serviceClients.clients[clientID] else {
            switch attempt {
            case .basic, .none:
                return authenticateClient(request, parameters).mapError {
                    ClientAuthenticationFailure(method: attempt.method, rejection: $0)
                }
            case .post:
                return refused("client_secret in the body is accepted from clients registered for client_secret_post only; use HTTP Basic")
            case .assertion:
                return refused("client \(clientID) is not registered for private_key_jwt")
            }
        }
        guard client.credential.method == attempt.method else {
            return refused("client \(clientID) must authenticate with \(client.credential.method.rawValue), not \(attempt.method.rawValue)")
        }
        switch (client.credential, attempt) {
        case (.clientSecretBasic(let expected), .basic(let credentials)):
            return TokenMint.constantTimeEquals(expected, credentials.secret) ? .success(clientID) : refused("client authentication failed")
        case (.clientSecretPost(let expected), .post(_, let secret)):
            return TokenMint.constantTimeEquals(expected, secret) ? .success(clientID) : refused("client authentication failed")
        case (.privateKeyJWT(let keys), .assertion(_, let assertion)):
            return await verifyAssertion(assertion, clientID: clientID, keys: keys, endpoint: endpoint)
        default:
            return refused("client authentication failed")
        }
    }

    /// A `private_key_jwt` assertion (``ClientAssertionVerifier``), then its `jti`: an
    /// assertion is accepted once.
    private func verifyAssertion(
        _ assertion: String, clientID: String, keys: [ClientAssertionKey], endpoint: URL
    ) async -> Result<String, ClientAuthenticationFailure> {
        func refused(_ description: String) -> Result<String, ClientAuthenticationFailure> {
            .failure(ClientAuthenticationFailure(method: .privateKeyJWT, rejection: .invalidClient(description)))
        }
        let verifier = ClientAssertionVerifier(
            clientID: clientID, keys: keys, audiences: assertionAudiences(), now: signInNow())
        let accepted: ClientAssertionVerifier.Accepted
        switch await verifier.verify(assertion) {
        case .success(let value): accepted = value
        case .failure(let refusal): return refused(refusal.reason)
        }
        // The keys may have been replaced while the signature was being checked.
        guard state.serviceClients.isRegistered(accepted.key, for: clientID) else {
            return refused("the key that signed the assertion is no longer registered for the client")
        }
        guard state.serviceClients.recordAssertion(clientID: clientID, jti: accepted.jti, forgetAfter: accepted.forgetAfter, now: signInNow())
        else {
            state.stats.replayedClientAssertions += 1
            return refused("the client assertion was used before (jti); make a new one for each request")
        }
        return .success(clientID)
    }

    /// The `aud` values a client assertion may name, at the token and the revocation endpoint
    /// alike: the token endpoint as discovery publishes it (RFC 7523 §3, OpenID Connect Core §9,
    /// and what Authlib checks at both), the issuer, and the issuer discovery publishes if
    /// another. Never the revocation endpoint: a client that names it fails at Authlib too.
    func assertionAudiences() -> Set<String> {
        var audiences: Set<String> = [tokenEndpoint.absoluteString, issuer]
        if let published = state.signIn.discovery.issuer { audiences.insert(published) }
        return audiences
    }
}
