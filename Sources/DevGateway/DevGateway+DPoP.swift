import FlyingFox
import Foundation
import Logging

// MARK: - DPoP (RFC 9449): proofs, nonces and the switches tests turn

extension DevGateway {
    nonisolated static var dpopRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /admin/dpop") { gateway, request in
                guard let settings = AdminJSON.decode(AdminJSON.DPoPSettings.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                await gateway.applyDPoPSettings(settings)
                return .empty(status: 204)
            }
        ]
    }

    /// The request header that carries a proof (RFC 9449 §4.1).
    nonisolated static let dpopHeader = HTTPHeader("DPoP")
    /// The response header that carries the nonce proofs must include (RFC 9449 §8.1).
    nonisolated static let dpopNonceHeader = HTTPHeader("DPoP-Nonce")

    /// Requires (or stops requiring) a gateway-issued nonce in every DPoP proof (RFC 9449 §8,
    /// §9). While on, a proof without the current nonce is answered `use_dpop_nonce` with the
    /// nonce in `DPoP-Nonce` (400 at the token and revocation endpoints, 401 at the protected
    /// resources), and every answer of those endpoints carries `DPoP-Nonce`. Off by default.
    ///
    /// ```swift
    /// await gateway.requireDPoPNonce(true)
    /// // token request with a proof → 400 use_dpop_nonce, DPoP-Nonce: <n>; again with nonce <n> → 200
    /// ```
    public func requireDPoPNonce(_ required: Bool) {
        state.dpop.requiresNonce = required
        logger.debug("dpop nonce requirement", metadata: ["gateway.required": "\(required)"])
    }

    /// Replaces the nonce proofs must carry: a client holding the previous one gets
    /// `use_dpop_nonce` (and the new nonce) at its next request.
    ///
    /// ```swift
    /// await gateway.rotateDPoPNonce()
    /// ```
    public func rotateDPoPNonce() {
        state.dpop.rotateNonce()
    }

    /// Makes every token request carry a DPoP proof (true), or only those of the clients named
    /// with ``requireDPoP(forClient:)`` (false, the default). A token request without one is
    /// answered 400 `invalid_dpop_proof`. A request with a proof gets tokens bound to its key
    /// whatever this says.
    ///
    /// ```swift
    /// await gateway.requireDPoP(true)
    /// ```
    public func requireDPoP(_ required: Bool) {
        state.dpop.requiredOfEveryClient = required
    }

    /// Makes every token request of client `id` carry a DPoP proof, from now on (a client that
    /// RFC 9449 §5 would register with `dpop_bound_access_tokens`).
    ///
    /// ```swift
    /// await gateway.requireDPoP(forClient: "vault-cli")
    /// ```
    public func requireDPoP(forClient id: String) {
        state.dpop.requireProofs(of: id)
    }

    /// Makes the token endpoint behave as a provider that does not do DPoP (true): the `DPoP`
    /// header is not read and bearer tokens are issued, which a client that asked for bound
    /// tokens must refuse (RFC 9449 §7.1, §5). Off by default.
    ///
    /// ```swift
    /// await gateway.ignoreDPoP(true)
    /// ```
    public func ignoreDPoP(_ ignored: Bool) {
        state.dpop.ignored = ignored
    }

    func applyDPoPSettings(_ settings: AdminJSON.DPoPSettings) {
        if let ignored = settings.ignore { ignoreDPoP(ignored) }
        if let required = settings.requireNonce { requireDPoPNonce(required) }
        if settings.rotateNonce == true { rotateDPoPNonce() }
        if let required = settings.require { requireDPoP(required) }
        for client in settings.requireClients ?? [] { requireDPoP(forClient: client) }
    }

    // MARK: - Checking a request's proof

    /// The proof of `request`'s `DPoP` header, checked against the request (method, the
    /// gateway's URL for its path), the gateway's clock, `accessToken` (its hash must be the
    /// proof's `ath`) and the nonce when one is required; then recorded, so that the same proof
    /// is refused from now on. nil when the request has no `DPoP` header. Counted and logged,
    /// without the proof.
    func checkDPoPProof(_ request: HTTPRequest, accessToken: String?) async -> Result<DPoPProof?, DPoPProofRefusal> {
        let values = request.headers.values(for: Self.dpopHeader)
        guard let value = values.first else { return .success(nil) }
        guard values.count == 1, !value.contains(",") else {
            return .failure(refusedProof(DPoPProofRefusal(.multiple, "send exactly one DPoP header with one proof"), request))
        }
        let verifier = DPoPProofVerifier(
            method: request.method.rawValue, url: baseURL.absoluteString + request.path, now: signInNow(),
            accessToken: accessToken, nonce: state.dpop.requiresNonce ? state.dpop.nonce : nil)
        let proof: DPoPProof
        switch await verifier.verify(value) {
        case .success(let accepted): proof = accepted
        case .failure(let refusal): return .failure(refusedProof(refusal, request))
        }
        guard state.dpop.recordProof(thumbprint: proof.thumbprint, jti: proof.jti, forgetAfter: proof.forgetAfter, now: signInNow())
        else {
            state.stats.replayedDPoPProofs += 1
            return .failure(
                refusedProof(DPoPProofRefusal(.replay, "the DPoP proof was used before (jti); make a new one for each request"), request))
        }
        state.stats.dpopProofsAccepted += 1
        statsDidChange()
        return .success(proof)
    }

    /// Counts and logs `refusal` (a nonce refusal as a nonce challenge); returns it.
    func refusedProof(_ refusal: DPoPProofRefusal, _ request: HTTPRequest) -> DPoPProofRefusal {
        if refusal.reason == .nonce {
            state.stats.dpopNonceChallenges += 1
        } else {
            state.stats.refusedDPoPProofs[refusal.reason.rawValue, default: 0] += 1
        }
        statsDidChange()
        logger.debug(
            "dpop proof refused",
            metadata: [
                "gateway.endpoint": "\(request.path)", "gateway.dpop_reason": "\(refusal.reason.rawValue)",
                "gateway.error": "\(refusal.error)",
            ])
        return refusal
    }

    /// The DPoP key a token request binds its tokens to (RFC 9449 §5): the thumbprint of its
    /// proof's key; nil without a proof, unless the client must send one. A refused proof is
    /// 400 `invalid_dpop_proof`, or `use_dpop_nonce`.
    func tokenRequestBinding(_ request: HTTPRequest, clientID: String) async -> Result<String?, OAuthRejection> {
        switch await checkDPoPProof(request, accessToken: nil) {
        case .success(let proof?):
            return .success(proof.thumbprint)
        case .success(nil):
            guard state.dpop.requiresProof(of: clientID) else { return .success(nil) }
            return .failure(.dpopProof(refusedProof(DPoPProofRefusal(.missing, "a DPoP proof is required"), request)))
        case .failure(let refusal):
            return .failure(.dpopProof(refusal))
        }
    }

    /// `response` with `DPoP-Nonce: <current nonce>` while nonces are required, or when it
    /// answers `use_dpop_nonce` (RFC 9449 §8.1, §9).
    func withDPoPNonce(_ response: HTTPResponse, challenged: Bool = false) -> HTTPResponse {
        guard state.dpop.requiresNonce || challenged else { return response }
        var response = response
        response.headers[Self.dpopNonceHeader] = state.dpop.nonce
        return response
    }
}

extension OAuthRejection {
    /// 400 `invalid_dpop_proof` or `use_dpop_nonce` at the token and revocation endpoints
    /// (RFC 9449 §5, §8).
    static func dpopProof(_ refusal: DPoPProofRefusal) -> Self {
        Self(status: 400, error: refusal.error, description: refusal.description)
    }
}

extension AdminJSON {
    /// `POST /admin/dpop`: each field changes its switch when present.
    struct DPoPSettings: Decodable {
        let requireNonce: Bool?
        let rotateNonce: Bool?
        let require: Bool?
        let requireClients: [String]?
        let ignore: Bool?

        enum CodingKeys: String, CodingKey {
            case requireNonce = "require_nonce", rotateNonce = "rotate_nonce", require, requireClients = "require_clients", ignore
        }
    }
}
