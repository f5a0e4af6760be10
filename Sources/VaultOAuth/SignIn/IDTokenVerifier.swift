import Foundation
import JWTKit
import Logging
import VaultCrypto

/// Checks ID tokens (OpenID Connect Core §3.1.3.7) against the provider's published keys.
///
/// The signature is verified by vapor/jwt-kit; this type chooses the key and refuses what a
/// verifier must refuse first: `alg` `none` and symmetric algorithms (a client id is not a
/// secret), a key whose type, `alg` or `use` does not fit the header, a header naming
/// extensions it does not understand (`crit`). The provider's JWKS is fetched on first use and
/// cached; a `kid` not in the cache fetches it again, once per token (key rotation).
///
/// ```swift
/// let verifier = IDTokenVerifier(oauth: oauth)
/// let claims = try await verifier.verify(idToken, jwksURI: metadata.jwksURI!,
///                                        expecting: IDTokenExpectations(issuer: metadata.issuer, clientID: "cli", nonce: nonce, now: Date()))
/// ```
public actor IDTokenVerifier {
    private let oauth: OAuthClient
    private var keySets: [URL: [PublishedKey]] = [:]

    struct PublishedKey: Sendable {
        var jwk: JWK
        var use: String?
    }

    public init(oauth: OAuthClient) {
        self.oauth = oauth
    }

    /// Verifies `token` and returns its claims, or throws the first check that failed.
    public func verify(
        _ token: String, jwksURI: URL, expecting expected: IDTokenExpectations,
        pins: [SPKIPin] = []
    ) async throws(IDTokenFailure) -> VerifiedIDToken {
        let header = try Self.header(of: token)
        guard expected.algorithms.contains(header.alg) else { throw .algorithmRefused(header.alg) }

        var key = try await self.key(for: header, jwksURI: jwksURI, pins: pins, refetch: false)
        if key == nil { key = try await self.key(for: header, jwksURI: jwksURI, pins: pins, refetch: true) }
        guard let key else { throw .unknownKey(kid: header.kid) }

        let claims: IDTokenClaims
        do {
            let keys = try await JWTKeyCollection().add(jwk: key, isDefault: true)
            claims = try await keys.verify(token, as: IDTokenClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw .signature
        } catch let error as JWTError where error.errorType == .malformedToken {
            throw .malformed(reason: "its claims are not a JSON object of the expected types")
        } catch {
            // A key jwt-kit cannot use (a short RSA modulus, a bad point): nothing verified.
            throw .signature
        }
        return try Self.check(claims, expected)
    }

    // MARK: - Header

    struct Header {
        var alg: String
        var kid: String?
    }

    static func header(of token: String) throws(IDTokenFailure) -> Header {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, token.utf8.count <= TokenResponse.maximumBodySize else {
            throw .malformed(reason: "it does not have three parts")
        }
        guard let data = Base64URL.decode(parts[0]).map({ Data($0) }),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else {
            throw .malformed(reason: "its header is not base64url JSON")
        }
        guard let alg = object["alg"] as? String else { throw .malformed(reason: "its header has no alg") }
        if object["crit"] != nil { throw .malformed(reason: "its header names critical extensions (crit) this client does not implement") }
        if let kid = object["kid"], !(kid is String) { throw .malformed(reason: "its kid is not a string") }
        return Header(alg: alg, kid: object["kid"] as? String)
    }

    // MARK: - Keys

    /// The one published key that fits the header, or nil. `refetch` fetches the JWKS first.
    private func key(for header: Header, jwksURI: URL, pins: [SPKIPin], refetch: Bool) async throws(IDTokenFailure) -> JWK? {
        if refetch || keySets[jwksURI] == nil {
            keySets[jwksURI] = try await fetch(jwksURI, pins: pins)
        }
        let fitting = (keySets[jwksURI] ?? []).filter { Self.fits($0, header) }
        if let kid = header.kid {
            return fitting.first { $0.jwk.keyIdentifier?.string == kid }?.jwk
        }
        // No kid: acceptable only when exactly one key could have signed it (OIDC Core §10.1).
        return fitting.count == 1 ? fitting[0].jwk : nil
    }

    /// Whether `key` may verify a signature made with the header's algorithm.
    static func fits(_ key: PublishedKey, _ header: Header) -> Bool {
        if let use = key.use, use != "sig" { return false }
        if let alg = key.jwk.algorithm, alg.rawValue != header.alg { return false }
        switch header.alg {
        case "RS256": return key.jwk.keyType == .rsa
        case "ES256": return key.jwk.keyType == .ecdsa && key.jwk.curve?.rawValue == "P-256"
        case "EdDSA": return key.jwk.keyType == .octetKeyPair && key.jwk.curve?.rawValue == "Ed25519"
        default: return false
        }
    }

    private func fetch(_ jwksURI: URL, pins: [SPKIPin]) async throws(IDTokenFailure) -> [PublishedKey] {
        if let reason = EndpointRule.violation(jwksURI) { throw .keySetUnavailable(reason: "jwks_uri is refused: \(reason)") }
        let response: HTTPResponse
        do {
            let request = HTTPRequest(method: .get, url: jwksURI, headers: ["Accept": "application/json"], pins: pins)
            response = try await oauth.transport.send(request, deadline: oauth.requestDeadline, clock: oauth.clock)
        } catch {
            throw .keySetUnavailable(reason: TransientFailure(transportFailure: error).map(\.description) ?? "no answer")
        }
        guard response.isSuccess else { throw .keySetUnavailable(reason: "HTTP \(response.status)") }
        guard response.body.count <= TokenResponse.maximumBodySize,
            let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any],
            let keys = object["keys"] as? [Any]
        else {
            throw .keySetUnavailable(reason: "the document is not a JSON object with a keys array")
        }
        // Keys of a type this client does not use (oct, RSA-OAEP encryption keys) are skipped,
        // not fatal: providers publish them beside their signing keys.
        let published: [PublishedKey] = keys.compactMap { entry in
            guard let member = entry as? [String: Any],
                let data = try? JSONSerialization.data(withJSONObject: member),
                let jwk = try? JSONDecoder().decode(JWK.self, from: data)
            else { return nil }
            return PublishedKey(jwk: jwk, use: member["use"] as? String)
        }
        oauth.logger.debug("JWKS fetched", metadata: ["oauth.endpoint": "\(jwksURI.hostAndPath)", "oauth.keys": "\(published.count)"])
        return published
    }

    // MARK: - Claims

    static func check(_ claims: IDTokenClaims, _ expected: IDTokenExpectations) throws(IDTokenFailure) -> VerifiedIDToken {
        guard let issuer = claims.iss else { throw .missingClaim("iss") }
        guard issuer == expected.issuer else { throw .issuer(expected: expected.issuer, found: issuer) }
        guard let subject = claims.sub, !subject.isEmpty else { throw .missingClaim("sub") }
        guard let audience = claims.aud, !audience.isEmpty else { throw .missingClaim("aud") }
        guard audience.contains(expected.clientID) else { throw .audience(clientID: expected.clientID) }
        if let azp = claims.azp {
            guard azp == expected.clientID else { throw .authorizedParty(clientID: expected.clientID) }
        } else if audience.count > 1 {
            throw .authorizedParty(clientID: expected.clientID)
        }
        guard let exp = claims.exp else { throw .missingClaim("exp") }
        guard let iat = claims.iat else { throw .missingClaim("iat") }
        let skew = expected.skew.seconds
        guard !expected.checksExpiry || expected.now.timeIntervalSince(exp) < skew else { throw .expired(at: exp) }
        guard iat.timeIntervalSince(expected.now) <= skew else { throw .issuedInFuture(at: iat) }
        if let nonce = expected.nonce {
            guard let got = claims.nonce, ConstantTime.equals(got, nonce) else { throw .nonce }
        }
        if let maxAge = expected.maxAge {
            guard let authTime = claims.authTime,
                expected.now.timeIntervalSince(authTime) <= maxAge.seconds + skew
            else { throw .authenticationTooOld }
        }
        return VerifiedIDToken(
            issuer: issuer, subject: subject, audience: audience, expiresAt: exp, issuedAt: iat, authTime: claims.authTime,
            nonce: claims.nonce, email: claims.email, name: claims.name, preferredUsername: claims.preferredUsername,
            isGuest: claims.guest ?? false)
    }

}

