import Crypto
import Foundation
import JWTKit
import Logging
import Testing
import VaultOAuth
import VaultSync
import _CryptoExtras

// The proof verifier itself is internal: the RFC's own example proof is checked against it.
@testable import DevGateway

/// DPoP (RFC 9449) at the dev gateway: proofs checked at the token and revocation endpoints and
/// at the protected resources, tokens bound to the proof's key, nonces, and a stolen DPoP token
/// failing as a bearer token. Proofs are made here with JWTKit and sent over plain HTTP; the
/// gateway's clock stands still until a test moves it.
@Suite("DPoP at the dev gateway")
struct GatewayDPoPTests {
    static let client = "vault-cli"

    // MARK: - The RFC's example

    @Test("the RFC 9449 §4.2 example proof parses and verifies, and its key has the RFC's thumbprint")
    func rfcExampleProof() async throws {
        let issued = Date(timeIntervalSince1970: 1_562_262_616)
        let verifier = DPoPProofVerifier(method: "POST", url: "https://server.example.com/token", now: issued)
        let proof = try await verifier.verify(RFC9449.exampleProof).get()
        #expect(proof.thumbprint == RFC9449.exampleThumbprint, "RFC 9449 §6.1 / RFC 7638")
        #expect(proof.jti == "-BwC3ESc6acc2lTc")
        #expect(proof.forgetAfter == issued.addingTimeInterval(60))

        // htu is compared without query and fragment, scheme and host without case, the default port filled in.
        let normalised = DPoPProofVerifier(method: "POST", url: "HTTPS://Server.Example.com:443/token?x=1#f", now: issued)
        #expect(try await normalised.verify(RFC9449.exampleProof).get().thumbprint == RFC9449.exampleThumbprint)

        for (other, reason) in [
            (DPoPProofVerifier(method: "GET", url: "https://server.example.com/token", now: issued), DPoPProofRefusal.Reason.method),
            (DPoPProofVerifier(method: "POST", url: "https://server.example.com/token/", now: issued), .url),
            (DPoPProofVerifier(method: "POST", url: "https://server.example.com:8443/token", now: issued), .url),
            (DPoPProofVerifier(method: "POST", url: "https://server.example.com/token", now: issued.addingTimeInterval(61)), .time),
            (DPoPProofVerifier(method: "POST", url: "https://server.example.com/token", now: issued, accessToken: "at"), .tokenHash),
            (DPoPProofVerifier(method: "POST", url: "https://server.example.com/token", now: issued, nonce: "n"), .nonce),
        ] {
            #expect(await other.verify(RFC9449.exampleProof).failureReason == reason)
        }
        // One byte of the claims changed: the signature no longer verifies.
        let parts = RFC9449.exampleProof.split(separator: ".").map(String.init)
        let altered = [
            parts[0], Base64URL.encode(Data(#"{"jti":"-BwC3ESc6acc2lTd","htm":"POST","htu":"https://server.example.com/token","iat":1562262616}"#.utf8)),
            parts[2],
        ]
        #expect(await verifier.verify(altered.joined(separator: ".")).failureReason == .signature)
    }

    @Test("at the gateway, with its clock at the example's iat, the RFC's proof gets as far as htu: parsed and signature verified")
    func rfcExampleProofAtGateway() async throws {
        try await withDPoPGateway(at: Date(timeIntervalSince1970: 1_562_262_616)) { wire in
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
            let refused = try await wire.refresh(try grant.requiredRefreshToken, proof: RFC9449.exampleProof)
            #expect(refused.status == 400 && refused.oauthError == "invalid_dpop_proof")
            #expect(await wire.gateway.stats().refusedDPoPProofs == ["htu": 1], "https://server.example.com/token is not this gateway")
        }
    }

    // MARK: - Bound tokens at the protected resources

    @Test("a token obtained with a proof is DPoP-typed and works with a proof and ath; sent as Bearer it is refused with both challenges")
    func boundTokenFailsAsBearer() async throws {
        try await withDPoPGateway { wire in
            let key = ProofKey()
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
            let response = try await wire.refresh(try grant.requiredRefreshToken, proof: try await wire.tokenProof(by: key))
            #expect(response.status == 200)
            let body = try response.jsonObject()
            #expect(body["token_type"] as? String == "DPoP")
            let token = try #require(body["access_token"] as? String)

            let profile = try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token))
            #expect(profile.status == 200)
            let seen = try profile.jsonObject()
            #expect(seen["sub"] as? String == "alice" && seen["client_id"] as? String == Self.client)
            #expect(seen["token_type"] as? String == "DPoP")
            #expect(seen["cnf_jkt"] as? String == key.thumbprint, "RFC 7638 thumbprint of the proof's key")

            // The stolen token, as a bearer token: refused, with the DPoP and the Bearer challenge (RFC 9449 §7.2).
            let stolen = try await wire.profile(token: token, scheme: "Bearer")
            #expect(stolen.status == 401 && stolen.oauthError == "invalid_token")
            let challenge = try #require(stolen.headers["WWW-Authenticate"])
            #expect(challenge.hasPrefix(#"DPoP error="invalid_token""#))
            #expect(challenge.contains(#"Bearer realm="DevGateway", error="invalid_token""#))
            #expect(challenge.contains(#"algs="ES256 EdDSA RS256""#))
            // Even with the owner's valid proof beside it, the Bearer scheme does not work.
            let withProof = try await wire.profile(token: token, scheme: "Bearer", proof: try await wire.resourceProof(by: key, token: token))
            #expect(withProof.status == 401)

            // A bearer token keeps working as one.
            let bearer = try await wire.profile(token: grant.accessToken, scheme: "Bearer")
            #expect(bearer.status == 200)
            #expect(try bearer.jsonObject()["token_type"] as? String == "Bearer")
            #expect(try bearer.jsonObject()["cnf_jkt"] == nil)
            // …but not as a DPoP token.
            let unbound = try await wire.profile(
                token: grant.accessToken, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: grant.accessToken))
            #expect(unbound.status == 401 && unbound.oauthError == "invalid_token")

            let stats = await wire.gateway.stats()
            #expect(stats.dpopBoundTokens == 1)
            #expect(stats.boundTokenBearerRefusals == 2)
            #expect(stats.dpopProofsAccepted == 3, "a proof beside a Bearer token is not looked at")
            #expect(stats.resourceRequests == 5 && stats.resourceRefusals == 3)
        }
    }

    @Test("a bound token with a proof by another key, or with no proof, is refused")
    func proofMustBeByTheBoundKey() async throws {
        try await withDPoPGateway { wire in
            let (key, token) = try await wire.boundToken()
            let thief = ProofKey()

            let otherKey = try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: thief, token: token))
            #expect(otherKey.status == 401 && otherKey.oauthError == "invalid_token")
            #expect(otherKey.headers["WWW-Authenticate"]?.hasPrefix(#"DPoP error="invalid_token""#) == true)

            let noProof = try await wire.profile(token: token, scheme: "DPoP")
            #expect(noProof.status == 401 && noProof.oauthError == "invalid_dpop_proof")
            #expect(noProof.headers["WWW-Authenticate"]?.hasPrefix(#"DPoP error="invalid_dpop_proof""#) == true)

            #expect(try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token)).status == 200)
            #expect(await wire.gateway.stats().refusedDPoPProofs == ["missing": 1])
        }
    }

    @Test("ath must be the hash of the presented token: missing or another token's is invalid_dpop_proof")
    func accessTokenHashIsChecked() async throws {
        try await withDPoPGateway { wire in
            let (key, token) = try await wire.boundToken()
            let profile = wire.gateway.baseURL.appendingPathComponent("api/profile").absoluteString

            let withoutATH = try await wire.proof(by: key, method: "GET", url: profile)
            let missing = try await wire.profile(token: token, scheme: "DPoP", proof: withoutATH)
            #expect(missing.status == 401 && missing.oauthError == "invalid_dpop_proof")
            let otherToken = try await wire.proof(by: key, method: "GET", url: profile, ath: DPoPProofVerifier.accessTokenHash("at_other"))
            #expect(try await wire.profile(token: token, scheme: "DPoP", proof: otherToken).oauthError == "invalid_dpop_proof")
            #expect(await wire.gateway.stats().refusedDPoPProofs == ["ath": 2])

            #expect(try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token)).status == 200)
        }
    }

    @Test("an at+jwt access token carries cnf.jkt, and the audience-restricted API takes it with a proof")
    func jwtAccessTokenCarriesConfirmation() async throws {
        try await withDPoPGateway { wire in
            let key = ProofKey()
            let files = wire.gateway.resourceServer(named: "files")
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client, scope: "openid files.read")
            let response = try await wire.refresh(try grant.requiredRefreshToken, proof: try await wire.tokenProof(by: key), extra: [("resource", files)])
            #expect(response.status == 200)
            let token = try #require(try response.jsonObject()["access_token"] as? String)
            let claims = try JWTClaimsText(token)
            #expect(claims.header["typ"] as? String == "at+jwt")
            #expect((claims.payload["cnf"] as? [String: Any])?["jkt"] as? String == key.thumbprint, "RFC 9449 §6.1")

            let whoami = wire.gateway.baseURL.appendingPathComponent("rs/files/whoami")
            let accepted = try await wire.get(
                whoami, token: token, scheme: "DPoP", proof: try await wire.proof(by: key, method: "GET", url: whoami.absoluteString, token: token))
            #expect(accepted.status == 200)
            #expect(try accepted.jsonObject()["token_type"] as? String == "DPoP" && (try accepted.jsonObject()["aud"] as? [String]) == [files])
            #expect(try await wire.get(whoami, token: token, scheme: "Bearer").status == 401)
        }
    }

    // MARK: - What a proof must be

    @Test("a replayed proof is refused at the token endpoint and at a resource, and is counted")
    func replayedProofIsRefused() async throws {
        try await withDPoPGateway { wire in
            let key = ProofKey()
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
            let proof = try await wire.tokenProof(by: key)
            let first = try await wire.refresh(try grant.requiredRefreshToken, proof: proof)
            #expect(first.status == 200)
            let refreshToken = try #require(try first.jsonObject()["refresh_token"] as? String)
            let replayed = try await wire.refresh(refreshToken, proof: proof)
            #expect(replayed.status == 400 && replayed.oauthError == "invalid_dpop_proof")

            let token = try #require(try first.jsonObject()["access_token"] as? String)
            let resourceProof = try await wire.resourceProof(by: key, token: token)
            #expect(try await wire.profile(token: token, scheme: "DPoP", proof: resourceProof).status == 200)
            #expect(try await wire.profile(token: token, scheme: "DPoP", proof: resourceProof).oauthError == "invalid_dpop_proof")

            // Forgotten once its iat is out of the window: refused for its age, not remembered for ever.
            wire.advance(by: 61)
            #expect(try await wire.profile(token: token, scheme: "DPoP", proof: resourceProof).oauthError == "invalid_dpop_proof")

            let stats = await wire.gateway.stats()
            #expect(stats.replayedDPoPProofs == 2)
            #expect(stats.refusedDPoPProofs == ["replay": 2, "iat": 1])
            // The replay spent nothing: a new proof refreshes with the same refresh token.
            #expect(try await wire.refresh(refreshToken, proof: try await wire.tokenProof(by: key)).status == 200)
        }
    }

    @Test(
        "a proof with a wrong htm, htu, iat, typ, alg, key or signature is invalid_dpop_proof, and spends nothing",
        arguments: ProofDefect.allCases)
    func defectiveProofIsRefused(_ defect: ProofDefect) async throws {
        try await withDPoPGateway { wire in
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
            let refused = try await wire.refresh(try grant.requiredRefreshToken, proof: try await defect.proof(wire))
            #expect(refused.status == 400 && refused.oauthError == "invalid_dpop_proof")
            let description = try #require(try refused.jsonObject()["error_description"] as? String)
            #expect(description.contains(defect.named), "the refusal names the check: \(description)")

            let stats = await wire.gateway.stats()
            #expect(stats.refusedDPoPProofs == [defect.reason: 1])
            #expect(stats.dpopProofsAccepted == 0 && stats.dpopBoundTokens == 0)
            #expect(try await wire.refresh(try grant.requiredRefreshToken, proof: try await wire.tokenProof(by: ProofKey())).status == 200)
        }
    }

    @Test("iat within 60 s either way is accepted; htu with a query and fragment is the same resource")
    func acceptedVariations() async throws {
        try await withDPoPGateway { wire in
            var refreshToken = try await wire.gateway.issueGrant(subject: "alice", clientID: Self.client).requiredRefreshToken
            let key = ProofKey()
            for proof in [
                try await wire.proof(by: key, url: wire.tokenURL, iat: wire.now.addingTimeInterval(-60)),
                try await wire.proof(by: key, url: wire.tokenURL, iat: wire.now.addingTimeInterval(60)),
                try await wire.proof(by: key, url: wire.tokenURL + "?x=1#top"),
            ] {
                let response = try await wire.refresh(refreshToken, proof: proof)
                #expect(response.status == 200)
                refreshToken = try #require(try response.jsonObject()["refresh_token"] as? String)
            }
            #expect(await wire.gateway.stats().dpopProofsAccepted == 3)
        }
    }

    @Test("EdDSA and RS256 proofs are accepted too, and bind to their RFC 7638 thumbprints; an alg that does not fit the key is refused")
    func otherAlgorithms() async throws {
        try await withDPoPGateway { wire in
            let edwards = try EdDSA.PrivateKey(curve: .ed25519)
            let rsa = try JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
            let edwardsX = Base64URL.encode(edwards.publicKey.rawRepresentation)
            let (modulus, exponent) = try rsa.publicKey.getKeyPrimitives()
            let signers: [(String, JWKMembers, String, @Sendable (JWTKeyCollection) async -> Void)] = [
                (
                    "EdDSA", ["kty": "OKP", "crv": "Ed25519", "x": edwardsX],
                    ProofKey.thumbprint([("crv", "Ed25519"), ("kty", "OKP"), ("x", edwardsX)]), { await $0.add(eddsa: edwards) }
                ),
                (
                    "RS256", ["kty": "RSA", "n": Base64URL.encode(modulus), "e": Base64URL.encode(exponent)],
                    ProofKey.thumbprint([("e", Base64URL.encode(exponent)), ("kty", "RSA"), ("n", Base64URL.encode(modulus))]),
                    { await $0.add(rsa: rsa, digestAlgorithm: .sha256) }
                ),
            ]
            for (alg, jwk, thumbprint, add) in signers {
                let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
                let claims = ProofClaims(htm: "POST", htu: wire.tokenURL, iat: wire.now)
                let response = try await wire.refresh(try grant.requiredRefreshToken, proof: try await ProofKey.sign(claims, jwk: jwk, add: add))
                #expect(response.status == 200, "\(alg)")
                let token = try #require(try response.jsonObject()["access_token"] as? String)
                let resource = ProofClaims(
                    htm: "GET", htu: wire.gateway.baseURL.appendingPathComponent("api/profile").absoluteString, iat: wire.now,
                    ath: DPoPProofVerifier.accessTokenHash(token))
                let profile = try await wire.profile(token: token, scheme: "DPoP", proof: try await ProofKey.sign(resource, jwk: jwk, add: add))
                #expect(profile.status == 200, "\(alg)")
                #expect(try profile.jsonObject()["cnf_jkt"] as? String == thumbprint, "\(alg)")

                // The same key claimed to be ES256.
                let mislabelled = try await ProofKey.sign(claims, jwk: jwk, alg: "ES256", add: add)
                #expect(try await wire.refresh(try grant.requiredRefreshToken, proof: mislabelled).oauthError == "invalid_dpop_proof")
            }
            #expect(await wire.gateway.stats().refusedDPoPProofs == ["jwk": 2])
        }
    }

    // MARK: - Nonces

    @Test("with nonces required: use_dpop_nonce with DPoP-Nonce, the retry with it succeeds, a rotated nonce is refused again")
    func nonceChallenge() async throws {
        try await withDPoPGateway { wire in
            await wire.gateway.requireDPoPNonce(true)
            let key = ProofKey()
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)

            let challenged = try await wire.refresh(try grant.requiredRefreshToken, proof: try await wire.tokenProof(by: key))
            #expect(challenged.status == 400 && challenged.oauthError == "use_dpop_nonce")
            let nonce = try #require(challenged.headers["DPoP-Nonce"])
            #expect(try challenged.jsonObject()["error_description"] as? String != nil)

            let retried = try await wire.refresh(try grant.requiredRefreshToken, proof: try await wire.tokenProof(by: key, nonce: nonce))
            #expect(retried.status == 200, "the challenge spent nothing")
            #expect(retried.headers["DPoP-Nonce"] == nonce, "successful answers carry the current nonce")
            let token = try #require(try retried.jsonObject()["access_token"] as? String)
            let refreshToken = try #require(try retried.jsonObject()["refresh_token"] as? String)

            // At a resource: 401 with a DPoP use_dpop_nonce challenge.
            let atResource = try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token))
            #expect(atResource.status == 401 && atResource.oauthError == "use_dpop_nonce")
            #expect(atResource.headers["WWW-Authenticate"]?.hasPrefix(#"DPoP error="use_dpop_nonce", error_description=""#) == true)
            #expect(atResource.headers["DPoP-Nonce"] == nonce)
            let served = try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token, nonce: nonce))
            #expect(served.status == 200 && served.headers["DPoP-Nonce"] == nonce)

            // The nonce the client holds goes stale.
            await wire.gateway.rotateDPoPNonce()
            let stale = try await wire.refresh(refreshToken, proof: try await wire.tokenProof(by: key, nonce: nonce))
            #expect(stale.status == 400 && stale.oauthError == "use_dpop_nonce")
            let fresh = try #require(stale.headers["DPoP-Nonce"])
            #expect(fresh != nonce)
            #expect(try await wire.refresh(refreshToken, proof: try await wire.tokenProof(by: key, nonce: fresh)).status == 200)

            let stats = await wire.gateway.stats()
            #expect(stats.dpopNonceChallenges == 3)
            #expect(stats.refusedDPoPProofs.isEmpty, "a nonce challenge is not a refused proof")
            #expect(stats.dpopProofsAccepted == 3)
        }
    }

    // MARK: - Binding at the token endpoint

    @Test("a bound refresh token refreshes only with a proof by its key: none or another key's is invalid_grant and spends nothing")
    func boundRefreshToken() async throws {
        try await withDPoPGateway { wire in
            let key = ProofKey()
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
            let bound = try await wire.refresh(try grant.requiredRefreshToken, proof: try await wire.tokenProof(by: key))
            let refreshToken = try #require(try bound.jsonObject()["refresh_token"] as? String)

            let withoutProof = try await wire.refresh(refreshToken, proof: nil)
            #expect(withoutProof.status == 400 && withoutProof.oauthError == "invalid_grant")
            let otherKey = try await wire.refresh(refreshToken, proof: try await wire.tokenProof(by: ProofKey()))
            #expect(otherKey.status == 400 && otherKey.oauthError == "invalid_grant")

            let rightKey = try await wire.refresh(refreshToken, proof: try await wire.tokenProof(by: key))
            #expect(rightKey.status == 200)
            #expect(try rightKey.jsonObject()["token_type"] as? String == "DPoP")
            let stats = await wire.gateway.stats()
            #expect(stats.reuseDetections == 0, "the refused refreshes did not spend the refresh token")
            #expect(stats.dpopBoundTokens == 2)
        }
    }

    @Test("without a proof a client gets Bearer tokens, unless proofs are required of it or of every client")
    func requiredProofs() async throws {
        try await withDPoPGateway { wire in
            let other = "other-cli"
            let mine = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
            let theirs = await wire.gateway.issueGrant(subject: "bob", clientID: other)
            let plain = try await wire.refresh(try mine.requiredRefreshToken, proof: nil)
            #expect(try plain.status == 200 && plain.jsonObject()["token_type"] as? String == "Bearer")
            let refreshToken = try #require(try plain.jsonObject()["refresh_token"] as? String)

            await wire.gateway.requireDPoP(forClient: Self.client)
            let refused = try await wire.refresh(refreshToken, proof: nil)
            #expect(refused.status == 400 && refused.oauthError == "invalid_dpop_proof")
            #expect(try refused.jsonObject()["error_description"] as? String == "a DPoP proof is required")
            #expect(try await wire.refresh(try theirs.requiredRefreshToken, proof: nil, client: other).status == 200, "another client is not affected")

            await wire.gateway.requireDPoP(true)
            let all = try await wire.refresh(try theirs.requiredRefreshToken, proof: nil, client: other)
            #expect(all.status == 400 && all.oauthError == "invalid_dpop_proof", "checked before the (spent) refresh token")
            #expect(try await wire.refresh(refreshToken, proof: try await wire.tokenProof(by: ProofKey())).status == 200)
            #expect(await wire.gateway.stats().refusedDPoPProofs == ["missing": 2])
        }
    }

    @Test("client credentials with a proof give a bound token without a refresh token; without one, a Bearer token")
    func clientCredentialsAreBound() async throws {
        try await withDPoPGateway { wire in
            let secret = "made up s3cr3t"
            try await wire.gateway.registerServiceClient(id: "indexer", authentication: .clientSecretBasic(secret))
            let basic = "Basic " + Data("indexer:\(secret.replacingOccurrences(of: " ", with: "+"))".utf8).base64EncodedString()
            let key = ProofKey()

            let bound = try await wire.post(
                wire.gateway.tokenEndpoint, form: [("grant_type", "client_credentials")], proof: try await wire.tokenProof(by: key),
                authorization: basic)
            #expect(bound.status == 200)
            let body = try bound.jsonObject()
            #expect(body["token_type"] as? String == "DPoP" && body["refresh_token"] == nil)
            let token = try #require(body["access_token"] as? String)
            let profile = try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token))
            #expect(try profile.status == 200 && profile.jsonObject()["sub"] as? String == "indexer")
            #expect(try await wire.profile(token: token, scheme: "Bearer").status == 401)

            let plain = try await wire.post(wire.gateway.tokenEndpoint, form: [("grant_type", "client_credentials")], proof: nil, authorization: basic)
            #expect(try plain.jsonObject()["token_type"] as? String == "Bearer")
            #expect(await wire.gateway.stats().clientCredentialsGrants == 2)
        }
    }

    @Test("the authorization code and device grants bind to the proof's key; dpop_jkt makes the code need that key")
    func codeAndDeviceGrantsAreBound() async throws {
        try await withDPoPGateway { wire in
            await wire.gateway.registerClient(id: Self.client)
            await wire.gateway.signInBrowserUser("alice")
            let key = ProofKey()

            let plainCode = try await wire.code(extra: [])
            let exchanged = try await wire.exchange(plainCode, proof: try await wire.tokenProof(by: key))
            #expect(try exchanged.status == 200 && exchanged.jsonObject()["token_type"] as? String == "DPoP")
            let refreshToken = try #require(try exchanged.jsonObject()["refresh_token"] as? String)
            #expect(try await wire.refresh(refreshToken, proof: nil).oauthError == "invalid_grant", "the refresh token is bound too")

            let pinned = try await wire.code(extra: [("dpop_jkt", key.thumbprint)])
            let wrongKey = try await wire.exchange(pinned, proof: try await wire.tokenProof(by: ProofKey()))
            #expect(wrongKey.status == 400 && wrongKey.oauthError == "invalid_grant")
            let pinnedAgain = try await wire.code(extra: [("dpop_jkt", key.thumbprint)])
            #expect(try await wire.exchange(pinnedAgain, proof: nil).oauthError == "invalid_grant")
            let pinnedRight = try await wire.code(extra: [("dpop_jkt", key.thumbprint)])
            #expect(try await wire.exchange(pinnedRight, proof: try await wire.tokenProof(by: key)).status == 200)

            await wire.gateway.setDeviceGrantSettings(interval: 0)
            let started = try await wire.post(wire.gateway.deviceAuthorizationEndpoint, form: [("client_id", Self.client)], proof: nil).jsonObject()
            let deviceCode = try #require(started["device_code"] as? String)
            #expect(await wire.gateway.approveDeviceCode(userCode: try #require(started["user_code"] as? String), subject: "alice"))
            let polled = try await wire.post(
                wire.gateway.tokenEndpoint,
                form: [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode), ("client_id", Self.client)],
                proof: try await wire.tokenProof(by: key))
            #expect(try polled.status == 200 && polled.jsonObject()["token_type"] as? String == "DPoP")
            #expect(await wire.gateway.stats().dpopBoundTokens == 3)
        }
    }

    // MARK: - Revocation, discovery, secrets

    @Test("revocation takes an optional proof: a bound access token revoked with a proof needs ath; without a proof it is revoked as before")
    func revocationWithProof() async throws {
        try await withDPoPGateway { wire in
            let (key, token) = try await wire.boundToken()
            let revoke = wire.gateway.revocationEndpoint.absoluteString
            let form = [("token", token), ("token_type_hint", "access_token"), ("client_id", Self.client)]

            let withoutATH = try await wire.post(wire.gateway.revocationEndpoint, form: form, proof: try await wire.proof(by: key, url: revoke))
            #expect(withoutATH.status == 400 && withoutATH.oauthError == "invalid_dpop_proof")
            let wrongURL = try await wire.post(
                wire.gateway.revocationEndpoint, form: form, proof: try await wire.proof(by: key, url: wire.tokenURL, token: token))
            #expect(wrongURL.oauthError == "invalid_dpop_proof")
            #expect(
                try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token)).status == 200, "not revoked")

            let revoked = try await wire.post(wire.gateway.revocationEndpoint, form: form, proof: try await wire.proof(by: key, url: revoke, token: token))
            #expect(revoked.status == 200)
            #expect(try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: key, token: token)).status == 401)

            let (_, other) = try await wire.boundToken()
            #expect(try await wire.post(wire.gateway.revocationEndpoint, form: [("token", other), ("client_id", Self.client)], proof: nil).status == 200)
            #expect(await wire.gateway.stats().refusedDPoPProofs == ["ath": 1, "htu": 1])
        }
    }

    @Test("discovery publishes the DPoP algorithms")
    func discoveryPublishesAlgorithms() async throws {
        try await withDPoPGateway { wire in
            let metadata = try await wire.get(wire.gateway.openIDConfigurationURL, token: nil, scheme: "Bearer").jsonObject()
            #expect(metadata["dpop_signing_alg_values_supported"] as? [String] == ["ES256", "EdDSA", "RS256"])
        }
    }

    @Test("no proof, access token or refresh token appears in the gateway's log or its error descriptions")
    func proofsStayOutOfLogs() async throws {
        let capture = LogCapture()
        try await withDPoPGateway(logger: capture.logger(label: "test.gateway")) { wire in
            await wire.gateway.requireDPoPNonce(true)
            let key = ProofKey()
            let grant = await wire.gateway.issueGrant(subject: "alice", clientID: Self.client)
            var secrets = [try grant.requiredRefreshToken, grant.accessToken]
            var responses: [VaultOAuth.HTTPResponse] = []

            let proof = try await wire.tokenProof(by: key)
            let challenged = try await wire.refresh(try grant.requiredRefreshToken, proof: proof)
            responses.append(challenged)
            let nonce = try #require(challenged.headers["DPoP-Nonce"])
            let good = try await wire.tokenProof(by: key, nonce: nonce)
            let issued = try await wire.refresh(try grant.requiredRefreshToken, proof: good)
            responses.append(try await wire.refresh(try grant.requiredRefreshToken, proof: good))
            let token = try #require(try issued.jsonObject()["access_token"] as? String)
            secrets += [token, try #require(try issued.jsonObject()["refresh_token"] as? String)]
            responses.append(try await wire.profile(token: token, scheme: "Bearer"))
            responses.append(
                try await wire.profile(token: token, scheme: "DPoP", proof: try await wire.resourceProof(by: ProofKey(), token: token, nonce: nonce)))
            responses.append(try await wire.profile(token: token, scheme: "DPoP", proof: "garbage." + proof))

            // Every refusal's body and headers, and every log line.
            let signatures = [proof, good].compactMap { $0.split(separator: ".").last.map(String.init) }
            #expect(responses.allSatisfy { $0.status >= 400 })
            let texts = capture.capturedLines + responses.map { String(decoding: $0.body, as: UTF8.self) + "\($0.headers)" }
            #expect(!capture.capturedLines.isEmpty)
            #expect(capture.capturedLines.contains { $0.contains("dpop proof refused") })
            for text in texts {
                for secret in secrets + signatures { #expect(!text.contains(secret)) }
            }
        }
    }
}

// MARK: - Defective proofs

/// One thing wrong with an otherwise good token-endpoint proof, and the reason it is counted under.
enum ProofDefect: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case method, url, otherPort, localhost, old, future, type, algorithm, noKey, privateKey, symmetricKey, curve, signature
    case noJTI, malformed, twoProofs

    var testDescription: String { rawValue }

    /// The `refused_dpop_proofs` key.
    var reason: String {
        switch self {
        case .method: "htm"
        case .url, .otherPort, .localhost: "htu"
        case .old, .future: "iat"
        case .type: "typ"
        case .algorithm: "alg"
        case .noKey, .privateKey, .symmetricKey, .curve: "jwk"
        case .signature: "signature"
        case .noJTI: "claims"
        case .malformed: "malformed"
        case .twoProofs: "multiple"
        }
    }

    /// A word the refusal's description has.
    var named: String {
        switch self {
        case .method: "htm"
        case .url, .otherPort, .localhost: "htu"
        case .old, .future: "iat"
        case .type: "typ"
        case .algorithm: "alg"
        case .noKey, .curve, .symmetricKey: "jwk"
        case .privateKey: "private key material"
        case .signature: "signature"
        case .noJTI: "jti"
        case .malformed: "compact JWS"
        case .twoProofs: "exactly one"
        }
    }

    fileprivate func proof(_ wire: DPoPWire) async throws -> String {
        let key = ProofKey()
        let base = wire.gateway.baseURL
        switch self {
        case .method: return try await wire.proof(by: key, method: "GET", url: wire.tokenURL)
        case .url: return try await wire.proof(by: key, url: wire.gateway.revocationEndpoint.absoluteString)
        case .otherPort:
            let port = (base.port ?? 80) == 1 ? 2 : 1
            return try await wire.proof(by: key, url: "http://127.0.0.1:\(port)/oauth/token")
        case .localhost: return try await wire.proof(by: key, url: "http://localhost:\(base.port ?? 80)/oauth/token")
        case .old: return try await wire.proof(by: key, url: wire.tokenURL, iat: wire.now.addingTimeInterval(-61))
        case .future: return try await wire.proof(by: key, url: wire.tokenURL, iat: wire.now.addingTimeInterval(61))
        case .type: return try await key.proof(wire.claims(), typ: "JWT")
        case .algorithm: return try await key.proof(wire.claims(), alg: "HS256")
        case .noKey: return try await key.proof(wire.claims(), jwk: [:])
        case .privateKey:
            var jwk = key.publicJWK
            jwk["d"] = Base64URL.encode(Data(repeating: 7, count: 32))
            return try await key.proof(wire.claims(), jwk: jwk)
        case .symmetricKey: return try await key.proof(wire.claims(), jwk: ["kty": "oct", "k": "c2VjcmV0"])
        case .curve:
            var jwk = key.publicJWK
            jwk["crv"] = "P-384"
            return try await key.proof(wire.claims(), jwk: jwk)
        case .signature:
            // Signed by one key, the other's public key in the header.
            return try await key.proof(wire.claims(), jwk: ProofKey().publicJWK)
        case .noJTI:
            var claims = wire.claims()
            claims.jti = nil
            return try await key.proof(claims)
        case .malformed: return "not-a-jws"
        case .twoProofs:
            let one = try await wire.tokenProof(by: key)
            return one + ", " + (try await wire.tokenProof(by: key))
        }
    }
}

