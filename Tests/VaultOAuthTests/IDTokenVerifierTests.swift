import Crypto
import Foundation
import JWTKit
import Logging
import Testing
import VaultOAuth
import VaultSync
import _CryptoExtras

/// Each check of OpenID Connect Core §3.1.3.7 gets its own test: a token that fails only that
/// check is refused with that check named. Keys are made here; the JWKS is served by a
/// transport that counts its fetches (the provider is the external part, the verifier the
/// thing under test).
@Suite("ID-token verification: one test per check")
struct IDTokenVerifierTests {
    static let issuer = "https://id.example.test"
    static let clientID = "vault-cli"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let jwksURI = URL(string: "https://id.example.test/jwks")!

    struct Claims: JWTPayload {
        var iss: String? = IDTokenVerifierTests.issuer
        var sub: String? = "alice"
        var aud: [String]? = [IDTokenVerifierTests.clientID]
        var azp: String?
        var exp: Int? = Int(IDTokenVerifierTests.now.timeIntervalSince1970) + 600
        var iat: Int? = Int(IDTokenVerifierTests.now.timeIntervalSince1970) - 5
        var authTime: Int? = Int(IDTokenVerifierTests.now.timeIntervalSince1970) - 60
        var nonce: String? = "n-0S6_WzA2Mj"

        enum CodingKeys: String, CodingKey {
            case iss, sub, aud, azp, exp, iat, nonce
            case authTime = "auth_time"
        }

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A signing key and its public JWK.
    struct Signer {
        let keys: JWTKeyCollection
        let kid: String
        let jwk: [String: String]

        static func es256(kid: String = "es-1") async throws -> Signer {
            let key = P256.Signing.PrivateKey()
            let keys = await JWTKeyCollection().add(ecdsa: try ES256PrivateKey(backing: key), kid: JWKIdentifier(string: kid))
            let raw = key.publicKey.rawRepresentation
            return Signer(
                keys: keys, kid: kid,
                jwk: [
                    "kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
                    "x": b64(raw.prefix(32)), "y": b64(raw.suffix(32)),
                ])
        }

        static func rs256(kid: String = "rs-1") async throws -> Signer {
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let keys = await JWTKeyCollection().add(
                rsa: try Insecure.RSA.PrivateKey(backing: key), digestAlgorithm: .sha256,
                kid: JWKIdentifier(string: kid))
            let primitives = try key.publicKey.getKeyPrimitives()
            return Signer(
                keys: keys, kid: kid,
                jwk: [
                    "kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                    "n": b64(primitives.modulus), "e": b64(primitives.publicExponent),
                ])
        }

        static func eddsa(kid: String = "ed-1") async throws -> Signer {
            let key = Curve25519.Signing.PrivateKey()
            let keys = await JWTKeyCollection().add(eddsa: EdDSA.PrivateKey(backing: key), kid: JWKIdentifier(string: kid))
            return Signer(
                keys: keys, kid: kid,
                jwk: [
                    "kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig",
                    "x": b64(key.publicKey.rawRepresentation),
                ])
        }

        func sign(_ claims: Claims = Claims()) async throws -> String {
            try await keys.sign(claims, kid: JWKIdentifier(string: kid))
        }
    }

