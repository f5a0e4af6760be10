import FlyingFox
import Foundation

// MARK: - A protected resource (RFC 6750): what a client tool calls with its access token

extension DevGateway {
    nonisolated static var resourceRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: HTTPRoute("GET /api/profile")) { gateway, request in
                await gateway.handleProfile(request)
            },
            GatewayRoute(route: HTTPRoute("POST /admin/tokens/invalidate")) { gateway, request in
                let body = await DevGateway.body(of: request)
                guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
                    let subject = object["subject"] as? String
                else {
                    return .json(["error": "invalid_request"], status: 400)
                }
                return .json(["invalidated": await gateway.invalidateAccessTokens(subject: subject)])
            },
        ]
    }

    /// `GET /api/profile` with `Authorization: Bearer <access token>`: 200 `{"sub", "scope",
    /// "client_id"}`; 401 with `WWW-Authenticate: Bearer error="invalid_token"` for a missing,
    /// unknown, invalidated or revoked token (RFC 6750 §3).
    func handleProfile(_ request: HTTPRequest) -> HTTPResponse {
        state.stats.resourceRequests += 1
        defer { statsDidChange() }
        let header = request.headers[.authorization] ?? ""
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer",
            let grant = state.tokens.grant(forAccessToken: String(parts[1])), !grant.revoked
        else {
            state.stats.resourceRefusals += 1
            return .json(
                ["error": "invalid_token", "error_description": "the access token is not valid"], status: 401,
                headers: [(HTTPHeader("WWW-Authenticate"), #"Bearer realm="DevGateway", error="invalid_token""#)])
        }
        return .json(["sub": grant.subject, "scope": grant.scope, "client_id": grant.clientID])
    }

    /// Makes the resource server refuse every access token issued to `subject` so far (their
    /// grants stay: a refresh gets a new one). What a client tool sees when the server rotated
    /// its keys or cut a token short: a 401 to answer with `SessionService.reportUnauthorized`.
    ///
    /// ```swift
    /// await gateway.invalidateAccessTokens(subject: "alice")   // the next API call gets 401
    /// ```
    @discardableResult
    public func invalidateAccessTokens(subject: String) -> Int {
        state.tokens.invalidateAccessTokens(subject: subject)
    }
}