// MARK: - Helpers

/// The RFC's example (RFC 9449 §4.2, Figure 2, with the line folding undone) and the thumbprint
/// §6.1 gives for its key.
private enum RFC9449 {
    static let exampleProof =
        "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19"
        + ".eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ"
        + ".2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"
    static let exampleThumbprint = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
}

/// Runs `body` with a gateway whose clock stands at `start` until the test moves it.
private func withDPoPGateway(
    at start: Date = Date(timeIntervalSince1970: 1_900_000_000),
    logger: Logger = Logger(label: "test.gateway") { _ in SwiftLogNoOpLogHandler() },
    _ body: (DPoPWire) async throws -> Void
) async throws {
    try await withGateway(logger: logger) { gateway in
        let wire = DPoPWire(gateway: gateway, clock: Locked(start))
        let clock = wire.clock
        await gateway.setClock { clock.withLock { $0 } }
        try await body(wire)
    }
}

/// Plain HTTP to the gateway, with proofs made for it, and the gateway's clock.
private struct DPoPWire {
    let gateway: DevGateway
    let clock: Locked<Date>
    let transport = NIOTransport(timeout: scaled(.seconds(10)))

    var now: Date { clock.withLock { $0 } }

    func advance(by seconds: TimeInterval) {
        clock.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    var tokenURL: String { gateway.tokenEndpoint.absoluteString }

    /// Good claims for the token endpoint, issued now.
    func claims() -> ProofClaims {
        ProofClaims(htm: "POST", htu: tokenURL, iat: now)
    }

    /// A proof by `key` for `method` and `url`, issued at `iat` (now), with `ath` of `token` (or
    /// `ath` itself) and `nonce` when given, and a new `jti`.
    func proof(
        by key: ProofKey, method: String = "POST", url: String, iat: Date? = nil, token: String? = nil, ath: String? = nil,
        nonce: String? = nil
    ) async throws -> String {
        let claims = ProofClaims(
            htm: method, htu: url, iat: iat ?? now, ath: ath ?? token.map(DPoPProofVerifier.accessTokenHash), nonce: nonce)
        return try await key.proof(claims)
    }

    func tokenProof(by key: ProofKey, nonce: String? = nil) async throws -> String {
        try await proof(by: key, url: tokenURL, nonce: nonce)
    }

    func resourceProof(by key: ProofKey, token: String, nonce: String? = nil) async throws -> String {
        try await proof(by: key, method: "GET", url: gateway.baseURL.appendingPathComponent("api/profile").absoluteString, token: token, nonce: nonce)
    }

    /// A public client's refresh, with `proof` in the `DPoP` header if given.
    func refresh(
        _ refreshToken: String, proof: String?, client: String = GatewayDPoPTests.client, extra: [(String, String)] = []
    ) async throws -> VaultOAuth.HTTPResponse {
        try await post(
            gateway.tokenEndpoint, form: [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", client)] + extra,
            proof: proof)
    }

    /// A key and an access token bound to it, from a new grant's first refresh.
    func boundToken() async throws -> (ProofKey, String) {
        let key = ProofKey()
        let grant = await gateway.issueGrant(subject: "alice", clientID: GatewayDPoPTests.client)
        let response = try await refresh(try grant.requiredRefreshToken, proof: try await tokenProof(by: key))
        return (key, try #require(try response.jsonObject()["access_token"] as? String))
    }

    /// A code for the browser user, from an authorization request with PKCE and `extra`
    /// parameters; its verifier is ``codeVerifier``.
    func code(extra: [(String, String)]) async throws -> String {
        let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(Self.codeVerifier.utf8))))
        let fields =
            [
                ("response_type", "code"), ("client_id", GatewayDPoPTests.client), ("redirect_uri", Self.redirect),
                ("code_challenge", challenge), ("code_challenge_method", "S256"),
            ] + extra
        let url = try #require(URL(string: gateway.authorizationEndpoint.absoluteString + "?" + formEncode(fields)))
        return try #require(try await get(url, token: nil, scheme: "Bearer").redirectQuery()["code"])
    }

