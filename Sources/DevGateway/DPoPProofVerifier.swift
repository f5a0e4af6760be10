import Crypto
import Foundation
import JWTKit

/// Checks a DPoP proof (RFC 9449 §4.3): the JWS of a request's `DPoP` header, signed by the
/// public key in its own header (JWTKit), then its claims against the request.
///
/// - the header's `typ` is `dpop+jwt`, its `alg` one of ``algorithms``, it has no `crit`, and
///   its `jwk` is a public key of that algorithm's type (EC P-256 for ES256, OKP Ed25519 for
///   EdDSA, RSA of 2048 bits or more for RS256) with no private member;
/// - the signature verifies with that key;
/// - `jti` is present (whether the key used it before is the ledger's question, asked after
///   this check passes: ``DPoPLedger/recordProof(thumbprint:jti:forgetAfter:now:)``);
/// - `htm` is the request's method and `htu` the gateway's own URL for the request's path,
///   compared without query and fragment (scheme and host in any case, default ports filled in);
/// - `iat` is within ``allowedSkew`` of now;
/// - `ath` is BASE64URL(SHA-256(access token)) when the request presents ``accessToken``;
/// - `nonce` is ``nonce`` when the gateway requires one (a refusal with reason
///   ``DPoPProofRefusal/Reason/nonce`` is answered `use_dpop_nonce`, not `invalid_dpop_proof`).
///
/// A refusal names the check that failed, never the proof.
///
/// ```swift
/// let verifier = DPoPProofVerifier(method: "POST", url: tokenEndpoint.absoluteString, now: now)
/// switch await verifier.verify(proof) {
/// case .success(let proof): bind(to: proof.thumbprint)
/// case .failure(let refusal): answer(refusal)
/// }
/// ```
struct DPoPProofVerifier: Sendable {
    /// The JWS header's `typ` (RFC 9449 §4.2).
    static let headerType = "dpop+jwt"
    /// How far a proof's `iat` may be from the gateway's clock, either way.
    static let allowedSkew: TimeInterval = 60
    /// The `alg` values accepted, as discovery publishes them (`dpop_signing_alg_values_supported`).
    static let algorithms = ["ES256", "EdDSA", "RS256"]

    /// The request's method, compared exactly with `htm`.
    let method: String
    /// The gateway's absolute URL for the request's path.
    let url: String
    let now: Date
    /// The access token the request presents: the proof must carry its hash (`ath`).
    var accessToken: String?
    /// The nonce the gateway requires (RFC 9449 §8), or nil when it requires none.
    var nonce: String?

