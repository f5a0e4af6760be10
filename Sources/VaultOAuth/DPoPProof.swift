import Foundation
import JWTKit
import VaultCrypto

/// The key an account's tokens are bound to (RFC 9449, DPoP): a P-256 key whose public half
/// travels in every proof, so a token copied elsewhere is worthless without it. Its thumbprint
/// (RFC 7638) is what a server binds tokens to (`cnf.jkt`).
///
/// ```swift
/// let key = DPoPKey.generate()
/// let proof = try await key.proof(method: "GET", url: api, accessToken: token.value, now: Date())
/// request.headers["Authorization"] = "DPoP \(token.value)"
/// request.headers["DPoP"] = proof
/// ```
///
/// Its descriptions and mirror show the thumbprint only, never the private key.
public struct DPoPKey: Sendable, Hashable {
    let key: ClientSigningKey

    /// A new key from the system's random source.
    public static func generate() -> DPoPKey { DPoPKey(key: .generate()) }

    /// Reads a PEM P-256 private key (PKCS#8 or SEC1), as ``pemRepresentation`` writes it.
    public init(pem: String) throws(ClientSigningKey.ReadError) { key = try ClientSigningKey(pem: pem) }

    init(key: ClientSigningKey) { self.key = key }

    /// The private key, PEM (PKCS#8): what a vault seals and stores.
    public var pemRepresentation: String { key.pemRepresentation }
    /// The RFC 7638 JWK thumbprint of the public key (base64url SHA-256): the `jkt` a server
    /// binds tokens to.
    public var thumbprint: String { key.keyID }

    /// A DPoP proof (RFC 9449 §4.2) for one request: a JWS of type `dpop+jwt`, ES256, the
    /// public key in its header, with a random `jti`, `htm` the method, `htu` the URL without
    /// query and fragment, `iat` now, `ath` the SHA-256 of `accessToken` when one is presented,
    /// and `nonce` when the server gave one.
    public func proof(method: String, url: URL, accessToken: String? = nil, nonce: String? = nil, now: Date) async throws -> String {
        let claims = DPoPProofClaims(
            jti: Base64URL.encode(try Random.bytes(16)), htm: method.uppercased(), htu: Self.htu(url),
            iat: Int(now.timeIntervalSince1970.rounded(.down)), ath: accessToken.map(Self.ath), nonce: nonce)
        var header = JWTHeader()
        header.typ = "dpop+jwt"
        header.fields["jwk"] = key.publicKeyHeaderField
        return try await key.sign(claims, header: header, naming: false)
    }

    /// `htu` (RFC 9449 §4.2): the URL without its query and fragment.
    static func htu(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url.absoluteString }
        components.query = nil
        components.fragment = nil
        return components.string ?? url.absoluteString
    }

    /// `ath` (RFC 9449 §4.2): base64url of the SHA-256 of the access token's ASCII.
    static func ath(_ accessToken: String) -> String { Base64URL.encode(Digest.sha256(Array(accessToken.utf8))) }
}

extension DPoPKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `DPoPKey(jkt: …)`: never the private key.
    public var description: String { "DPoPKey(jkt: \(thumbprint))" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// The thumbprint only, so `dump(key)` cannot print the private key.
    public var customMirror: Mirror { Mirror(self, children: ["thumbprint": thumbprint], displayStyle: .struct) }
}

/// The claims of a DPoP proof (RFC 9449 §4.2). Absent optionals are left out.
struct DPoPProofClaims: JWTPayload {
    var jti: String
    var htm: String
    var htu: String
    var iat: Int
    var ath: String?
    var nonce: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

// MARK: - Checking what the server bound (RFC 9449 §5, §6)

extension TokenResponse {
    /// The `cnf.jkt` the access token claims when it is a JWT (RFC 9449 §6.1), decoded and
    /// **not verified**; nil for an opaque token or a JWT without one.
    public var unverifiedAccessTokenThumbprint: String? {
        guard UnverifiedJWT(accessToken) != nil else { return nil }
        let parts = accessToken.split(separator: ".", omittingEmptySubsequences: false)
        guard let payload = Base64URL.decode(parts[1]),
            let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            let confirmation = object["cnf"] as? [String: Any]
        else { return nil }
        return confirmation["jkt"] as? String
    }

    /// Why this answer to a request proved with `key` cannot be used as a token bound to it, or
    /// nil: a `token_type` other than `DPoP` (the server issued a bearer token: it does not do
    /// DPoP, or ignored the proof), or a JWT whose `cnf.jkt` names another key. An opaque DPoP
    /// token's binding can only be seen by the server: its type is all there is to check.
    public func dpopBindingProblem(for key: DPoPKey) -> String? {
        guard tokenType.caseInsensitiveCompare("DPoP") == .orderedSame else {
            return "the server issued a \(OAuthClient.printable(tokenType)) token where a DPoP-bound one was asked for"
        }
        if let thumbprint = unverifiedAccessTokenThumbprint, thumbprint != key.thumbprint {
            return "the access token is bound to another key (cnf.jkt \(OAuthClient.printable(thumbprint)))"
        }
        return nil
    }
}