    func exchange(_ code: String, proof: String?) async throws -> VaultOAuth.HTTPResponse {
        try await post(
            gateway.tokenEndpoint,
            form: [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirect), ("code_verifier", Self.codeVerifier),
                ("client_id", GatewayDPoPTests.client),
            ],
            proof: proof)
    }

    static let redirect = "http://127.0.0.1:61000/done"
    static let codeVerifier = String(repeating: "v", count: 43)

    func post(_ url: URL, form: [(String, String)], proof: String?, authorization: String? = nil) async throws -> VaultOAuth.HTTPResponse {
        var headers: HTTPHeaderFields = ["Content-Type": "application/x-www-form-urlencoded"]
        if let proof { headers.append(name: "DPoP", value: proof) }
        if let authorization { headers.append(name: "Authorization", value: authorization) }
        return try await transport.send(HTTPRequest(method: .post, url: url, headers: headers, body: Data(formEncode(form).utf8)))
    }

    func get(_ url: URL, token: String?, scheme: String, proof: String? = nil) async throws -> VaultOAuth.HTTPResponse {
        var headers: HTTPHeaderFields = [:]
        if let token { headers.append(name: "Authorization", value: "\(scheme) \(token)") }
        if let proof { headers.append(name: "DPoP", value: proof) }
        return try await transport.send(HTTPRequest(method: .get, url: url, headers: headers))
    }

    func profile(token: String, scheme: String, proof: String? = nil) async throws -> VaultOAuth.HTTPResponse {
        try await get(gateway.baseURL.appendingPathComponent("api/profile"), token: token, scheme: scheme, proof: proof)
    }

    /// `application/x-www-form-urlencoded`, only unreserved characters kept.
    func formEncode(_ fields: [(String, String)]) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        func encode(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }
        return fields.map { "\(encode($0))=\(encode($1))" }.joined(separator: "&")
    }
}