    /// The checks, in order; the first that fails is the refusal's reason.
    func verify(_ proof: String) async -> Result<DPoPProof, DPoPProofRefusal> {
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }),
            let headerBytes = TokenMint.base64URLDecode(parts[0]),
            let header = try? JSONDecoder().decode(DPoPProofHeader.self, from: Data(headerBytes)),
            let payloadBytes = TokenMint.base64URLDecode(parts[1]),
            let claims = try? JSONDecoder().decode(DPoPProofClaims.self, from: Data(payloadBytes))
        else {
            return .failure(DPoPProofRefusal(.malformed, "the DPoP proof is not a compact JWS with JSON header and claims"))
        }
        guard header.typ?.lowercased() == Self.headerType else {
            return .failure(DPoPProofRefusal(.type, "the DPoP proof's typ must be dpop+jwt"))
        }
        guard let alg = header.alg, Self.algorithms.contains(alg) else {
            return .failure(DPoPProofRefusal(.algorithm, "the DPoP proof's alg must be one of \(Self.algorithms.joined(separator: ", "))"))
        }
        guard header.crit == nil else {
            return .failure(DPoPProofRefusal(.type, "the DPoP proof has critical header parameters this gateway does not understand"))
        }
        let key: DPoPProofKey
        switch DPoPProofKey.read(header.jwk, alg: alg) {
        case .success(let value): key = value
        case .failure(let refusal): return .failure(refusal)
        }
        guard await key.verifies(proof) else {
            return .failure(DPoPProofRefusal(.signature, "the DPoP proof's signature does not verify with the key in its header"))
        }
        return check(claims).map { jti, iat in
            DPoPProof(thumbprint: key.thumbprint, jti: jti, forgetAfter: Date(timeIntervalSince1970: iat + Self.allowedSkew))
        }
    }

    /// The claims' checks, after the signature; the `jti` and `iat`.
    func check(_ claims: DPoPProofClaims) -> Result<(String, TimeInterval), DPoPProofRefusal> {
        guard let jti = claims.jti, !jti.isEmpty else {
            return .failure(DPoPProofRefusal(.claims, "the DPoP proof has no jti"))
        }
        guard claims.htm == method else {
            return .failure(DPoPProofRefusal(.method, "the DPoP proof's htm must be \(method), the method of this request"))
        }
        guard let htu = claims.htu, Self.isSameResource(htu, url) else {
            return .failure(DPoPProofRefusal(.url, "the DPoP proof's htu must be \(url), the URL of this request without query or fragment"))
        }
        guard let iat = claims.iat else {
            return .failure(DPoPProofRefusal(.claims, "the DPoP proof has no iat"))
        }
        guard abs(iat - now.timeIntervalSince1970) <= Self.allowedSkew else {
            return .failure(DPoPProofRefusal(.time, "the DPoP proof's iat is more than 60 s from the server's time; make a new proof"))
        }
        if let accessToken {
            guard let ath = claims.ath, TokenMint.constantTimeEquals(ath, Self.accessTokenHash(accessToken)) else {
                return .failure(DPoPProofRefusal(.tokenHash, "the DPoP proof's ath must be the base64url SHA-256 of the access token"))
            }
        }
        if let nonce {
            guard let presented = claims.nonce, TokenMint.constantTimeEquals(presented, nonce) else {
                let description =
                    claims.nonce == nil
                    ? "the server requires a nonce in the DPoP proof: use the DPoP-Nonce of this response"
                    : "the DPoP proof's nonce is not the current one: use the DPoP-Nonce of this response"
                return .failure(DPoPProofRefusal(.nonce, description))
            }
        }
        return .success((jti, iat))
    }

    /// BASE64URL(SHA-256(ASCII(token))): a proof's `ath` (RFC 9449 §4.2).
    static func accessTokenHash(_ token: String) -> String {
        TokenMint.base64URL(Array(SHA256.hash(data: Data(token.utf8))))
    }

    /// Whether `htu` names the same resource as `url`, query and fragment ignored (RFC 9449
    /// §4.3 step 9): scheme and host compared without case, an absent port as the scheme's
    /// default, an empty path as `/`; the path itself exactly.
    static func isSameResource(_ htu: String, _ url: String) -> Bool {
        guard let presented = ResourceLocation(htu), let expected = ResourceLocation(url) else { return false }
        return presented == expected
    }

    /// The parts of an `http` or `https` URL that `htu` is compared on.
    private struct ResourceLocation: Equatable {
        let scheme: String
        let host: String
        let port: Int
        let path: String

        init?(_ text: String) {
            guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
                let host = components.host?.lowercased(), !host.isEmpty
            else { return nil }
            let defaultPort: Int
            switch scheme {
            case "http": defaultPort = 80
            case "https": defaultPort = 443
            default: return nil
            }
            self.scheme = scheme
            self.host = host
            self.port = components.port ?? defaultPort
            self.path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        }
    }
}

/// A proof that passed every check but replay: the thumbprint of its key (RFC 7638), its
/// `jti`, and when the ledger may forget the `jti` (after that the proof is refused for its
/// `iat` anyway).
struct DPoPProof: Sendable, Hashable {
    let thumbprint: String
    let jti: String
    let forgetAfter: Date
}

/// Why a proof was refused: which check failed (counted by ``Reason``) and what to do, without
/// the proof.
struct DPoPProofRefusal: Error, Sendable, Hashable {
    /// The check that failed, as counted in ``GatewayStats/refusedDPoPProofs``.
    enum Reason: String, Sendable, Hashable {
        /// A protected request or a client that must use DPoP sent no `DPoP` header.
        case missing
        /// More than one proof in the `DPoP` header.
        case multiple
        /// Not a compact JWS with a JSON header and claims.
        case malformed
        /// `typ` is not `dpop+jwt`, or the header has `crit`.
        case type = "typ"
        case algorithm = "alg"
        /// No `jwk`, one of another type than `alg`, one with private members, or no valid key.
        case key = "jwk"
        case signature
        /// `jti` or `iat` missing.
        case claims
        case method = "htm"
        case url = "htu"
        case time = "iat"
        case tokenHash = "ath"
        /// Answered `use_dpop_nonce`, counted in ``GatewayStats/dpopNonceChallenges`` instead.
        case nonce
        /// The key used the `jti` before (also in ``GatewayStats/replayedDPoPProofs``).
        case replay
    }

    let reason: Reason
    let description: String

    init(_ reason: Reason, _ description: String) {
        self.reason = reason
        self.description = description
    }

    /// The OAuth error code that answers it (RFC 9449 §5, §7.1, §8).
    var error: String { reason == .nonce ? "use_dpop_nonce" : "invalid_dpop_proof" }
}

/// The claims of a proof, every one optional so that a missing one is named. `iat` is seconds
/// since 1970, fractions allowed (RFC 7519 §2 NumericDate).
struct DPoPProofClaims: JWTPayload {
    var jti: String?
    var htm: String?
    var htu: String?
    var iat: Double?
    var ath: String?
    var nonce: String?

