import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 34, item 2: accounts that are clients, not people (RFC 6749 §4.4), with each client
/// authentication (client_secret_basic, client_secret_post, private_key_jwt per RFC 7523),
/// against the development gateway over HTTP.
@Suite("Client accounts: the client credentials grant, obtained again when due", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct ClientCredentialsTests {
    let http = NIOTransport(timeout: TestTimeScale.scaled(.seconds(10)))

    /// What a protected API of the gateway answers `token` with: its status and, on 200, the
    /// `sub` it saw.
    func profile(_ h: SessionHarness, _ token: AccessToken, path: String = "api/profile") async throws -> (Int, String?) {
        var headers = HTTPHeaderFields()
        headers["Authorization"] = token.authorizationHeader
        let response = try await http.send(HTTPRequest(method: .get, url: h.gateway.baseURL.appendingPathComponent(path), headers: headers))
        let body = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return (response.status, (body?["sub"] ?? body?["subject"]) as? String)
    }

    func provider(_ h: SessionHarness) -> ProviderMetadata {
        ProviderMetadata(issuer: h.gateway.baseURL.absoluteString, tokenEndpoint: h.gateway.tokenEndpoint, revocationEndpoint: h.gateway.revocationEndpoint)
    }

    /// Registers `id` at the gateway with `method` and signs it in.
    @discardableResult
    func signInClient(
        _ h: SessionHarness, _ id: String, _ method: ClientAuthentication, lifetime: Duration = .seconds(3600), scopes: [String] = []
    ) async throws -> (AccountID, ClientSigningKey?) {
        // Assertions are dated by the vault's clock: the gateway checks them on the same one.
        // The clock alone: a closure holding the harness would keep it (and its vault) alive
        // through the gateway it holds, which LeakSanitizer reports.
        let time = h.time
        await h.gateway.setClock { time.now() }
        let secret = "secret-of-\(id)-0123456789"
        let key = method == .privateKeyJWT ? ClientSigningKey.generate() : nil
        let authentication: ClientCredentialsAuthentication
        switch method {
        case .clientSecretPost:
            try await h.gateway.registerServiceClient(id: id, authentication: .clientSecretPost(secret), accessTokenLifetime: lifetime)
            authentication = .clientSecretPost(ClientSecret(secret))
        case .privateKeyJWT:
            let key = try #require(key)
            try await h.gateway.registerServiceClient(
                id: id, authentication: .privateKeyJWT(jwks: Data(key.publicJWK.utf8)), accessTokenLifetime: lifetime)
            authentication = .privateKeyJWT(key)
        default:
            try await h.gateway.registerServiceClient(id: id, authentication: .clientSecretBasic(secret), accessTokenLifetime: lifetime)
            authentication = .clientSecretBasic(ClientSecret(secret))
        }
        let result = try await h.service.signIn(
            client: ClientSignInRequest(provider: provider(h), clientID: id, authentication: authentication, scopes: scopes))
        return (result.account.id, key)
    }

    @Test(
        "each client authentication signs a client in: its token works at the API as the client, and no refresh token is kept",
        arguments: [ClientAuthentication.clientSecretBasic, .clientSecretPost, .privateKeyJWT])
    func eachMethod(_ method: ClientAuthentication) async throws {
        try await SessionHarness.run { h in
            let (id, key) = try await signInClient(h, "indexer", method)
            let account = try #require(try h.vault.accounts.find(id))
            #expect(account.grant == .clientCredentials && account.client.authentication == method && account.subject == "indexer")
            #expect(account.hasClientSecret == (method != .privateKeyJWT) && account.hasClientSigningKey == (method == .privateKeyJWT))
            if let key { #expect(try h.vault.accounts.clientSigningKey(for: id) == key.pemRepresentation) }
            let stored = try #require(try h.vault.tokens.current(for: id))
            #expect(stored.tokens.refreshToken == nil)
            let token = try await h.service.validAccessToken()
            #expect(token.account == id && token.value == stored.tokens.accessToken)
            let (status, subject) = try await profile(h, token)
            #expect(status == 200 && subject == "indexer", "the API sees the client itself")
            #expect(await h.gateway.stats().clientCredentialsGrants == 1)
            #expect(try h.vault.maintenance.verify().passed)
            h.expectNoTokenInLogs()
        }
    }

    @Test("a due token is obtained again with the client's credentials: once for every caller; another service reads it")
    func obtainedAgainWhenDue() async throws {
        try await SessionHarness.run { h in
            let (id, _) = try await signInClient(h, "indexer", .privateKeyJWT, lifetime: .seconds(600))
            let first = try await h.service.validAccessToken()
            await h.time.advance(by: .seconds(590))  // within the leeway of its expiry
            let tokens = try await withThrowingTaskGroup(of: AccessToken.self) { group in
                for _ in 0..<20 { group.addTask { try await h.service.validAccessToken(for: id) } }
                return try await group.reduce(into: [AccessToken]()) { $0.append($1) }
            }
            #expect(Set(tokens.map(\.value)).count == 1 && tokens[0].value != first.value)
            #expect(await h.gateway.stats().clientCredentialsGrants == 2, "one grant for twenty callers")
            #expect(await h.gateway.stats().replayedClientAssertions == 0)
            #expect(try h.vault.tokens.current(for: id)?.tokens.refreshToken == nil)
            #expect(try await profile(h, tokens[0]).0 == 200)
            // Another service on the same file (another process, as far as the vault can tell).
            let other = h.makeService(on: try h.openAnotherVault())
            #expect(try await other.validAccessToken(for: id).value == tokens[0].value)
            #expect(await h.gateway.stats().clientCredentialsGrants == 2)
        }
    }

    @Test("a token for another API comes from the client credentials grant with the resource, not from a refresh token")
    func targetToken() async throws {
        try await SessionHarness.run { h in
            let (id, _) = try await signInClient(h, "indexer", .clientSecretPost)
            let files = try TokenTarget(resources: [h.gateway.resourceServer(named: "files")])
            let token = try await h.service.validAccessToken(for: id, target: files)
            #expect(token.target == files)
            #expect(try await profile(h, token, path: "rs/files/whoami").0 == 200)
            #expect(try await profile(h, token, path: "rs/mail/whoami").0 == 401)
            #expect(await h.gateway.stats().clientCredentialsGrants == 2)
            #expect(try h.vault.tokens.current(for: id)?.tokens.refreshToken == nil)
        }
    }

    @Test("credentials the provider refuses store nothing, and the secret appears in no error or log")
    func refusedStoresNothing() async throws {
        try await SessionHarness.run { h in
            try await h.gateway.registerServiceClient(id: "indexer", authentication: .clientSecretBasic("the-right-secret"))
            let wrong = "the-wrong-secret-4242"
            do {
                try await h.service.signIn(
                    client: ClientSignInRequest(provider: provider(h), clientID: "indexer", authentication: .clientSecretBasic(ClientSecret(wrong))))
                Issue.record("a wrong secret signed in")
            } catch let error as SignInError {
                guard case .tokenRequestFailed(.clientMisconfigured("invalid_client", _), .clientCredentials) = error else {
                    Issue.record("expected invalid_client, got \(error)")
                    return
                }
                #expect(!"\(error)".contains(wrong))
            }
            #expect(try h.vault.accounts.all().isEmpty)
            #expect(!h.logs.contains(wrong))
            // A client registered for the body is refused when it sends Basic, and the reverse.
            try await h.gateway.registerServiceClient(id: "poster", authentication: .clientSecretPost("post-secret"))
            await #expect(throws: SignInError.self) {
                try await h.service.signIn(
                    client: ClientSignInRequest(provider: provider(h), clientID: "poster", authentication: .clientSecretBasic(ClientSecret("post-secret"))))
            }
            #expect(try h.vault.accounts.all().isEmpty)
        }
    }

    @Test("a secret the provider stops accepting: the account is kept and says so; signing it in again with the new one resumes it")
    func secretChangedAtProvider() async throws {
        try await SessionHarness.run { h in
            let (id, _) = try await signInClient(h, "indexer", .clientSecretBasic, lifetime: .seconds(600))
            try await h.gateway.registerServiceClient(id: "indexer", authentication: .clientSecretBasic("rotated-secret-99"))
            await h.time.advance(by: .seconds(700))
            let error = await sessionError { try await h.service.validAccessToken(for: id) }
            guard case .clientMisconfigured(id, "invalid_client", _) = error else {
                Issue.record("expected the client to be refused, got \(String(describing: error))")
                return
            }
            #expect(try h.vault.accounts.find(id) != nil, "the account is kept for its operator to fix")
            let again = try await h.service.signIn(
                client: ClientSignInRequest(
                    provider: provider(h), clientID: "indexer", authentication: .clientSecretBasic(ClientSecret("rotated-secret-99")), account: id))
            #expect(again.account.id == id && again.replacedExisting)
            #expect(try h.vault.accounts.clientSecret(for: id) == "rotated-secret-99")
            #expect(try await profile(h, try await h.service.validAccessToken(for: id)).0 == 200)
        }
    }

    @Test("a key rollover: the new key is stored only once the provider accepts it; until then the old one signs")
    func keyRollover() async throws {
        try await SessionHarness.run { h in
            let (id, old) = try await signInClient(h, "indexer", .privateKeyJWT, lifetime: .seconds(600))
            let oldKey = try #require(old)
            let next = ClientSigningKey.generate()
            await #expect(throws: SignInError.self) { try await h.service.replaceSigningKey(of: id, with: next) }
            #expect(try h.vault.accounts.clientSigningKey(for: id) == oldKey.pemRepresentation, "a key the provider refuses is not kept")

            try await h.gateway.setServiceClientKeys(id: "indexer", jwks: Data(#"{"keys":[\#(oldKey.publicJWK),\#(next.publicJWK)]}"#.utf8))
            try await h.service.replaceSigningKey(of: id, with: next)
            #expect(try h.vault.accounts.clientSigningKey(for: id) == next.pemRepresentation)
            // The provider drops the old key: the client goes on with the new one.
            try await h.gateway.setServiceClientKeys(id: "indexer", jwks: Data(next.publicJWK.utf8))
            await h.time.advance(by: .seconds(700))
            #expect(try await profile(h, try await h.service.validAccessToken(for: id)).0 == 200)
            #expect(try h.vault.maintenance.verify().passed)
        }
    }

    @Test(
        "signing a client out revokes its access token with the same authentication (an assertion's aud is the token endpoint)",
        arguments: [ClientAuthentication.clientSecretPost, .privateKeyJWT])
    func signOutRevokes(_ method: ClientAuthentication) async throws {
        try await SessionHarness.run { h in
            let (id, _) = try await signInClient(h, "indexer", method)
            let token = try await h.service.validAccessToken()
            let report = try await h.service.signOut(id)
            #expect(report.revocation == .revoked, "\(report)")
            let stats = await h.gateway.stats()
            #expect(stats.revocationRequests == 1 && stats.refusedClientAuthentications.isEmpty, "\(stats)")
            #expect(try await profile(h, token).0 == 401, "the revoked token no longer works")
        }
    }

    @Test("a client's account has no session to export: refused, and nothing changes")
    func exportRefused() async throws {
        try await SessionHarness.run { h in
            let (id, _) = try await signInClient(h, "indexer", .clientSecretPost)
            let before = try h.vault.tokens.current(for: id)
            do {
                _ = try await h.service.exportSession(
                    SessionExportRequest(account: id, recipient: try await h.service.recipient())
                ) { _ in Issue.record("a blob was written") }
                Issue.record("a client's account was exported")
            } catch let error as SessionTransferError {
                #expect(error.code == .notTransferable)
            }
            #expect(try h.vault.tokens.current(for: id) == before)
        }
    }
}
