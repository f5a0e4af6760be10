import FlyingFox
import Foundation
import Logging

// MARK: - Token introspection (RFC 7662)

/// Which clients the gateway lets introspect (``DevGateway/setIntrospection(_:)``): providers
/// differ (Okta answers a public client about its own tokens, Keycloak only confidential ones,
/// many publish no endpoint at all).
public enum IntrospectionAccess: Sendable, Hashable {
    /// Every authenticated client, about its own tokens (the default).
    case anyClient
    /// Clients with credentials only; a public client gets 401 `invalid_client`.
    case confidentialClients
    /// No one: 403 `access_denied` (the endpoint stays published).
    case nobody
}

extension DevGateway {
    nonisolated static var introspectionRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /oauth/introspect") { gateway, request in
                await gateway.handleIntrospectionRequest(request, body: body(of: request))
            }
        ]
    }

    public nonisolated var introspectionEndpoint: URL { baseURL.appendingPathComponent("oauth/introspect") }

    /// Who may introspect from now on.
    public func setIntrospection(_ access: IntrospectionAccess) {
        state.introspection = access
    }

    /// `POST /oauth/introspect` (RFC 7662 §2): the client authenticates as at the revocation
    /// endpoint; a live refresh token of its own live grant is `active` with the grant's subject
    /// and scope, and `exp` when ``setRefreshTokenLifetime(_:)`` gave refresh tokens one; anything
    /// else (rotated, revoked, unknown, another client's) is `{"active": false}`.
    func handleIntrospectionRequest(_ request: HTTPRequest, body: Data) async -> HTTPResponse {
        state.stats.introspectionRequests += 1
        statsDidChange()
        var metadata: Logger.Metadata = ["gateway.endpoint": "/oauth/introspect"]
        let parameters: FormBody
        let clientID: String
        switch await authenticatedEndpointForm(request, body: body, endpoint: introspectionEndpoint) {
        case .success(let form): (parameters, clientID) = form
        case .failure(let rejection):
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("introspection request", metadata: metadata)
            return .oauthError(rejection)
        }
        switch state.introspection {
        case .anyClient:
            break
        case .confidentialClients
        where request.headers[.authorization] != nil || parameters["client_secret"] != nil || parameters["client_assertion"] != nil:
            break
        case .confidentialClients:
            return .oauthError(OAuthRejection(status: 401, error: "invalid_client", description: "only confidential clients may introspect"))
        case .nobody:
            return .oauthError(OAuthRejection(status: 403, error: "access_denied", description: "introspection is not offered to this client"))
        }
        guard let token = parameters["token"], !token.isEmpty else { return .oauthError(.invalidRequest("token is required")) }
        let answer = state.tokens.introspect(token, clientID: clientID, now: state.signIn.now())
        metadata["gateway.outcome"] = "\(answer == nil ? "inactive" : "active")"
        logger.debug("introspection request", metadata: metadata)
        guard let answer else { return .json(IntrospectionAnswer(active: false)) }
        return .json(
            IntrospectionAnswer(
                active: true, clientID: clientID, subject: answer.subject, scope: answer.scope, tokenType: answer.tokenType,
                exp: answer.expiresAt.map { Int($0.timeIntervalSince1970) }))
    }

    /// Refresh tokens live `lifetime` from their grant's sign-in, as introspection's `exp` says
    /// (nil: unbounded, the default). The token endpoint does not enforce it.
    public func setRefreshTokenLifetime(_ lifetime: Duration?) {
        state.tokens.refreshTokenLifetime = lifetime
    }
}

/// An introspection response (RFC 7662 §2.2); absent members are left out.
struct IntrospectionAnswer: Encodable {
    var active: Bool
    var clientID: String?
    var subject: String?
    var scope: String?
    var tokenType: String?
    var exp: Int?

    enum CodingKeys: String, CodingKey {
        case active, scope, exp
        case clientID = "client_id"
        case subject = "sub"
        case tokenType = "token_type"
    }
}