    /// The verifier checks the claims itself, after the signature.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The JOSE header of a proof, read before its signature is checked.
private struct DPoPProofHeader: Decodable {
    let typ: String?
    let alg: String?
    let crit: [String]?
    let jwk: DPoPProofJWK?
}

/// The `jwk` of a proof's header (RFC 7517 §4, RFC 7518 §6): public members by key type, and
/// whether any private member is there.
private struct DPoPProofJWK: Decodable {
    let kty: String?
    let crv: String?
    let x: String?
    let y: String?
    let n: String?
    let e: String?
    /// Whether the JWK has a private member (`d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`) or is a
    /// symmetric key (`k`).
    let hasPrivateMembers: Bool

    private static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    private struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        func string(_ name: String) throws -> String? { try container.decodeIfPresent(String.self, forKey: AnyKey(stringValue: name)) }
        kty = try string("kty")
        crv = try string("crv")
        x = try string("x")
        y = try string("y")
        n = try string("n")
        e = try string("e")
        hasPrivateMembers = container.allKeys.contains { Self.privateMembers.contains($0.stringValue) }
    }
}

/// The public key a proof carries, of the type its `alg` needs, with its RFC 7638 thumbprint.
private struct DPoPProofKey {
    /// Adds the key to a collection, as the default key.
    let add: @Sendable (JWTKeyCollection) async -> Void
    /// BASE64URL(SHA-256) of the JSON of the key's required members in lexicographic order,
    /// without whitespace (RFC 7638 §3): the `jkt` of tokens bound to it.
    let thumbprint: String

    /// The key of `jwk` for `alg`; a refusal for a missing key, one of another type, private
    /// material, or members that make no valid key.
    static func read(_ jwk: DPoPProofJWK?, alg: String) -> Result<DPoPProofKey, DPoPProofRefusal> {
        func refused(_ description: String) -> Result<DPoPProofKey, DPoPProofRefusal> {
            .failure(DPoPProofRefusal(.key, description))
        }
        guard let jwk else { return refused("the DPoP proof's header has no jwk") }
        guard !jwk.hasPrivateMembers else { return refused("the DPoP proof's jwk holds private key material; send the public key only") }
        switch (alg, jwk.kty) {
        case ("ES256", "EC"):
            guard jwk.crv == "P-256", let x = jwk.x, let y = jwk.y, let key = try? ES256PublicKey(parameters: (x: x, y: y)) else {
                return refused("the DPoP proof's jwk is not a valid EC P-256 public key (crv, x, y)")
            }
            return .success(
                DPoPProofKey(
                    add: { await $0.add(ecdsa: key) },
                    thumbprint: thumbprint(of: [("crv", "P-256"), ("kty", "EC"), ("x", x), ("y", y)])))
        case ("EdDSA", "OKP"):
            guard jwk.crv == "Ed25519", let x = jwk.x, let key = try? EdDSA.PublicKey(x: x, curve: .ed25519) else {
                return refused("the DPoP proof's jwk is not a valid OKP Ed25519 public key (crv, x)")
            }
            return .success(
                DPoPProofKey(
                    add: { await $0.add(eddsa: key) },
                    thumbprint: thumbprint(of: [("crv", "Ed25519"), ("kty", "OKP"), ("x", x)])))
        case ("RS256", "RSA"):
            guard let n = jwk.n, let e = jwk.e, let key = try? Insecure.RSA.PublicKey(modulus: n, exponent: e) else {
                return refused("the DPoP proof's jwk is not a valid RSA public key of 2048 bits or more (n, e)")
            }
            return .success(
                DPoPProofKey(
                    add: { await $0.add(rsa: key, digestAlgorithm: .sha256) },
                    thumbprint: thumbprint(of: [("e", e), ("kty", "RSA"), ("n", n)])))
        default:
            return refused("the DPoP proof's jwk is not a key for \(alg) (ES256: EC P-256, EdDSA: OKP Ed25519, RS256: RSA)")
        }
    }

    /// Whether `proof`'s signature verifies with this key.
    func verifies(_ proof: String) async -> Bool {
        let collection = JWTKeyCollection()
        await add(collection)
        return (try? await collection.verify(proof, as: DPoPProofClaims.self)) != nil
    }

    /// RFC 7638 §3.2-3.3: `members` already in lexicographic order, each value a JSON string.
    static func thumbprint(of members: [(String, String)]) -> String {
        let json = "{" + members.map { "\"\($0)\":\(jsonString($1))" }.joined(separator: ",") + "}"
        return TokenMint.base64URL(Array(SHA256.hash(data: Data(json.utf8))))
    }

    /// `text` as a JSON string: quoted, with `"`, `\` and control characters escaped.
    private static func jsonString(_ text: String) -> String {
        var escaped = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }
}
