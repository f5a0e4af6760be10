import Foundation
import JWTKit

/// A public key a `private_key_jwt` client signs its assertions with: an EC P-256 JWK for
/// ES256 (RFC 7518 §3.4, §6.2), read from what the client registered.
///
/// ```swift
/// let keys = try ClientAssertionKey.keys(
///     fromJWKS: Data(#"{"kty":"EC","crv":"P-256","x":"…","y":"…","kid":"k1"}"#.utf8), clientID: "indexer")
/// ```
struct ClientAssertionKey: Sendable {
    /// The JWK's `kid`; an assertion whose header names a `kid` is checked against the key
    /// with that `kid` only.
    let kid: String?
    /// The coordinates as registered (base64url), to tell whether a key is still registered.
    let x: String
    let y: String
    let publicKey: ES256PublicKey

    /// Whether `other` is the same public key.
    func isSameKey(as other: ClientAssertionKey) -> Bool { x == other.x && y == other.y }

    /// The keys of `jwks`, the JSON text of a JWK Set (`{"keys": [...]}`, RFC 7517 §5) or of a
    /// single JWK; see ``keys(from:clientID:)`` for what each key must be.
    static func keys(fromJWKS jwks: Data, clientID: String) throws(DevGatewayError) -> [ClientAssertionKey] {
        guard let input = try? JSONDecoder().decode(JWKInput.self, from: jwks) else {
            throw refusal(#"expected the JSON of a JWK Set {"keys": [...]} or of one JWK"#, clientID: clientID)
        }
        return try keys(from: input.documents, clientID: clientID)
    }

    /// The keys of `documents`. Every key must be a public EC P-256 key for signing with ES256
    /// (`alg` and `use` may be left out), `kid`s must differ, and there must be at least one.
    static func keys(from documents: [JWKDocument], clientID: String) throws(DevGatewayError) -> [ClientAssertionKey] {
        guard !documents.isEmpty else { throw refusal("the JWK Set has no keys; register at least one", clientID: clientID) }
        var keys: [ClientAssertionKey] = []
        for (index, document) in documents.enumerated() {
            let name = document.kid.map { "key \($0)" } ?? "key \(index + 1)"
            guard document.kty == "EC", document.crv == "P-256" else {
                throw refusal("\(name) is not an EC P-256 key (kty EC, crv P-256); only ES256 is supported", clientID: clientID)
            }
            guard document.d == nil else {
                throw refusal("\(name) holds private key material (d); register the public key only", clientID: clientID)
            }
            guard document.alg == nil || document.alg == "ES256" else {
                throw refusal("\(name) is for alg \(document.alg ?? ""); only ES256 is supported", clientID: clientID)
            }
            guard document.use == nil || document.use == "sig" else {
                throw refusal("\(name) has use \(document.use ?? ""), not sig", clientID: clientID)
            }
            guard let x = document.x, let y = document.y,
                let publicKey = try? ES256PublicKey(parameters: (x: x, y: y))
            else {
                throw refusal("\(name) has no valid P-256 point (x and y: 32 bytes each, base64url)", clientID: clientID)
            }
            if let kid = document.kid, keys.contains(where: { $0.kid == kid }) {
                throw refusal("kid \(kid) appears twice", clientID: clientID)
            }
            keys.append(ClientAssertionKey(kid: document.kid, x: x, y: y, publicKey: publicKey))
        }
        return keys
    }

    private static func refusal(_ reason: String, clientID: String) -> DevGatewayError {
        DevGatewayError(message: "the keys for client \(clientID) are not usable: \(reason)")
    }
}

/// A JWK as registered (RFC 7517 §4): every member optional, so that what is missing or wrong
/// can be named.
struct JWKDocument: Codable, Sendable, Hashable {
    var kty: String?
    var crv: String?
    var x: String?
    var y: String?
    var kid: String?
    var alg: String?
    var use: String?
    /// A private EC key's scalar: present only when someone pasted a private key.
    var d: String?
}

/// A JWK Set (RFC 7517 §5).
struct JWKSetDocument: Codable, Sendable, Hashable {
    var keys: [JWKDocument]
}

/// A JWK Set or a single JWK, as a client may register either.
enum JWKInput: Decodable, Sendable, Hashable {
    case set(JWKSetDocument)
    case single(JWKDocument)

    /// The keys, in the order given.
    var documents: [JWKDocument] {
        switch self {
        case .set(let set): set.keys
        case .single(let key): [key]
        }
    }

    init(from decoder: any Decoder) throws {
        if let set = try? JWKSetDocument(from: decoder) {
            self = .set(set)
            return
        }
        let key = try JWKDocument(from: decoder)
        guard key.kty != nil else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "neither a JWK Set nor a JWK"))
        }
        self = .single(key)
    }
}
