import Foundation
import JWTKit
import VaultCrypto
import VaultSync

/// A P-256 key a client authenticates with by `private_key_jwt` (RFC 7523 §2.2, OpenID Connect
/// Core §9): each request to the token or revocation endpoint carries an assertion signed with it
/// (ES256, through jwt-kit). The provider holds the public half (``publicJWK``), registered once.
///
/// ```swift
/// let key = ClientSigningKey.generate()
/// print(key.publicJWK)            // register this with the provider
/// let client = ClientCredentials(clientID: "backup-daemon", authentication: .privateKeyJWT(key))
/// ```
///
/// Its descriptions and mirror show the key id only, never the private key.
public struct ClientSigningKey: Sendable, Hashable {
    /// The private key, PEM (PKCS#8): what a vault seals and stores.
    public let pemRepresentation: String
    /// The key id: the RFC 7638 JWK thumbprint of the public key (base64url SHA-256), sent as
    /// the assertion's `kid` and published in ``publicJWK``.
    public let keyID: String
    /// The public key's coordinates, base64url (RFC 7518 §6.2.1).
    let x: String
    let y: String
    private let key: ES256PrivateKey
    /// The key collection that signs with it, made on first use and kept (a proof per request).
    private let signer = SignerCache()

    /// Why a key could not be read.
    public enum ReadError: Error, Sendable, Hashable, CustomStringConvertible {
        /// Not a PEM P-256 private key (PKCS#8 `PRIVATE KEY` or SEC1 `EC PRIVATE KEY`).
        case notAP256PrivateKey

        public var description: String {
            switch self {
            case .notAP256PrivateKey: "it is not a PEM P-256 private key (PKCS#8 \"PRIVATE KEY\" or SEC1 \"EC PRIVATE KEY\")"
            }
        }
    }

    /// Reads a PEM P-256 private key (PKCS#8 or SEC1), as `openssl ecparam -name prime256v1
    /// -genkey` or `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` write it.
    public init(pem: String) throws(ReadError) {
        guard let key = try? ES256PrivateKey(pem: pem) else { throw .notAP256PrivateKey }
        try self.init(key)
    }

    /// A new key from the system's random source (swift-crypto's P-256).
    public static func generate() -> ClientSigningKey {
        // A key just generated always has a public point and a PEM form.
        (try? ClientSigningKey(ES256PrivateKey())) ?? generate()
    }

    private init(_ key: ES256PrivateKey) throws(ReadError) {
        guard let parameters = key.publicKey.parameters else { throw .notAP256PrivateKey }
        self.key = key
        self.pemRepresentation = key.pemRepresentation
        self.x = parameters.x
        self.y = parameters.y
        // RFC 7638 §3.2: the required members in lexicographic order, no whitespace.
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(parameters.x)","y":"\#(parameters.y)"}"#
        self.keyID = Base64URL.encode(Digest.sha256(Array(canonical.utf8)))
    }

    /// The public key as a JWK (RFC 7517) to register with the provider: `kty`, `crv`, `x`,
    /// `y`, `kid`, `alg` (`ES256`) and `use` (`sig`), compact JSON with sorted keys.
    public var publicJWK: String {
        "{" + publicJWKMembers.map { #""\#($0.name)":"\#($0.value)""# }.joined(separator: ",") + "}"
    }

    /// The members of ``publicJWK``, sorted by name (every value a string without characters
    /// JSON escapes: base64url, fixed words).
    public var publicJWKMembers: [(name: String, value: String)] {
        [("alg", "ES256"), ("crv", "P-256"), ("kid", keyID), ("kty", "EC"), ("use", "sig"), ("x", x), ("y", y)]
    }

    /// A client assertion for one request (RFC 7523 §3): `iss` and `sub` the client id, `aud`
    /// the endpoint the request goes to, issued `now`, expiring a minute later, with a random
    /// `jti` so the provider can refuse it a second time.
    func assertion(clientID: String, audience: URL, now: Date) async throws -> String {
        let issued = now.timeIntervalSince1970.rounded(.down)
        let claims = ClientAssertionClaims(
            iss: IssuerClaim(value: clientID), sub: SubjectClaim(value: clientID),
            aud: AudienceClaim(value: audience.absoluteString),
            iat: IssuedAtClaim(value: Date(timeIntervalSince1970: issued)),
            exp: ExpirationClaim(value: Date(timeIntervalSince1970: issued + Self.assertionLifetime)),
            jti: IDClaim(value: Base64URL.encode(try Random.bytes(16))))
        var header = JWTHeader()
        header.typ = "JWT"
        return try await sign(claims, header: header, naming: true)
    }

    /// `claims` signed with this key (ES256, jwt-kit) under `header`; `naming` puts the key id
    /// in the header as `kid`.
    func sign(_ claims: some JWTPayload, header: JWTHeader, naming: Bool) async throws -> String {
        let keys = await signer.collection(signingWith: key)
        var header = header
        if naming { header.kid = keyID }
        return try await keys.sign(claims, header: header)
    }

    /// The public key's members RFC 7638 hashes, for a JWS header's `jwk` (RFC 9449 §4.2).
    var publicKeyHeaderField: JWTHeaderField {
        .object(["kty": .string("EC"), "crv": .string("P-256"), "x": .string(x), "y": .string(y)])
    }

    /// How long an assertion is good for: a minute (it is made for one request).
    static let assertionLifetime: TimeInterval = 60

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.keyID == rhs.keyID }
    public func hash(into hasher: inout Hasher) { hasher.combine(keyID) }
}

extension ClientSigningKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `ClientSigningKey(kid: …)`: never the private key.
    public var description: String { "ClientSigningKey(kid: \(keyID))" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// The key id only, so `dump(key)` cannot print the private key.
    public var customMirror: Mirror { Mirror(self, children: ["keyID": keyID], displayStyle: .struct) }
}

/// The claims of a client assertion (RFC 7523 §3).
struct ClientAssertionClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var jti: IDClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A jwt-kit key collection holding one key, made once per key: every proof and assertion is
/// signed by the same collection instead of a new one per request.
final class SignerCache: Sendable {
    private let keys = JWTKeyCollection()
    private let ready = Locked(false)

    /// The collection, `key` added to it the first time (two first callers at once both add the
    /// same key as the default: the same outcome).
    func collection(signingWith key: ES256PrivateKey) async -> JWTKeyCollection {
        if ready.withLock({ $0 }) { return keys }
        await keys.add(ecdsa: key)
        ready.withLock { $0 = true }
        return keys
    }
}
