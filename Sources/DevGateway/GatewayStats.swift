/// What the gateway has seen, for tests to assert on.
///
/// Its `description` redacts the presented refresh tokens.
///
/// ```swift
/// let stats = await gateway.stats()
/// #expect(stats.tokenRequests == 1)
/// ```
public struct GatewayStats: Sendable, Hashable, Codable {
    /// Requests received on `/oauth/token`, counted on arrival (faulted ones included).
    public var tokenRequests = 0
    /// Requests to the protected resources `GET /api/profile` and `GET /rs/{name}/whoami`, and
    /// how many they refused (401, or 404 for a resource server that does not exist).
    public var resourceRequests = 0
    public var resourceRefusals = 0
    /// Requests received on `/oauth/token` with at least one `resource` parameter (RFC 8707),
    /// counted on arrival (faulted ones included).
    public var resourceTokenRequests = 0
    /// Token requests refused with `invalid_target`: a `resource` that is not an absolute URI,
    /// has a fragment, or is not served by the gateway.
    public var invalidTargetRefusals = 0
    /// Token requests answered (after any latency), whatever the outcome.
    public var tokenResponses = 0
    /// Requests received on `/oauth/revoke`.
    public var revocationRequests = 0
    /// Requests received on `/oauth/introspect`.
    public var introspectionRequests = 0
    /// Times a rotated refresh token was presented again and its family revoked.
    public var reuseDetections = 0
    /// Every `refresh_token` parameter received on `/oauth/token`, in arrival order.
    public var presentedRefreshTokens: [String] = []
    /// Requests received on `/oauth/authorize`, rejected ones included.
    public var authorizationRequests = 0
    /// Times `max_age` or `prompt=login` made a signed-in subject authenticate again.
    public var reauthentications = 0
    /// Device codes issued by `/oauth/device_authorization`.
    public var deviceAuthorizations = 0
    /// Token requests with the device_code grant type.
    public var devicePolls = 0
    /// Device-code polls answered `slow_down`.
    public var slowDowns = 0
    /// Guest accounts created by `/guest/register`.
    public var guestRegistrations = 0
    /// Guests converted by `/guest/convert`.
    public var guestConversions = 0
    /// `GET /userinfo` requests answered with the caller's `sub`.
    public var userinfoAnswers = 0
    /// Approval requests posted to a subject's active devices (`POST /devices/{id}/verify`).
    public var approvalRequests = 0
    /// Session extension requests (`POST /sessions/extend`), granted or not.
    public var extensionRequests = 0
    /// Access tokens issued by the client credentials grant (RFC 6749 §4.4).
    public var clientCredentialsGrants = 0
    /// Client authentications refused (`invalid_client`) at `/oauth/token` and `/oauth/revoke`,
    /// by the method the request tried: `client_secret_basic`, `client_secret_post`,
    /// `private_key_jwt` or `none`.
    public var refusedClientAuthentications: [String: Int] = [:]
    /// `private_key_jwt` assertions refused because the client had used their `jti` before
    /// (also counted in ``refusedClientAuthentications``).
    public var replayedClientAssertions = 0
    /// DPoP proofs (RFC 9449) accepted at `/oauth/token`, `/oauth/revoke` and the protected
    /// resources.
    public var dpopProofsAccepted = 0
    /// DPoP proofs refused (`invalid_dpop_proof`), by the check that failed: `missing`,
    /// `multiple`, `malformed`, `typ`, `alg`, `jwk`, `signature`, `claims`, `htm`, `htu`, `iat`,
    /// `ath` or `replay`. A missing or stale nonce is a nonce challenge, not a refusal.
    public var refusedDPoPProofs: [String: Int] = [:]
    /// DPoP proofs refused because their key had used their `jti` before (also counted in
    /// ``refusedDPoPProofs`` as `replay`).
    public var replayedDPoPProofs = 0
    /// Answers `use_dpop_nonce` sent: a proof without the current nonce while one is required.
    public var dpopNonceChallenges = 0
    /// Access tokens issued bound to a DPoP key (`token_type` `DPoP`).
    public var dpopBoundTokens = 0
    /// Requests to a protected resource that presented a DPoP-bound access token as a bearer
    /// token, refused (also counted in ``resourceRefusals``).
    public var boundTokenBearerRefusals = 0