/// A JWK's members, all strings here.
private typealias JWKMembers = [String: String]

/// A client's DPoP key (P-256), made here with JWTKit; proofs carry its public JWK.
private struct ProofKey: Sendable {
    let key = ES256PrivateKey()

    var publicJWK: JWKMembers {
        let point = key.publicKey.parameters
        return ["kty": "EC", "crv": "P-256", "x": point?.x ?? "", "y": point?.y ?? ""]
    }

    /// RFC 7638, computed here: SHA-256 of `{"crv","kty","x","y"}` in that order.
    var thumbprint: String {
        let jwk = publicJWK
        return Self.thumbprint([("crv", "P-256"), ("kty", "EC"), ("x", jwk["x"] ?? ""), ("y", jwk["y"] ?? "")])
    }

    static func thumbprint(_ members: [(String, String)]) -> String {
        let json = "{" + members.map { #""\#($0)":"\#($1)""# }.joined(separator: ",") + "}"
        return Base64URL.encode(Data(SHA256.hash(data: Data(json.utf8))))
    }

    /// `claims` signed by this key with header `{typ, alg, jwk}`; each may be made wrong.
    func proof(_ claims: ProofClaims, typ: String = "dpop+jwt", alg: String? = nil, jwk: JWKMembers? = nil) async throws -> String {
        let key = self.key
        return try await Self.sign(claims, jwk: jwk ?? publicJWK, typ: typ, alg: alg) { await $0.add(ecdsa: key) }
    }

    /// `claims` signed by the key `add` puts in a collection, the header naming `jwk`.
    static func sign(
        _ claims: ProofClaims, jwk: JWKMembers, typ: String = "dpop+jwt", alg: String? = nil,
        add: @Sendable (JWTKeyCollection) async -> Void
    ) async throws -> String {
        var header = JWTHeader()
        header.typ = typ
        if let alg { header.alg = alg }
        if !jwk.isEmpty { header.jwk = jwk.mapValues { .string($0) } }
        let collection = JWTKeyCollection()
        await add(collection)
        return try await collection.sign(claims, header: header)
    }
}

/// The claims of a proof (RFC 9449 §4.2); any may be left out or made wrong.
private struct ProofClaims: JWTPayload {
    var jti: String? = UUID().uuidString
    var htm: String?
    var htu: String?
    var iat: Int?
    var ath: String?
    var nonce: String?

    init(htm: String, htu: String, iat: Date, ath: String? = nil, nonce: String? = nil) {
        self.htm = htm
        self.htu = htu
        self.iat = Int(iat.timeIntervalSince1970)
        self.ath = ath
        self.nonce = nonce
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A JWT's header and claims, decoded without checking the signature.
private struct JWTClaimsText {
    let header: [String: Any]
    let payload: [String: Any]

    init(_ token: String) throws {
        let parts = token.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let headerData = try #require(Base64URL.decode(parts[0]))
        let payloadData = try #require(Base64URL.decode(parts[1]))
        header = try #require(try JSONSerialization.jsonObject(with: headerData) as? [String: Any])
        payload = try #require(try JSONSerialization.jsonObject(with: payloadData) as? [String: Any])
    }
}

/// Base64url without padding (RFC 4648 §5).
private enum Base64URL {
    static func encode(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}

extension Result where Failure == DPoPProofRefusal {
    /// The reason of a refusal; nil for an accepted proof.
    fileprivate var failureReason: DPoPProofRefusal.Reason? {
        if case .failure(let refusal) = self { return refusal.reason }
        return nil
    }
}
