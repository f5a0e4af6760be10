import Crypto
import Foundation
import VaultOAuth

/// Issue 35: one DPoP proof (RFC 9449 §4.2, `DPoPKey.proof`: claims, JSON, the JWS, a random
/// `jti`, the `ath` hash) against the one ES256 signature inside it, over a message of the same
/// size, made with the same library (swift-crypto's P-256, which jwt-kit signs with).
func benchDPoPProof(_ report: Report, scale: Scale) async throws {
    log("== one DPoP proof")
    let key = DPoPKey.generate()
    guard let url = URL(string: "https://api.example.test/v1/files?page=2") else { throw BenchError("no URL") }
    let token = randomString(43)
    let issued = Date(timeIntervalSince1970: 1_790_000_000)
    let sample = try key.proof(method: "GET", url: url, accessToken: token, nonce: "n-0S6_WzA2Mj", now: issued)
    // The signing input of a proof: everything before its last dot.
    let signingInput = Data(sample.split(separator: ".").prefix(2).joined(separator: ".").utf8)
    let baselineKey = P256.Signing.PrivateKey()
    let proof = Operation { _ = try key.proof(method: "GET", url: url, accessToken: token, nonce: "n-0S6_WzA2Mj", now: issued) }
    let signature = Operation { _ = try baselineKey.signature(for: signingInput) }
    let iterations = max(200, scale.coldIterations * 4)
    let pair = try await measurePair(warmup: 50, iterations: iterations, proof, signature)
    let ratio = pair.vault.p50 / pair.baseline.p50
    report.add(
        Figure(
            figure: "one DPoP proof (vs one ES256 signature)", vault: pair.vault.p50 / 1e3, baseline: pair.baseline.p50 / 1e3,
            unit: "µs p50", ratio: ratio, target: "<= 2.0", met: ratio <= 2.0,
            detail:
                "p99 \(fmt(pair.vault.p99 / 1e3)) vs \(fmt(pair.baseline.p99 / 1e3)) µs, n=\(iterations)+\(iterations); "
                + "\(signingInput.count)-byte signing input"))
}
