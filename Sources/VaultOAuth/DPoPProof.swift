import Crypto
import Foundation
import JWTKit
import VaultCrypto

/// The key an account's tokens are bound to (RFC 9449, DPoP): a P-256 key whose public half
/// travels in every proof, so a token copied elsewhere is worthless without it. Its thumbprint
/// (RFC 7638) is what a server binds tokens to (`cnf.jkt`).
///
/// ```swift
/// let key = DPoPKey.generate()
/// let proof = try key.proof(method: "GET", url: api, accessToken: token.value, now: Date())
/// request.headers["Authorization"] = "DPoP \(token.value)"
/// request.headers["DPoP"] = proof
/// ```
///
/// A proof goes with every request, so it is made on the short path: the header (fixed for a
/// key) is encoded once, the claims are written straight into the signing input, and the
/// signature is swift-crypto's ES256 (the primitive jwt-kit signs with; RFC 7518 §3.4's
/// `R || S`). Its descriptions and mirror show the thumbprint only, never the private key.
public struct DPoPKey: Sendable, Hashable {
    let key: ClientSigningKey
    private let signing: P256.Signing.PrivateKey
    /// base64url of the proof header (`typ`, `alg`, `jwk`), the same for every proof.
    private let encodedHeader: [UInt8]

    /// A new key from the system's random source.
    public static func generate() -> DPoPKey {
        // A key just generated always reads back.
        (try? DPoPKey(key: .generate())) ?? generate()
    }

    /// Reads a PEM P-256 private key (PKCS#8 or SEC1), as ``pemRepresentation`` writes it.
    public init(pem: String) throws(ClientSigningKey.ReadError) { try self.init(key: ClientSigningKey(pem: pem)) }

    init(key: ClientSigningKey) throws(ClientSigningKey.ReadError) {
        guard let signing = try? P256.Signing.PrivateKey(pemRepresentation: key.pemRepresentation) else { throw .notAP256PrivateKey }
        self.key = key
        self.signing = signing
        // RFC 9449 §4.2: the public key only (RFC 7638's members), never `d`.
        let header = #"{"typ":"dpop+jwt","alg":"ES256","jwk":{"kty":"EC","crv":"P-256","x":"\#(key.x)","y":"\#(key.y)"}}"#
        var encoded: [UInt8] = []
        Base64URL.append(header.utf8, to: &encoded)
        encodedHeader = encoded
    }

    /// The private key, PEM (PKCS#8): what a vault seals and stores.
    public var pemRepresentation: String { key.pemRepresentation }
    /// The RFC 7638 JWK thumbprint of the public key (base64url SHA-256): the `jkt` a server
    /// binds tokens to.
    public var thumbprint: String { key.keyID }

    /// A DPoP proof (RFC 9449 §4.2) for one request: a JWS of type `dpop+jwt`, ES256, the
    /// public key in its header, with a random `jti`, `htm` the method, `htu` the URL without
    /// query and fragment, `iat` now, `ath` the SHA-256 of `accessToken` when one is presented,
    /// and `nonce` when the server gave one.
    /// Throws ``DPoPRequestError`` for a method that is not an HTTP method token or a URL that
    /// is not an absolute `http(s)` URL.
    public func proof(method: String, url: URL, accessToken: String? = nil, nonce: String? = nil, now: Date) throws -> String {
        try DPoPRequestError.check(method: method, url: url)
        var claims = JSONObjectWriter()
        claims.add("jti", string: Base64URL.encode(try Random.bytes(16)))
        claims.add("htm", string: method.uppercased())
        claims.add("htu", string: Self.htu(url))
        claims.add("iat", integer: Int64(now.timeIntervalSince1970.rounded(.down)))
        if let accessToken { claims.add("ath", string: Self.ath(accessToken)) }
        if let nonce { claims.add("nonce", string: nonce) }
        var jws = encodedHeader
        jws.append(UInt8(ascii: "."))
        Base64URL.append(claims.finished(), to: &jws)
        let signature = try signing.signature(for: jws)
        jws.append(UInt8(ascii: "."))
        Base64URL.append(signature.rawRepresentation, to: &jws)
        return String(decoding: jws, as: UTF8.self)
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

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.key == rhs.key }
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }
}

/// A request a DPoP proof cannot be made for (RFC 9449 §4.2: `htm` is the request's HTTP
/// method, `htu` its HTTP URI).
public enum DPoPRequestError: Error, Sendable, Hashable, CustomStringConvertible {
    case notAMethod
    case notAnHTTPURL
    case credentialsInURL

    public var description: String {
        switch self {
        case .notAMethod: "the method is not an HTTP method such as GET or POST"
        case .notAnHTTPURL: "the URL is not an absolute http(s) URL"
        case .credentialsInURL: "the URL carries a user name or password: a proof would put them in its htu"
        }
    }

    /// Throws when no proof can be made for `method` and `url`.
    public static func check(method: String, url: URL) throws(DPoPRequestError) {
        // RFC 9110 §9.1: a method is a token; proofs are for the letters-only methods in use.
        guard !method.isEmpty, method.utf8.count <= 32,
            method.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        else { throw .notAMethod }
        guard let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", let host = url.host, !host.isEmpty else {
            throw .notAnHTTPURL
        }
        guard url.user == nil, url.password == nil else { throw .credentialsInURL }
    }
}

/// A JSON object of string and integer members written as UTF-8 (RFC 8259): strings escaped
/// as §7 requires (`"`, `\` and the control characters), nothing else changed.
struct JSONObjectWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]

    mutating func add(_ name: String, string value: String) {
        member(name)
        Self.appendString(value, to: &bytes)
    }

    mutating func add(_ name: String, integer value: Int64) {
        member(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// The object's bytes, closed.
    mutating func finished() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func member(_ name: String) {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
        Self.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    static func appendString(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0x0A: bytes.append(contentsOf: #"\n"#.utf8)
            case 0x0D: bytes.append(contentsOf: #"\r"#.utf8)
            case 0x09: bytes.append(contentsOf: #"\t"#.utf8)
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: #"\u00"#.utf8)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            default:
                bytes.append(byte)  // UTF-8 as it is: a Swift string is valid UTF-8
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension DPoPKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `DPoPKey(jkt: …)`: never the private key.
    public var description: String { "DPoPKey(jkt: \(thumbprint))" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// The thumbprint only, so `dump(key)` cannot print the private key.
    public var customMirror: Mirror { Mirror(self, children: ["thumbprint": thumbprint], displayStyle: .struct) }
}

/// The claims of a DPoP proof (RFC 9449 §4.2) as a reader decodes them (``DPoPKey/proof(method:url:accessToken:nonce:now:)``
/// writes them). Absent optionals are left out.
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
