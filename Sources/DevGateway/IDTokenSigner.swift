import Crypto
import Foundation
import JWTKit

/// The claims of an ID token the gateway issues (OpenID Connect Core §2). Times are whole
/// seconds since 1970, as JSON numbers.
struct IDTokenClaims: JWTPayload, Hashable {
    var iss: String
    var sub: String
    var aud: String
    var azp: String
    var exp: Int
    var iat: Int
    var authTime: Int
    var nonce: String?
    /// Present (true) only for guest grants.
    var guest: Bool?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, azp, exp, iat
        case authTime = "auth_time"
        case nonce, guest
    }

    /// The gateway only signs these; verifying is the client's job.
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// Claims for `subject` at `clientID`, issued `now`, valid for 10 minutes.
    init(issuer: String, subject: String, clientID: String, now: Date, authTime: Date, nonce: String?, isGuest: Bool) {
        iss = issuer
        sub = subject
        aud = clientID
        azp = clientID
        iat = Int(now.timeIntervalSince1970)
        exp = iat + 600
        self.authTime = Int(authTime.timeIntervalSince1970)
        self.nonce = nonce
        guest = isGuest ? true : nil
    }

    /// The claims with a claim-level fault applied (signature faults leave them as they are).
    func applying(_ fault: IDTokenFault?) -> IDTokenClaims {
        var claims = self
        switch fault {
        case .wrongIssuer: claims.iss = iss + "/not-this-issuer"
        case .wrongAudience:
            claims.aud = "not-\(aud)"
            claims.azp = claims.aud
        case .expired:
            claims.exp = iat - 3600
            claims.iat = claims.exp - 600
        case .issuedInFuture:
            claims.iat = iat + 3600
            claims.exp = claims.iat + 600
        case .wrongNonce: claims.nonce = TokenMint.token(prefix: "nonce-")
        case .badSignature, .algNone, .hs256, .unknownKey, .omitted, nil: break
        }
        return claims
    }
}

/// Signs ID tokens with JWTKit: header `{alg, kid, typ: "JWT"}`, and the signature-level faults.
enum IDTokenSigner {
    /// The compact JWS of `claims` signed by `key`, with `fault` built in; nil for `.omitted`.
    static func sign(_ claims: IDTokenClaims, with key: SigningKey, fault: IDTokenFault?) async throws -> String? {
        let claims = claims.applying(fault)
        switch fault {
        case .omitted:
            return nil
        case .algNone:
            let collection = JWTKeyCollection()
            await collection.addUnsecuredNone(kid: JWKIdentifier(string: key.kid))
            return try await collection.sign(claims, kid: JWKIdentifier(string: key.kid))
        case .hs256:
            return try hs256(claims, keyedWith: claims.aud, kid: key.kid)
        case .unknownKey:
            let stranger = SigningKey.p256()
            return try await stranger.keyCollection().sign(claims, kid: JWKIdentifier(string: stranger.kid))
        case .badSignature:
            let token = try await key.keyCollection().sign(claims, kid: JWKIdentifier(string: key.kid))
            return flippingSignatureByte(of: token)
        case .wrongIssuer, .wrongAudience, .expired, .issuedInFuture, .wrongNonce, nil:
            return try await key.keyCollection().sign(claims, kid: JWKIdentifier(string: key.kid))
        }
    }

    /// The algorithm-confusion attack: HS256 keyed with the (public) client id, under the current
    /// key's `kid`. Built with swift-crypto's HMAC, because JWTKit refuses HMAC keys shorter than
    /// the hash (a client id is), which is the point of this fault.
    static func hs256(_ claims: IDTokenClaims, keyedWith secret: String, kid: String) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try encoder.encode(["alg": "HS256", "kid": kid, "typ": "JWT"])
        let payload = try encoder.encode(claims)
        let signingInput = TokenMint.base64URL(Array(header)) + "." + TokenMint.base64URL(Array(payload))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return signingInput + "." + TokenMint.base64URL(Array(mac))
    }

    /// `token` with the first byte of its signature changed.
    static func flippingSignatureByte(of token: String) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, var signature = TokenMint.base64URLDecode(parts[2]), !signature.isEmpty else { return token }
        signature[0] ^= 0x01
        return "\(parts[0]).\(parts[1]).\(TokenMint.base64URL(signature))"
    }
}
