import FlyingFox
import Foundation
import JWTKit
import Logging

// MARK: - Resource indicators (RFC 8707) and JWT access tokens (RFC 9068)

extension DevGateway {
    nonisolated static var resourceIndicatorRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /admin/resources") { gateway, request in
                guard let servers = AdminJSON.decode(AdminJSON.ResourceServerList.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                await gateway.setResourceServers(servers.uris)
                return .empty(status: 204)
            },
            GatewayRoute(route: "POST /admin/faults/resource-indicators") { gateway, request in
                guard let plan = AdminJSON.decode(AdminJSON.ResourceIndicatorFaults.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                if let ignore = plan.ignore { await gateway.ignoreResourceIndicators(ignore) }
                if let format = plan.tokenFormat { await gateway.setResourceTokenFormat(format) }
                return .empty(status: 204)
            },
        ]
    }

    /// The resource indicator of the protected resource `GET /api/profile`: `baseURL/api`.
    ///
    /// ```swift
    /// let form = [("grant_type", "refresh_token"), ("resource", gateway.apiResource)]
    /// ```
    public nonisolated var apiResource: String { baseURL.absoluteString + "/api" }

    /// The resource indicator of the resource server `name`, `baseURL/rs/<name>`, which answers
    /// `GET /rs/<name>/whoami` for tokens issued for it.
    ///
    /// ```swift
    /// let files = gateway.resourceServer(named: "files")   // "http://127.0.0.1:41234/rs/files"
    /// ```
    public nonisolated func resourceServer(named name: String) -> String {
        baseURL.absoluteString + "/rs/" + name
    }

    /// Replaces the resource URIs a `resource` parameter may name. Each is compared exactly
    /// (no normalisation); one that is not an absolute URI without a fragment can never be
    /// asked for. The defaults are ``apiResource`` and the resource servers `files` and `mail`.
    ///
    /// ```swift
    /// await gateway.setResourceServers([gateway.resourceServer(named: "calendar")])
    /// ```
    public func setResourceServers(_ uris: [String]) {
        state.resources = ResourceServers(uris: uris)
        logger.debug("resource servers set", metadata: ["gateway.resources": "\(uris)"])
    }

    /// While on, a token request's `resource` parameters are accepted but ignored, as by a
    /// provider that does not implement RFC 8707: nothing is checked (no `invalid_target`) and
    /// the access token is for ``apiResource`` whatever was asked. Cleared by ``resetFaults()``.
    ///
    /// ```swift
    /// await gateway.ignoreResourceIndicators(true)
    /// // refresh with resource=…/rs/files → a token whose aud is …/api
    /// ```
    public func ignoreResourceIndicators(_ on: Bool) {
        state.faults.ignoresResourceIndicators = on
    }

    /// Chooses the kind of access token issued for a token request with `resource`: a JWT
    /// (RFC 9068, the default) or an opaque string. Either way the gateway records the token's
    /// audience, so the resource servers accept and refuse it alike. Reset by ``resetFaults()``.
    ///
    /// ```swift
    /// await gateway.setResourceTokenFormat(.opaque)
    /// ```
    public func setResourceTokenFormat(_ format: ResourceTokenFormat) {
        state.faults.resourceTokenFormat = format
    }

    /// The audiences a token request asks for with `resource` (RFC 8707 §2): none without it;
    /// ``apiResource`` alone while resource indicators are ignored; else each value checked
    /// against the served resources (`invalid_target`, counted, for a bad one).
    func requestedAudiences(_ parameters: FormBody) -> Result<[String], OAuthRejection> {
        let resources = parameters.values("resource")
        guard !resources.isEmpty else { return .success([]) }
        if state.faults.ignoresResourceIndicators { return .success([apiResource]) }
        let audiences = state.resources.audiences(for: resources)
        if case .failure = audiences { state.stats.invalidTargetRefusals += 1 }
        return audiences
    }

    /// `tokens` with their access token as a signed JWT (RFC 9068) when the ledger recorded it
    /// with an audience and the format is ``ResourceTokenFormat/jwt``; otherwise as they are.
    /// The JWT takes the opaque token's place in the ledger, with its audience, scope and DPoP
    /// binding (in the JWT as `cnf.jkt`, RFC 9449 §6.1).
    func formattingAccessToken(of tokens: IssuedTokens) async -> IssuedTokens {
        guard let (record, grant) = state.tokens.accessToken(tokens.accessToken), !record.audiences.isEmpty,
            state.faults.resourceTokenFormat == .jwt
        else {
            return tokens
        }
        let iat = Int(signInNow().timeIntervalSince1970)
        let claims = AccessTokenClaims(
            iss: state.signIn.discovery.issuer ?? issuer, sub: grant.subject, aud: AudienceClaim(value: record.audiences),
            clientID: grant.clientID, scope: record.scope, iat: iat, exp: iat + tokens.expiresIn,
            jti: TokenMint.identifier(prefix: "at-"), cnf: record.dpopThumbprint.map { AccessTokenClaims.Confirmation(jkt: $0) })
        let key = state.signingKeys.current
        let jwt: String
        do {
            jwt = try await claims.signed(with: key)
        } catch {
            // Signing with an in-memory key does not fail in practice; if it does, the opaque
            // token stays (its audience recorded), so the client still gets a working token.
            logger.error("access token signing failed", metadata: ["gateway.kid": "\(key.kid)", "error": "\(error)"])
            return tokens
        }
        // Invalidated while it was being signed: the JWT is not recorded, so it is refused.
        _ = state.tokens.replaceAccessToken(tokens.accessToken, with: jwt)
        return tokens.with(accessToken: jwt)
    }
}

extension AdminJSON {
    struct ResourceServerList: Decodable {
        let uris: [String]
    }

    struct ResourceIndicatorFaults: Decodable {
        let ignore: Bool?
        let tokenFormat: ResourceTokenFormat?

        enum CodingKeys: String, CodingKey {
            case ignore
            case tokenFormat = "token_format"
        }
    }
}