    /// Serves the JWKS: `sets[n]` for the n-th fetch (the last one thereafter).
    final class JWKSServer: HTTPTransport, Sendable {
        let sets: [[[String: String]]]
        let fetches = Locked(0)
        init(_ sets: [[[String: String]]]) { self.sets = sets }
        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            let index = fetches.withLock { count -> Int in
                defer { count += 1 }
                return count
            }
            let body = try JSONSerialization.data(withJSONObject: ["keys": sets[min(index, sets.count - 1)]])
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: body)
        }
    }

    static func b64(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    func verify(
        _ token: String, keys: [[String: String]], nonce: String? = "n-0S6_WzA2Mj", maxAge: Duration? = nil,
        server: JWKSServer? = nil
    ) async throws(IDTokenFailure) -> VerifiedIDToken {
        let transport = server ?? JWKSServer([keys])
        let verifier = IDTokenVerifier(oauth: OAuthClient(transport: transport, logger: .init(label: "test")))
        return try await verifier.verify(
            token, jwksURI: Self.jwksURI,
            expecting: IDTokenExpectations(
                issuer: Self.issuer, clientID: Self.clientID, nonce: nonce, maxAge: maxAge, now: Self.now))
    }

    func failure(_ token: String, keys: [[String: String]], nonce: String? = "n-0S6_WzA2Mj", maxAge: Duration? = nil) async -> IDTokenFailure? {
        do {
            _ = try await verify(token, keys: keys, nonce: nonce, maxAge: maxAge)
            return nil
        } catch {
            return error
        }
    }

    @Test("ES256, RS256 and EdDSA tokens signed by a published key verify, and their claims come back")
    func acceptedAlgorithms() async throws {
        for signer in [try await Signer.es256(), try await Signer.rs256(), try await Signer.eddsa()] {
            let claims = try await verify(try await signer.sign(), keys: [signer.jwk])
            #expect(claims.subject == "alice")
            #expect(claims.authTime == Self.now.addingTimeInterval(-60))
        }
    }

    @Test("alg none is refused, whatever the claims")
    func algNone() async throws {
        let header = Self.b64(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
        let payload = Self.b64(try JSONEncoder().encode(Claims()))
        let signer = try await Signer.es256()
        #expect(await failure("\(header).\(payload).", keys: [signer.jwk]) == .algorithmRefused("none"))
    }

    @Test("HS256 (a public value used as a MAC key) is refused")
    func symmetric() async throws {
        // jwt-kit asserts a key of at least 256 bits: the client id padded, as an attacker would.
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: Self.clientID + String(repeating: "-", count: 32)), digestAlgorithm: .sha256)
        let token = try await keys.sign(Claims())
        let signer = try await Signer.es256()
        #expect(await failure(token, keys: [signer.jwk]) == .algorithmRefused("HS256"))
    }

    @Test("a signature that does not verify is refused as the signature check")
    func badSignature() async throws {
        let signer = try await Signer.es256()
        var parts = try await signer.sign().split(separator: ".").map(String.init)
        var signature = Array(parts[2])
        signature[5] = signature[5] == "A" ? "B" : "A"
        parts[2] = String(signature)
        #expect(await failure(parts.joined(separator: "."), keys: [signer.jwk]) == .signature)
    }

    @Test("a token signed by a key the provider does not publish is refused after one refetch")
    func unknownKey() async throws {
        let published = try await Signer.es256(kid: "published")
        let stranger = try await Signer.es256(kid: "stranger")
        let server = JWKSServer([[published.jwk]])
        let token = try await stranger.sign()
        var failed: IDTokenFailure?
        do {
            _ = try await verify(token, keys: [], server: server)
        } catch {
            failed = error
        }
        #expect(failed == .unknownKey(kid: "stranger"))
        #expect(server.fetches.withLock { $0 } == 2)
    }

    @Test("a rotated key: the unknown kid fetches the JWKS again, once, and then verifies")
    func rotation() async throws {
        let old = try await Signer.es256(kid: "old")
        let new = try await Signer.rs256(kid: "new")
        let server = JWKSServer([[old.jwk], [old.jwk, new.jwk]])
        let verifier = IDTokenVerifier(oauth: OAuthClient(transport: server, logger: .init(label: "test")))
        let expect = IDTokenExpectations(issuer: Self.issuer, clientID: Self.clientID, nonce: "n-0S6_WzA2Mj", now: Self.now)
        _ = try await verifier.verify(try await old.sign(), jwksURI: Self.jwksURI, expecting: expect)
        _ = try await verifier.verify(try await new.sign(), jwksURI: Self.jwksURI, expecting: expect)
        _ = try await verifier.verify(try await old.sign(), jwksURI: Self.jwksURI, expecting: expect)
        #expect(server.fetches.withLock { $0 } == 2)
    }

    @Test("a key whose type does not fit the header's algorithm is never used")
    func keyTypeConfusion() async throws {
        let signer = try await Signer.es256(kid: "k")
        let rsa = try await Signer.rs256(kid: "k")
        #expect(await failure(try await signer.sign(), keys: [rsa.jwk]) == .unknownKey(kid: "k"))
    }

    @Test("iss other than the provider's is refused as the issuer check")
    func issuer() async throws {
        let signer = try await Signer.es256()
        var claims = Claims()
        claims.iss = "https://evil.example.test"
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .issuer(expected: Self.issuer, found: "https://evil.example.test"))
    }

    @Test("aud without this client is refused as the audience check")
    func audience() async throws {
        let signer = try await Signer.es256()
        var claims = Claims()
        claims.aud = ["another-client"]
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .audience(clientID: Self.clientID))
    }

    @Test("several audiences need azp naming this client; an azp naming another is refused")
    func authorizedParty() async throws {
        let signer = try await Signer.es256()
        var claims = Claims()
        claims.aud = [Self.clientID, "api"]
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .authorizedParty(clientID: Self.clientID))
        claims.azp = "api"
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .authorizedParty(clientID: Self.clientID))
        claims.azp = Self.clientID
        #expect(try await verify(try await signer.sign(claims), keys: [signer.jwk]).subject == "alice")
    }

    @Test("exp in the past beyond the skew is refused; within the skew it passes")
    func expiry() async throws {
        let signer = try await Signer.es256()
        var claims = Claims()
        claims.exp = Int(Self.now.timeIntervalSince1970) - 600
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .expired(at: Self.now.addingTimeInterval(-600)))
        claims.exp = Int(Self.now.timeIntervalSince1970) - 30
        #expect(try await verify(try await signer.sign(claims), keys: [signer.jwk]).subject == "alice")
    }

    @Test("iat in the future beyond the skew is refused")
    func issuedInFuture() async throws {
        let signer = try await Signer.es256()
        var claims = Claims()
        claims.iat = Int(Self.now.timeIntervalSince1970) + 3600
        claims.exp = Int(Self.now.timeIntervalSince1970) + 7200
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .issuedInFuture(at: Self.now.addingTimeInterval(3600)))
    }

    @Test("a nonce other than the one sent, or none, is refused as the nonce check")
    func nonce() async throws {
        let signer = try await Signer.es256()
        #expect(await failure(try await signer.sign(), keys: [signer.jwk], nonce: "another") == .nonce)
        var claims = Claims()
        claims.nonce = nil
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .nonce)
    }

    @Test("with max_age, an auth_time that is missing or too old is refused")
    func maxAge() async throws {
        let signer = try await Signer.es256()
        var old = Claims()
        old.authTime = Int(Self.now.timeIntervalSince1970) - 600  // beyond max_age and the 120 s skew
        #expect(await failure(try await signer.sign(old), keys: [signer.jwk], maxAge: .seconds(300)) == .authenticationTooOld)
        var claims = Claims()
        claims.authTime = nil
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk], maxAge: .seconds(3600)) == .authenticationTooOld)
        #expect(try await verify(try await signer.sign(), keys: [signer.jwk], maxAge: .seconds(300)).subject == "alice")
    }

    @Test("a token without sub is refused naming the claim")
    func missingSubject() async throws {
        let signer = try await Signer.es256()
        var claims = Claims()
        claims.sub = nil
        #expect(await failure(try await signer.sign(claims), keys: [signer.jwk]) == .missingClaim("sub"))
    }

    @Test("not a JWT at all is refused as malformed, never a crash")
    func malformed() async throws {
        let signer = try await Signer.es256()
        for garbage in ["", "a.b", "a.b.c.d", "!!!.@@@.###", "e30.e30.e30"] {
            let result = await failure(garbage, keys: [signer.jwk])
            #expect(result?.check == "malformed", "\(garbage): \(String(describing: result))")
        }
    }
}
