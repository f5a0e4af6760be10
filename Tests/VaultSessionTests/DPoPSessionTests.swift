import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 35 so far: an account whose tokens are bound to a key the vault keeps (RFC 9449),
/// against the development gateway, which checks proofs and binds tokens.
@Suite("DPoP-bound accounts", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct DPoPSessionTests {
    let http = NIOTransport(timeout: TestTimeScale.scaled(.seconds(10)))

    /// `GET /api/profile` with `authorization` and, when given, a `DPoP` proof.
    func profile(_ h: SessionHarness, authorization: String, proof: String?) async throws -> HTTPResponse {
        var headers = HTTPHeaderFields()
        headers["Authorization"] = authorization
        if let proof { headers["DPoP"] = proof }
        return try await http.send(HTTPRequest(method: .get, url: h.gateway.baseURL.appendingPathComponent("api/profile"), headers: headers))
    }

    /// A client account signed in with DPoP (the client credentials grant goes through the
    /// token endpoint, where the proof is checked and the token bound).
    func signIn(_ h: SessionHarness, lifetime: Duration = .seconds(3600)) async throws -> AccountID {
        let time = h.time
        await h.gateway.setClock { time.now() }
        try await h.gateway.registerServiceClient(id: "indexer", authentication: .clientSecretPost("indexer-secret"), accessTokenLifetime: lifetime)
        let provider = ProviderMetadata(
            issuer: h.gateway.baseURL.absoluteString, tokenEndpoint: h.gateway.tokenEndpoint, revocationEndpoint: h.gateway.revocationEndpoint)
        var request = ClientSignInRequest(provider: provider, clientID: "indexer", authentication: .clientSecretPost(ClientSecret("indexer-secret")))
        request.dpop = true
        return try await h.service.signIn(client: request).account.id
    }

    @Test("tokens are bound to the vault's key: accepted with a proof, refused as a bearer token (a stolen copy is useless)")
    func boundAndRefusedAsBearer() async throws {
        try await SessionHarness.run { h in
            let id = try await signIn(h)
            let account = try #require(try h.vault.accounts.find(id))
            #expect(account.hasDPoPKey)
            let token = try await h.service.validAccessToken(for: id)
            #expect(token.tokenType == "DPoP" && token.authorizationHeader.hasPrefix("DPoP "))
            let url = h.gateway.baseURL.appendingPathComponent("api/profile")
            let proof = try await h.service.dpopProof(for: id, method: "GET", url: url, accessToken: token)
            #expect(try await profile(h, authorization: token.authorizationHeader, proof: proof).status == 200)
            let stolen = try await profile(h, authorization: "Bearer \(token.value)", proof: nil)
            #expect(stolen.status == 401, "a DPoP-bound token is refused as a bearer token")
            #expect(await h.gateway.stats().boundTokenBearerRefusals == 1)
            // Another key's proof does not make the copy usable either.
            let thief = try DPoPKey.generate().proof(method: "GET", url: url, accessToken: token.value, now: h.time.now())
            #expect(try await profile(h, authorization: token.authorizationHeader, proof: thief).status == 401)
            #expect(try await h.service.dpopThumbprint(for: id)?.isEmpty == false)
            #expect(try h.vault.maintenance.verify().passed)
        }
    }

    @Test("the device API with a bound token: each call carries a proof naming it, the API's nonce taken once; the token as Bearer is refused there too")
    func deviceAPI() async throws {
        try await SessionHarness.run { h in
            let id = try await signIn(h)
            await h.gateway.requireDPoPNonce(true)
            let api = HTTPDeviceNotificationAPI(baseURL: h.gateway.baseURL, session: h.service, transport: http)
            let enrollment = try await api.register(DeviceDescriptor(deviceID: "build-host", name: "build host", platform: "linux"), account: id)
            #expect(enrollment.device.deviceID == "build-host")
            #expect(try await api.device("build-host", account: id).name == "build host")
            let stats = await h.gateway.stats()
            #expect(stats.dpopNonceChallenges == 1, "the API's nonce was asked for once, then sent with every proof")
            #expect(stats.replayedDPoPProofs == 0 && stats.refusedDPoPProofs.isEmpty, "no proof refused for any other reason")

            // A copy of the token alone does not reach the device API.
            let token = try await h.service.validAccessToken(for: id)
            var headers = HTTPHeaderFields()
            headers["Authorization"] = "Bearer \(token.value)"
            let stolen = try await http.send(HTTPRequest(method: .get, url: h.gateway.baseURL.appendingPathComponent("devices"), headers: headers))
            #expect(stolen.status == 401)
            #expect(await h.gateway.stats().boundTokenBearerRefusals == 1)
        }
    }

    @Test("a token for another API (RFC 8707) is bound to the same key: taken there with a proof, refused as Bearer and at another API")
    func targetTokenBound() async throws {
        try await SessionHarness.run { h in
            let id = try await signIn(h)
            let files = try TokenTarget(resources: [h.gateway.resourceServer(named: "files")])
            let url = h.gateway.baseURL.appendingPathComponent("rs/files/whoami")
            let (token, proof) = try await h.service.dpopRequest(for: id, target: files, method: "GET", url: url)
            #expect(token.target == files && token.isDPoPBound)
            var headers = HTTPHeaderFields()
            headers["Authorization"] = token.authorizationHeader
            headers["DPoP"] = proof
            let answer = try await http.send(HTTPRequest(method: .get, url: url, headers: headers))
            #expect(answer.status == 200)
            let body = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
            #expect(body["cnf_jkt"] as? String == (try await h.service.dpopThumbprint(for: id)))
            var bearer = HTTPHeaderFields()
            bearer["Authorization"] = "Bearer \(token.value)"
            #expect(try await http.send(HTTPRequest(method: .get, url: url, headers: bearer)).status == 401)
            let mail = h.gateway.baseURL.appendingPathComponent("rs/mail/whoami")
            headers["DPoP"] = try await h.service.dpopProof(for: id, method: "GET", url: mail, accessToken: token)
            let elsewhere = try await http.send(HTTPRequest(method: .get, url: mail, headers: headers))
            #expect(elsewhere.status == 401 && String(decoding: elsewhere.body, as: UTF8.self).contains("not for this resource"), "another API's audience")
        }
    }

    @Test("a server that wants nonces: the vault takes the nonce it is given and asks once more, for every request")
    func nonces() async throws {
        try await SessionHarness.run { h in
            await h.gateway.requireDPoPNonce(true)
            let id = try await signIn(h, lifetime: .seconds(600))
            await h.gateway.rotateDPoPNonce()
            await h.time.advance(by: .seconds(590))
            let token = try await h.service.validAccessToken(for: id)
            #expect(token.tokenType == "DPoP")
            let stats = await h.gateway.stats()
            #expect(stats.clientCredentialsGrants == 2, "\(stats)")
            #expect(stats.dpopNonceChallenges == 2, "the sign-in's first proof and the one after the rotation were challenged")
            #expect(stats.dpopBoundTokens == 2 && stats.replayedDPoPProofs == 0)
        }
    }

    @Test("an account with bearer tokens has no proof to give, and a DPoP account's session does not travel")
    func refusals() async throws {
        try await SessionHarness.run { h in
            let bearer = try await h.signIn("alice")
            let error = await sessionError {
                try await h.service.dpopProof(for: bearer, method: "GET", url: h.gateway.baseURL)
            }
            guard case .clientMisconfigured(bearer, "not_dpop", _) = error else {
                Issue.record("expected not_dpop, got \(String(describing: error))")
                return
            }
            let id = try await signIn(h)
            do {
                _ = try await h.service.exportSession(SessionExportRequest(account: id, recipient: try await h.service.recipient())) { _ in }
                Issue.record("a DPoP-bound account was exported")
            } catch let error as SessionTransferError {
                #expect(error.code == .notTransferable)
            }
        }
    }
}
