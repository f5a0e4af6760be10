import Foundation

/// The gateway's DPoP state (RFC 9449): whether proofs are required (of every client or of
/// some), whether a nonce is required and the current one, and the proofs already accepted, so
/// that none is accepted twice (§11.1). Pure value logic: the ``DevGateway`` actor owns the
/// only instance.
struct DPoPLedger: Sendable {
    /// A used proof: the thumbprint of the key that signed it and its `jti`.
    private struct ProofID: Hashable, Sendable {
        let thumbprint: String
        let jti: String
    }

    /// Whether every proof must carry ``nonce`` (§8, §9).
    var requiresNonce = false
    /// The nonce proofs must carry while ``requiresNonce``; sent as `DPoP-Nonce`.
    private(set) var nonce = DPoPLedger.newNonce()
    /// Whether every token request must carry a proof.
    var requiredOfEveryClient = false
    /// Whether the token endpoint behaves as a server without DPoP: proofs unread, bearer
    /// tokens issued.
    var ignored = false
    /// Clients whose token requests must carry a proof.
    private(set) var requiringClients: Set<String> = []
    /// Accepted proofs and when each may be forgotten (its `iat` plus the allowed skew: after
    /// that it is refused for its `iat` anyway).
    private var usedProofs: [ProofID: Date] = [:]

    /// Replaces the nonce: proofs with the previous one are answered `use_dpop_nonce`.
    mutating func rotateNonce() {
        nonce = Self.newNonce()
    }

    /// Makes `clientID`'s token requests carry a proof from now on.
    mutating func requireProofs(of clientID: String) {
        requiringClients.insert(clientID)
    }

    /// Whether a token request of `clientID` must carry a proof.
    func requiresProof(of clientID: String) -> Bool {
        requiredOfEveryClient || requiringClients.contains(clientID)
    }

    /// Records the proof `jti` of the key with `thumbprint`, remembered until `forgetAfter`;
    /// false, recording nothing, if that key used it before and it has not been forgotten.
    /// Forgets the proofs that can no longer be accepted.
    mutating func recordProof(thumbprint: String, jti: String, forgetAfter: Date, now: Date) -> Bool {
        usedProofs = usedProofs.filter { $0.value >= now }
        let id = ProofID(thumbprint: thumbprint, jti: jti)
        guard usedProofs[id] == nil else { return false }
        usedProofs[id] = forgetAfter
        return true
    }

    /// 128 random bits in base64url: only characters a nonce may have (RFC 9449 §8.1 NQCHAR).
    private static func newNonce() -> String {
        TokenMint.base64URL(TokenMint.randomBytes(16))
    }
}