    /// Empty statistics.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case tokenRequests = "token_requests"
        case tokenResponses = "token_responses"
        case revocationRequests = "revocation_requests"
        case introspectionRequests = "introspection_requests"
        case reuseDetections = "reuse_detections"
        case presentedRefreshTokens = "presented_refresh_tokens"
        case authorizationRequests = "authorization_requests"
        case reauthentications
        case deviceAuthorizations = "device_authorizations"
        case devicePolls = "device_polls"
        case slowDowns = "slow_downs"
        case guestRegistrations = "guest_registrations"
        case guestConversions = "guest_conversions"
        case userinfoAnswers = "userinfo_answers"
        case approvalRequests = "approval_requests"
        case extensionRequests = "extension_requests"
        case resourceTokenRequests = "resource_token_requests"
        case invalidTargetRefusals = "invalid_target_refusals"
        case clientCredentialsGrants = "client_credentials_grants"
        case refusedClientAuthentications = "refused_client_authentications"
        case replayedClientAssertions = "replayed_client_assertions"
        case dpopProofsAccepted = "dpop_proofs_accepted"
        case refusedDPoPProofs = "refused_dpop_proofs"
        case replayedDPoPProofs = "replayed_dpop_proofs"
        case dpopNonceChallenges = "dpop_nonce_challenges"
        case dpopBoundTokens = "dpop_bound_tokens"
        case boundTokenBearerRefusals = "bound_token_bearer_refusals"
    }
}

extension GatewayStats: CustomStringConvertible, CustomReflectable {
    /// Counters only; presented refresh tokens are redacted.
    public var description: String {
        "GatewayStats(tokenRequests: \(tokenRequests), tokenResponses: \(tokenResponses), revocationRequests: \(revocationRequests), introspectionRequests: \(introspectionRequests), reuseDetections: \(reuseDetections), presentedRefreshTokens: \(presentedRefreshTokens.count) redacted, "
            + "authorizationRequests: \(authorizationRequests), reauthentications: \(reauthentications), "
            + "deviceAuthorizations: \(deviceAuthorizations), devicePolls: \(devicePolls), slowDowns: \(slowDowns), "
            + "guestRegistrations: \(guestRegistrations), guestConversions: \(guestConversions), userinfoAnswers: \(userinfoAnswers), approvalRequests: \(approvalRequests), extensionRequests: \(extensionRequests), "
            + "resourceTokenRequests: \(resourceTokenRequests), invalidTargetRefusals: \(invalidTargetRefusals), "
            + "clientCredentialsGrants: \(clientCredentialsGrants), refusedClientAuthentications: \(refusedClientAuthentications), "
            + "replayedClientAssertions: \(replayedClientAssertions), dpopProofsAccepted: \(dpopProofsAccepted), "
            + "refusedDPoPProofs: \(refusedDPoPProofs), replayedDPoPProofs: \(replayedDPoPProofs), dpopNonceChallenges: \(dpopNonceChallenges), "
            + "dpopBoundTokens: \(dpopBoundTokens), boundTokenBearerRefusals: \(boundTokenBearerRefusals))"
    }

    /// A mirror without token values.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "tokenRequests": tokenRequests, "tokenResponses": tokenResponses,
                "revocationRequests": revocationRequests, "introspectionRequests": introspectionRequests, "reuseDetections": reuseDetections,
                "authorizationRequests": authorizationRequests, "reauthentications": reauthentications,
                "deviceAuthorizations": deviceAuthorizations, "devicePolls": devicePolls, "slowDowns": slowDowns,
                "guestRegistrations": guestRegistrations, "guestConversions": guestConversions, "userinfoAnswers": userinfoAnswers,
                "resourceTokenRequests": resourceTokenRequests, "invalidTargetRefusals": invalidTargetRefusals,
                "clientCredentialsGrants": clientCredentialsGrants, "refusedClientAuthentications": refusedClientAuthentications,
                "replayedClientAssertions": replayedClientAssertions, "dpopProofsAccepted": dpopProofsAccepted,
                "refusedDPoPProofs": refusedDPoPProofs, "replayedDPoPProofs": replayedDPoPProofs,
                "dpopNonceChallenges": dpopNonceChallenges, "dpopBoundTokens": dpopBoundTokens,
                "boundTokenBearerRefusals": boundTokenBearerRefusals,
            ], displayStyle: .struct)
    }
}