/// An ID token's claims as sent, each optional so a missing one is reported by name, not as
/// a decoding error. `aud` may be a string or an array (RFC 7519 §4.1.3); times are seconds.
struct IDTokenClaims: JWTPayload {
    var iss: String?
    var sub: String?
    var aud: [String]?
    var azp: String?
    var exp: Date?
    var iat: Date?
    var authTime: Date?
    var nonce: String?
    var email: String?
    var name: String?
    var preferredUsername: String?
    var guest: Bool?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, azp, exp, iat, nonce, email, name, guest
        case authTime = "auth_time"
        case preferredUsername = "preferred_username"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func string(_ key: CodingKeys) -> String? { try? container.decodeIfPresent(String.self, forKey: key) }
        func time(_ key: CodingKeys) -> Date? {
            (try? container.decodeIfPresent(Double.self, forKey: key)).flatMap { $0.map(Date.init(timeIntervalSince1970:)) }
        }
        iss = string(.iss)
        sub = string(.sub)
        if let single = string(.aud) {
            aud = [single]
        } else {
            aud = try? container.decodeIfPresent([String].self, forKey: .aud)
        }
        azp = string(.azp)
        exp = time(.exp)
        iat = time(.iat)
        authTime = time(.authTime)
        nonce = string(.nonce)
        email = string(.email)
        name = string(.name)
        preferredUsername = string(.preferredUsername)
        guest = try? container.decodeIfPresent(Bool.self, forKey: .guest)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(iss, forKey: .iss)
        try container.encodeIfPresent(sub, forKey: .sub)
    }

    /// The checks are made by ``IDTokenVerifier/check(_:_:)``, where each gets its own error.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

extension Duration {
    /// The duration in seconds, fractions included.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
