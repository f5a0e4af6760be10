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
    /// Token requests answered (after any latency), whatever the outcome.
    public var tokenResponses = 0
    /// Requests received on `/oauth/revoke`.
    public var revocationRequests = 0
    /// Times a rotated refresh token was presented again and its family revoked.
    public var reuseDetections = 0
    /// Every `refresh_token` parameter received on `/oauth/token`, in arrival order.
    public var presentedRefreshTokens: [String] = []

    /// Empty statistics.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case tokenRequests = "token_requests"
        case tokenResponses = "token_responses"
        case revocationRequests = "revocation_requests"
        case reuseDetections = "reuse_detections"
        case presentedRefreshTokens = "presented_refresh_tokens"
    }
}

extension GatewayStats: CustomStringConvertible, CustomReflectable {
    /// Counters only; presented refresh tokens are redacted.
    public var description: String {
        "GatewayStats(tokenRequests: \(tokenRequests), tokenResponses: \(tokenResponses), revocationRequests: \(revocationRequests), reuseDetections: \(reuseDetections), presentedRefreshTokens: \(presentedRefreshTokens.count) redacted)"
    }

    /// A mirror without token values.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "tokenRequests": tokenRequests, "tokenResponses": tokenResponses,
            "revocationRequests": revocationRequests, "reuseDetections": reuseDetections,
        ], displayStyle: .struct)
    }
}
