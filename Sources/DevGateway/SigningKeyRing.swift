import Crypto
import CryptoExtras
import Foundation
import JWTKit

/// One ID-token signing key: its private half (never logged, never published) and the public
/// JWK the gateway publishes for it.
struct SigningKey: Sendable {
    enum Material: Sendable {
        case p256(P256.Signing.PrivateKey)
        case rsa(_RSA.Signing.PrivateKey)
        case ed25519(Curve25519.Signing.PrivateKey)
    }

    let kid: String
    let algorithm: SigningAlgorithm
    let material: Material
    let publicJWK: PublicJWK

    /// A new key with a fresh `kid`. Only RSA generation can fail.
    static func generate(_ algorithm: SigningAlgorithm) throws -> SigningKey {
        let kid = TokenMint.identifier(prefix: "key-")
        switch algorithm {
        case .es256:
            return p256(kid: kid)
        case .rs256:
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let primitives = try key.publicKey.getKeyPrimitives()
            return SigningKey(
                kid: kid, algorithm: .rs256, material: .rsa(key),
                publicJWK: PublicJWK(
                    kty: "RSA", kid: kid, alg: "RS256",
                    n: TokenMint.base64URL(Array(primitives.modulus)), e: TokenMint.base64URL(Array(primitives.publicExponent))))
        case .eddsa:
            let key = Curve25519.Signing.PrivateKey()
            return SigningKey(
                kid: kid, algorithm: .eddsa, material: .ed25519(key),
                publicJWK: PublicJWK(
                    kty: "OKP", kid: kid, alg: "EdDSA", crv: "Ed25519", x: TokenMint.base64URL(Array(key.publicKey.rawRepresentation))))
        }
    }

    /// A new P-256 key; cannot fail.
    static func p256(kid: String = TokenMint.identifier(prefix: "key-")) -> SigningKey {
        let key = P256.Signing.PrivateKey()
        // x9.63: 0x04 || x (32 bytes) || y (32 bytes).
        let point = Array(key.publicKey.x963Representation.dropFirst())
        return SigningKey(
            kid: kid, algorithm: .es256, material: .p256(key),
            publicJWK: PublicJWK(
                kty: "EC", kid: kid, alg: "ES256", crv: "P-256",
                x: TokenMint.base64URL(Array(point.prefix(32))), y: TokenMint.base64URL(Array(point.suffix(32)))))
    }

    /// A key collection that signs with this key under its `kid` (and only this key).
    func keyCollection() async throws -> JWTKeyCollection {
        let collection = JWTKeyCollection()
        let identifier = JWKIdentifier(string: kid)
        switch material {
        case .p256(let key):
            await collection.add(ecdsa: try ES256PrivateKey(backing: key), kid: identifier)
        case .rsa(let key):
            await collection.add(rsa: try Insecure.RSA.PrivateKey(backing: key), digestAlgorithm: .sha256, kid: identifier)
        case .ed25519(let key):
            await collection.add(eddsa: EdDSA.PrivateKey(backing: key), kid: identifier)
        }
        return collection
    }
}

extension SigningKey: CustomStringConvertible {
    /// `kid` and algorithm; never key material.
    var description: String { "SigningKey(kid: \(kid), alg: \(algorithm.rawValue))" }
}

/// A public key as published in the JWKS (RFC 7517 §4, RFC 7518 §6, RFC 8037 §2).
struct PublicJWK: Codable, Sendable, Hashable {
    var kty: String
    var kid: String
    var alg: String
    var use = "sig"
    var crv: String?
    var x: String?
    var y: String?
    var n: String?
    var e: String?
}

/// The gateway's signing keys: the current one signs, earlier ones stay published (so tokens
/// they signed still verify) until retired. Pure value logic, owned by the ``DevGateway`` actor.
struct SigningKeyRing: Sendable {
    /// The key that signs new ID tokens.
    private(set) var current: SigningKey
    /// Every published key, oldest first; includes ``current``.
    private(set) var published: [SigningKey]

    /// A ring with one new ES256 key.
    init() {
        let key = SigningKey.p256()
        current = key
        published = [key]
    }

    /// Makes `key` the signing key; earlier keys stay published unless `retirePrevious`.
    mutating func rotate(to key: SigningKey, retirePrevious: Bool) {
        published = retirePrevious ? [key] : published + [key]
        current = key
    }

    /// The JWKS document's `keys`.
    var jwks: [PublicJWK] { published.map(\.publicJWK) }

    /// The algorithms of the published keys, each once, in publication order.
    var algorithms: [String] {
        var seen: [String] = []
        for key in published where !seen.contains(key.algorithm.rawValue) { seen.append(key.algorithm.rawValue) }
        return seen
    }
}
