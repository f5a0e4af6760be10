import FlyingFox
import Foundation

// MARK: - Protected resources (RFC 6750): what a client tool calls with its access token

extension DevGateway {
    nonisolated static var resourceRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: HTTPRoute("GET /api/profile")) { gateway, request in
                await gateway.handleProfile(request)
            },
            GatewayRoute(route: HTTPRoute("GET /rs/:name/whoami")) { gateway, request in
                await gateway.handleWhoAmI(request, server: request.routeParameters["name"] ?? "")
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
    /// unknown, invalidated or revoked token, or one whose audience (RFC 8707) leaves out
    /// ``apiResource`` (RFC 6750 §3). A token without an audience is accepted.
    func handleProfile(_ request: HTTPRequest) -> HTTPResponse {
        state.stats.resourceRequests += 1
        defer { statsDidChange() }
        guard let (record, grant) = bearerToken(of: request),
            record.audiences.isEmpty || record.audiences.contains(apiResource)
        else {
            state.stats.resourceRefusals += 1
            return Self.invalidToken
        }
        return .json(["sub": grant.subject, "scope": grant.scope, "client_id": grant.clientID])
    }

    /// `GET /rs/{name}/whoami`, an audience-restricted API: 200 `{"sub", "scope", "client_id",
    /// "aud"}` (the token's own scope and audiences) only for a token issued for
    /// `baseURL/rs/{name}`; 401 `invalid_token` for any other, a token without an audience
    /// included; 404 when `baseURL/rs/{name}` is not a served resource.
    func handleWhoAmI(_ request: HTTPRequest, server name: String) -> HTTPResponse {
        state.stats.resourceRequests += 1
        defer { statsDidChange() }
        let resource = resourceServer(named: name)
        guard state.resources.serves(resource) else {
            state.stats.resourceRefusals += 1
            return .json(
                GatewayJSON.Failure(error: "not_found", errorDescription: "no resource server \(resource) at this gateway"), status: 404)
        }
        guard let (record, grant) = bearerToken(of: request), record.audiences.contains(resource) else {
            state.stats.resourceRefusals += 1
            return Self.invalidToken
        }
        return .json(GatewayJSON.WhoAmI(sub: grant.subject, scope: record.scope, clientID: grant.clientID, aud: record.audiences))
    }

    /// The recorded access token of an `Authorization: Bearer` header and its live grant; nil
    /// for no header, an unknown or invalidated token, or a revoked grant.
    private func bearerToken(of request: HTTPRequest) -> (record: TokenLedger.AccessTokenRecord, grant: TokenLedger.Grant)? {
        let header = request.headers[.authorization] ?? ""
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer",
            let found = state.tokens.accessToken(String(parts[1])), !found.grant.revoked
        else {
            return nil
        }
        return found
    }

    /// 401 `invalid_token` with its `WWW-Authenticate: Bearer` challenge (RFC 6750 §3).
    private static var invalidToken: HTTPResponse {
        .json(
            ["error": "invalid_token", "error_description": "the access token is not valid"], status: 401,
            headers: [(HTTPHeader("WWW-Authenticate"), #"Bearer realm="DevGateway", error="invalid_token""#)])
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

extension GatewayJSON {
    /// The body of `GET /rs/{name}/whoami`.
    struct WhoAmI: Encodable {
        let sub: String
        let scope: String
        let clientID: String
        /// Always an array, one resource or several.
        let aud: [String]

        enum CodingKeys: String, CodingKey {
            case sub, scope
            case clientID = "client_id"
            case aud
        }
    }
}
