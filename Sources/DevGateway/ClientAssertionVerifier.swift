import Foundation
import JWTKit

/// Checks a `private_key_jwt` client assertion (RFC 7523 §3, OpenID Connect Core §9): an ES256
/// signature by one of the client's registered keys (JWTKit), then the claims.
///
/// - the header's `alg` is `ES256`, it has no `crit`; with a `kid`, only the key with that
///   `kid` is tried, without one every registered key is;
/// - `iss` and `sub` are the client id;
/// - `aud` contains one of ``audiences`` (the token endpoint as discovery publishes it, the
///   issuer, and at the revocation endpoint that endpoint too);
/// - `exp` is later than now less ``allowedSkew``, and at most ``maximumLifetime`` after `iat`
///   (after now when there is no `iat`); `iat` and `nbf`, when present, are not later than now
///   plus ``allowedSkew``;
/// - `jti` is present (whether it was used before is the registry's question, asked after
///   this check passes).
///
/// A refusal says which check failed, never the assertion.
///
/// ```swift
/// let verifier = ClientAssertionVerifier(
///     clientID: "indexer", keys: keys, audiences: [tokenEndpoint, issuer], now: now)
/// switch await verifier.verify(assertion) { … }
/// ```
struct ClientAssertionVerifier: Sendable {
    /// `client_assertion_type` for a JWT (RFC 7523 §2.2).
    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// How far the client's clock may be from the gateway's.
    static let allowedSkew: TimeInterval = 60
    /// The longest an assertion may be valid for, `iat` to `exp`.
    static let maximumLifetime: TimeInterval = 600

    let clientID: String
    let keys: [ClientAssertionKey]
    /// The `aud` values accepted, compared exactly.
    let audiences: Set<String>
    let now: Date

    /// A valid assertion: the key that signed it, its `jti`, and when it may be forgotten
    /// (after that it is refused as expired).
    struct Accepted: Sendable {
        let key: ClientAssertionKey
        let jti: String
        let forgetAfter: Date
    }

    /// The assertion's checks, in order; the first that fails is the refusal's reason.
    func verify(_ assertion: String) async -> Result<Accepted, AssertionRefusal> {
        let header: AssertionHeader
        switch AssertionHeader.read(assertion) {
        case .success(let value): header = value
        case .failure(let refusal): return .failure(refusal)
        }
        let candidates = header.kid.map { kid in keys.filter { $0.kid == kid } } ?? keys
        guard !candidates.isEmpty else {
            return .failure(AssertionRefusal("no key registered for the client has the assertion's kid"))
        }
        for key in candidates {
            let collection = JWTKeyCollection()
            await collection.add(ecdsa: key.publicKey, kid: key.kid.map { JWKIdentifier(string: $0) })
            guard let claims = try? await collection.verify(assertion, as: ClientAssertionClaims.self) else { continue }
            return check(claims).map { jti, forgetAfter in Accepted(key: key, jti: jti, forgetAfter: forgetAfter) }
        }
        return .failure(AssertionRefusal("the assertion's signature does not verify with a key registered for the client"))
    }

    /// The claims' checks; the `jti` and when it may be forgotten.
    func check(_ claims: ClientAssertionClaims) -> Result<(String, Date), AssertionRefusal> {
        let now = now.timeIntervalSince1970
        guard claims.iss == clientID, claims.sub == clientID else {
            return .failure(AssertionRefusal("the assertion's iss and sub must both be the client id"))
        }
        guard let aud = claims.aud?.value, aud.contains(where: { audiences.contains($0) }) else {
            return .failure(AssertionRefusal("the assertion's aud must contain the token endpoint URL or the issuer"))
        }
        guard let exp = claims.exp else {
            return .failure(AssertionRefusal("the assertion has no exp"))
        }
        guard exp > now - Self.allowedSkew else {
            return .failure(AssertionRefusal("the assertion has expired"))
        }
        if let iat = claims.iat, iat > now + Self.allowedSkew {
            return .failure(AssertionRefusal("the assertion was issued in the future (iat)"))
        }
        if let nbf = claims.nbf, nbf > now + Self.allowedSkew {
            return .failure(AssertionRefusal("the assertion is not valid yet (nbf)"))
        }
        guard exp - (claims.iat ?? now) <= Self.maximumLifetime else {
            return .failure(AssertionRefusal("the assertion is valid for more than 10 minutes"))
        }
        guard let jti = claims.jti, !jti.isEmpty else {
            return .failure(AssertionRefusal("the assertion has no jti"))
        }
        return .success((jti, Date(timeIntervalSince1970: exp + Self.allowedSkew)))
    }

    /// The client id an assertion names (`sub`), read without checking anything: to find the
    /// client whose keys to check it with when the body has no `client_id`.
    static func claimedClientID(of assertion: String) -> String? {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = TokenMint.base64URLDecode(parts[1]) else { return nil }
        return (try? JSONDecoder().decode(ClientAssertionClaims.self, from: Data(payload)))?.sub
    }
}

/// Why an assertion was refused: which check failed, without the assertion.
struct AssertionRefusal: Error, Sendable, Hashable {
    let reason: String

    init(_ reason: String) { self.reason = reason }
}

/// The claims of a client assertion (RFC 7523 §3), every one optional so that a missing one
/// is named. Times are seconds since 1970, fractions allowed (RFC 7519 §2 NumericDate).
struct ClientAssertionClaims: JWTPayload {
    var iss: String?
    var sub: String?
    /// A string or an array of strings (RFC 7519 §4.1.3).
    var aud: AudienceClaim?
    var exp: Double?
    var iat: Double?
    var nbf: Double?
    var jti: String?

    /// The verifier checks the claims itself, after the signature.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The JOSE header of an assertion, read before any key is tried.
private struct AssertionHeader: Decodable {
    let alg: String?
    let kid: String?
    let crit: [String]?

    /// The header, if the assertion is a compact JWS whose `alg` is ES256 and that has no `crit`.
    static func read(_ assertion: String) -> Result<AssertionHeader, AssertionRefusal> {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = TokenMint.base64URLDecode(parts[0]),
            let header = try? JSONDecoder().decode(AssertionHeader.self, from: Data(bytes))
        else {
            return .failure(AssertionRefusal("client_assertion is not a compact JWS"))
        }
        guard header.alg == "ES256" else {
            return .failure(AssertionRefusal("the assertion must be signed with ES256"))
        }
        guard header.crit == nil else {
            return .failure(AssertionRefusal("the assertion has critical header parameters this gateway does not understand"))
        }
        return .success(header)
    }
}
