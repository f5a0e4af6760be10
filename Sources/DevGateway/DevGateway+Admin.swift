import FlyingFox
import Foundation
import Logging

// MARK: - Admin endpoints: grants, faults, settings, stats

extension DevGateway {
    nonisolated static var adminRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /admin/grants") { gateway, request in
                await gateway.handleCreateGrant(body: body(of: request))
            },
            GatewayRoute(route: "POST /admin/grants/:subject/revoke") { gateway, request in
                let subject = request.routeParameters["subject"].flatMap { $0.removingPercentEncoding } ?? ""
                let revoked = await gateway.revokeGrants(subject: subject)
                return .json(["revoked_grants": revoked])
            },
            GatewayRoute(route: "POST /admin/faults/token-failures") { gateway, request in
                guard let plan = AdminJSON.decode(AdminJSON.Failures.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                await gateway.failNextTokenRequests(plan.count ?? 1, with: plan.fault)
                return .empty(status: 204)
            },
            GatewayRoute(route: "POST /admin/faults/revocation-failures") { gateway, request in
                guard let plan = AdminJSON.decode(AdminJSON.Failures.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                await gateway.failNextRevocationRequests(plan.count ?? 1, with: plan.fault)
                return .empty(status: 204)
            },
            GatewayRoute(route: "POST /admin/faults/token-latency") { gateway, request in
                guard let latency = AdminJSON.decode(AdminJSON.Latency.self, from: await body(of: request)),
                    latency.milliseconds >= 0
                else {
                    return AdminJSON.badRequest
                }
                await gateway.setTokenLatency(.milliseconds(latency.milliseconds))
                return .empty(status: 204)
            },
            GatewayRoute(route: "POST /admin/faults/reset") { gateway, _ in
                await gateway.resetFaults()
                return .empty(status: 204)
            },
            GatewayRoute(route: "POST /admin/settings") { gateway, request in
                guard let settings = AdminJSON.decode(AdminJSON.Settings.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                if let rotation = settings.rotateRefreshTokens {
                    await gateway.setRefreshTokenRotation(rotation)
                }
                return .empty(status: 204)
            },
            GatewayRoute(route: "GET /admin/stats") { gateway, _ in
                .json(await gateway.stats())
            },
        ]
    }

    /// `POST /admin/grants`: like ``issueGrant(subject:clientID:clientSecret:scope:accessTokenLifetime:rotatesRefreshTokens:)``.
    func handleCreateGrant(body: Data) async -> HTTPResponse {
        guard let grant = AdminJSON.decode(AdminJSON.Grant.self, from: body),
            !grant.subject.isEmpty, !grant.clientID.isEmpty,
            (grant.accessTokenLifetime ?? 0) >= 0
        else {
            return AdminJSON.badRequest
        }
        let tokens = await issueGrant(
            subject: grant.subject,
            clientID: grant.clientID,
            clientSecret: grant.clientSecret,
            scope: grant.scope ?? "openid profile",
            accessTokenLifetime: .seconds(grant.accessTokenLifetime ?? 3600),
            rotatesRefreshTokens: grant.rotateRefreshTokens
        )
        return .json(GatewayJSON.Tokens(tokens, includeGrantID: true), status: 201)
    }
}

/// Request bodies of the admin API.
enum AdminJSON {
    struct Grant: Decodable {
        let subject: String
        let clientID: String
        let clientSecret: String?
        let scope: String?
        let accessTokenLifetime: Int?
        let rotateRefreshTokens: Bool?

        enum CodingKeys: String, CodingKey {
            case subject, clientID = "client_id", clientSecret = "client_secret", scope
            case accessTokenLifetime = "access_token_lifetime", rotateRefreshTokens = "rotate_refresh_tokens"
        }
    }

    struct Failures: Decodable {
        let count: Int?
        let status: Int
        let retryAfter: Int?
        let error: String?
        let body: String?
        let echoRequest: Bool?

        var fault: TokenFault {
            TokenFault(status: status, retryAfter: retryAfter, error: error, body: body, echoesRequest: echoRequest ?? false)
        }

        enum CodingKeys: String, CodingKey {
            case count, status, retryAfter = "retry_after", error, body, echoRequest = "echo_request"
        }
    }

    struct Latency: Decodable {
        let milliseconds: Int
    }

    struct Settings: Decodable {
        let rotateRefreshTokens: Bool?

        enum CodingKeys: String, CodingKey {
            case rotateRefreshTokens = "rotate_refresh_tokens"
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data) -> T? {
        try? JSONDecoder().decode(type, from: data)
    }

    static var badRequest: HTTPResponse {
        .json(GatewayJSON.Failure(error: "invalid_request", errorDescription: "malformed admin request body"), status: 400)
    }
}
