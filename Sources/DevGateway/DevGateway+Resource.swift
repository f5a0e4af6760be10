import FlyingFox
import Foundation
import Logging

// MARK: - Protected resources (RFC 6750, RFC 9449 §7): what a client tool calls with its access token

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

    /// `GET /api/profile` with `Authorization: Bearer <access token>`, or `Authorization: DPoP
    /// <access token>` and a `DPoP` proof (RFC 9449 §7): 200 `{"sub", "scope", "client_id",
    /// "token_type" ("Bearer" or "DPoP"), "cnf_jkt" (DPoP only)}`; 401 for a missing, unknown,
    /// invalidated or revoked token, or one whose audience (RFC 8707) leaves out ``apiResource``
    /// (RFC 6750 §3), and for what ``presentedAccessToken(_:)`` refuses. A token without an
    /// audience is accepted.
    func handleProfile(_ request: HTTPRequest) async -> HTTPResponse {
        state.stats.resourceRequests += 1
        statsDidChange()
        let response: HTTPResponse
        switch await presentedAccessToken(request) {
        case .failure(let refusal):
            response = refused(refusal)
        case .success(let token) where !token.record.audiences.isEmpty && !token.record.audiences.contains(apiResource):
            response = refused(.invalidToken(token.scheme, "the access token is not for this resource"))
        case .success(let token):
            response = .json(
                GatewayJSON.Profile(
                    sub: token.grant.subject, scope: token.grant.scope, clientID: token.grant.clientID, tokenType: token.scheme.rawValue,
                    cnfJKT: token.record.dpopThumbprint))
        }
        return withDPoPNonce(response)
    }

    /// `GET /rs/{name}/whoami`, an audience-restricted API: 200 `{"sub", "scope", "client_id",
    /// "aud", "token_type", "cnf_jkt"?}` (the token's own scope and audiences) only for a token
    /// issued for `baseURL/rs/{name}`, presented as at ``handleProfile(_:)``; 401
    /// `invalid_token` for any other, a token without an audience included; 404 when
    /// `baseURL/rs/{name}` is not a served resource.
    func handleWhoAmI(_ request: HTTPRequest, server name: String) async -> HTTPResponse {
        state.stats.resourceRequests += 1
        statsDidChange()
        let resource = resourceServer(named: name)
        guard state.resources.serves(resource) else {
            state.stats.resourceRefusals += 1
            statsDidChange()
            return .json(
                GatewayJSON.Failure(error: "not_found", errorDescription: "no resource server \(resource) at this gateway"), status: 404)
        }
        let response: HTTPResponse
        switch await presentedAccessToken(request) {
        case .failure(let refusal):
            response = refused(refusal)
        case .success(let token) where !token.record.audiences.contains(resource):
            response = refused(.invalidToken(token.scheme, "the access token is not for this resource"))
        case .success(let token):
            response = .json(
                GatewayJSON.WhoAmI(
                    sub: token.grant.subject, scope: token.record.scope, clientID: token.grant.clientID, aud: token.record.audiences,
                    tokenType: token.scheme.rawValue, cnfJKT: token.record.dpopThumbprint))
        }
        return withDPoPNonce(response)
    }

    // MARK: - The presented access token

    /// The scheme of an `Authorization` header at a protected resource.
    enum AccessTokenScheme: String, Sendable {
        case bearer = "Bearer"
        case dpop = "DPoP"
    }

    /// An access token a protected resource accepts: its record, its live grant, and the
    /// scheme it came with.
    struct PresentedAccessToken: Sendable {
        let record: TokenLedger.AccessTokenRecord
        let grant: TokenLedger.Grant
        let scheme: AccessTokenScheme
    }

    /// Why a protected resource refuses a request; each is a 401 with its challenge.
    enum ResourceRefusal: Error, Sendable {
        /// `invalid_token` (RFC 6750 §3.1) in the scheme the request used.
        case invalidToken(AccessTokenScheme, String)
        /// A DPoP-bound token sent as `Bearer` (RFC 9449 §7.2): `invalid_token`, both challenges.
        case boundTokenAsBearer
        /// The proof of a `DPoP` request: `invalid_dpop_proof` or `use_dpop_nonce`.
        case proof(DPoPProofRefusal)
    }

    /// The access token of `request`'s `Authorization` header, accepted (RFC 6750 §2.1, RFC
    /// 9449 §7.1):
    /// - `Bearer <token>`: a recorded token of a live grant that is not DPoP-bound; a bound
    ///   one is refused (and counted: a stolen DPoP token does not work as a bearer token);
    /// - `DPoP <token>`: a valid proof for this request carrying the token's hash (`ath`), then
    ///   a recorded token of a live grant bound to the proof's key.
    /// Any other header (none included) is `invalid_token` in the Bearer scheme.
    func presentedAccessToken(_ request: HTTPRequest) async -> Result<PresentedAccessToken, ResourceRefusal> {
        let header = request.headers[.authorization] ?? ""
        let parts = header.split(separator: " ", maxSplits: 1)
        let invalid = "the access token is not valid"
        guard parts.count == 2 else { return .failure(.invalidToken(.bearer, invalid)) }
        let token = String(parts[1])
        switch parts[0].lowercased() {
        case "bearer":
            guard let (record, grant) = state.tokens.accessToken(token), !grant.revoked else {
                return .failure(.invalidToken(.bearer, invalid))
            }
            guard record.dpopThumbprint == nil else {
                state.stats.boundTokenBearerRefusals += 1
                statsDidChange()
                logger.debug("bound access token presented as bearer", metadata: ["gateway.endpoint": "\(request.path)", "gateway.grant_id": "\(grant.id)"])
                return .failure(.boundTokenAsBearer)
            }
            return .success(PresentedAccessToken(record: record, grant: grant, scheme: .bearer))
        case "dpop":
            let proof: DPoPProof
            switch await checkDPoPProof(request, accessToken: token) {
            case .success(let accepted?): proof = accepted
            case .success(nil):
                return .failure(.proof(refusedProof(DPoPProofRefusal(.missing, "a DPoP proof is required with the DPoP scheme"), request)))
            case .failure(let refusal): return .failure(.proof(refusal))
            }
            guard let (record, grant) = state.tokens.accessToken(token), !grant.revoked else {
                return .failure(.invalidToken(.dpop, invalid))
            }
            guard let bound = record.dpopThumbprint else {
                return .failure(.invalidToken(.dpop, "the access token is not DPoP-bound; send it with the Bearer scheme"))
            }
            guard bound == proof.thumbprint else {
                return .failure(.invalidToken(.dpop, "the access token is bound to another key than the DPoP proof's"))
            }
            return .success(PresentedAccessToken(record: record, grant: grant, scheme: .dpop))
        default:
            return .failure(.invalidToken(.bearer, invalid))
        }
    }

    /// The 401 of `refusal` (counted), with its `WWW-Authenticate` challenges (RFC 6750 §3,
    /// RFC 9449 §7.1): `Bearer realm="DevGateway", error="invalid_token"` for a bearer request,
    /// `DPoP error="…", error_description="…", algs="…"` for a DPoP one, both for a bound token
    /// sent as bearer. A `use_dpop_nonce` answer carries `DPoP-Nonce`.
    func refused(_ refusal: ResourceRefusal) -> HTTPResponse {
        state.stats.resourceRefusals += 1
        statsDidChange()
        return refusalResponse(refusal).response
    }

    /// The 401 of `refusal` (not counted), and its error code and description.
    func refusalResponse(_ refusal: ResourceRefusal) -> (response: HTTPResponse, error: String, description: String) {
        let bearer = #"Bearer realm="DevGateway", error="invalid_token""#
        let error: String
        let description: String
        let challenge: String
        switch refusal {
        case .invalidToken(.bearer, let text):
            (error, description, challenge) = ("invalid_token", text, bearer)
        case .invalidToken(.dpop, let text):
            (error, description, challenge) = ("invalid_token", text, Self.dpopChallenge("invalid_token", text))
        case .boundTokenAsBearer:
            let text = "the access token is DPoP-bound: send it as Authorization: DPoP with a DPoP proof"
            (error, description, challenge) = ("invalid_token", text, Self.dpopChallenge("invalid_token", text) + ", " + bearer)
        case .proof(let proof):
            (error, description, challenge) = (proof.error, proof.description, Self.dpopChallenge(proof.error, proof.description))
        }
        let response = HTTPResponse.json(
            GatewayJSON.Failure(error: error, errorDescription: description), status: 401,
            headers: [(HTTPHeader("WWW-Authenticate"), challenge)])
        return (withDPoPNonce(response, challenged: error == "use_dpop_nonce"), error, description)
    }

    /// A `DPoP` challenge (RFC 9449 §7.1) with the algorithms the gateway accepts.
    nonisolated static func dpopChallenge(_ error: String, _ description: String) -> String {
        let quoted = description.replacingOccurrences(of: "\\", with: "'").replacingOccurrences(of: "\"", with: "'")
        return #"DPoP error="\#(error)", error_description="\#(quoted)", algs="\#(DPoPProofVerifier.algorithms.joined(separator: " "))""#
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

    /// Every access token issued so far (and not invalidated) with the moment it expires (its
    /// minting plus the `expires_in` it was issued with), by this machine's clock. The resource
    /// endpoints accept a token past it; a test holding a client to its tokens' lifetimes
    /// compares the times it used them with these.
    public func accessTokenExpiries() -> [String: Date] {
        state.tokens.accessTokenExpiries
    }
}

extension GatewayJSON {
    /// The body of `GET /api/profile`.
    struct Profile: Encodable {
        let sub: String
        let scope: String
        let clientID: String
        /// The scheme the token came with: `Bearer` or `DPoP`.
        let tokenType: String
        /// The thumbprint of the key a DPoP token is bound to.
        let cnfJKT: String?

        enum CodingKeys: String, CodingKey {
            case sub, scope
            case clientID = "client_id"
            case tokenType = "token_type"
            case cnfJKT = "cnf_jkt"
        }
    }

    /// The body of `GET /rs/{name}/whoami`.
    struct WhoAmI: Encodable {
        let sub: String
        let scope: String
        let clientID: String
        /// Always an array, one resource or several.
        let aud: [String]
        /// As in ``Profile``.
        let tokenType: String
        let cnfJKT: String?

        enum CodingKeys: String, CodingKey {
            case sub, scope
            case clientID = "client_id"
            case aud
            case tokenType = "token_type"
            case cnfJKT = "cnf_jkt"
        }
    }
}
