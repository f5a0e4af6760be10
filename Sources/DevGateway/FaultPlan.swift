/// Faults to inject: queued failures for token and revocation requests, token latency,
/// whether token responses are held back until released, and how resource indicators
/// (RFC 8707) are honoured.
struct FaultPlan: Sendable {
    /// Failures for the next token requests, first one first.
    var pendingTokenFailures: [TokenFault] = []
    /// Failures for the next revocation requests, first one first.
    var pendingRevocationFailures: [TokenFault] = []
    /// Delay before each token response.
    var tokenLatency: Duration = .zero
    /// Defects for the next ID tokens issued, first one first.
    var pendingIDTokenFaults: [IDTokenFault] = []
    /// Whether token requests, once counted, wait for ``DevGateway/releaseTokenResponses()``.
    var holdsTokenResponses = false
    /// Whether a `resource` parameter is accepted but ignored: the access token is for
    /// ``DevGateway/apiResource`` whatever was asked.
    var ignoresResourceIndicators = false
    /// The kind of access token issued for a token request with `resource`.
    var resourceTokenFormat = ResourceTokenFormat.jwt

    /// Takes the failure for the token request that just arrived, if one is queued.
    mutating func takeTokenFailure() -> TokenFault? {
        pendingTokenFailures.isEmpty ? nil : pendingTokenFailures.removeFirst()
    }

    /// Takes the defect for the ID token about to be issued, if one is queued.
    mutating func takeIDTokenFault() -> IDTokenFault? {
        pendingIDTokenFaults.isEmpty ? nil : pendingIDTokenFaults.removeFirst()
    }

    /// Takes the failure for the revocation request that just arrived, if one is queued.
    mutating func takeRevocationFailure() -> TokenFault? {
        pendingRevocationFailures.isEmpty ? nil : pendingRevocationFailures.removeFirst()
    }
}
