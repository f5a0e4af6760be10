/// A signature algorithm for the gateway's ID-token signing keys (RFC 7518 §3, RFC 8037 §3.1).
///
/// ```swift
/// let kid = await gateway.rotateSigningKey(algorithm: .rs256)
/// ```
public enum SigningAlgorithm: String, Sendable, Hashable, CaseIterable, Codable {
    /// ECDSA with P-256 and SHA-256.
    case es256 = "ES256"
    /// RSASSA-PKCS1-v1_5 with SHA-256, a 2048-bit key.
    case rs256 = "RS256"
    /// Ed25519.
    case eddsa = "EdDSA"
}
