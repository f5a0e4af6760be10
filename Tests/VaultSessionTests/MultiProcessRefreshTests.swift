import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// Several processes on one vault file share one refresh through the lease in the vault.
@Suite("Refresh shared across processes", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct MultiProcessRefreshTests {
    @Test("4 processes × 50 callers: one request reaches the server and every caller gets the token the vault holds")
    func fourProcessesShareOneRefresh() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            let first = try h.firstTokens(of: "alice")
            let probes = try (0..<4).map { _ in try h.probe("tokens", "50") }
            for probe in probes {
                let ready = await probe.waitUntilReady()
                try #require(ready, "a probe did not start: \(probe.output.value)")
            }
            probes.forEach { $0.go() }
            var lines: [String] = []
            for probe in probes {
                let results = try await probe.results()
                #expect(results.count == 50)
                lines += results
            }

            await h.expectTokenRequests(1)
            let stored = try #require(try h.storedAccessToken(alice))
            #expect(stored != first.accessToken)
            #expect(Set(lines) == ["token \(digest(stored))"], "every caller in every process gets the token the vault holds")
            #expect(await h.gateway.reuseDetections() == 0)
        }
    }
}

/// Issue 34: refreshes for other targets take the account's lease like its own refresh, so
/// processes asking for both at once present one refresh token at a time.
@Suite("Tokens for targets shared across processes", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct MultiProcessTargetTests {
    @Test("3 processes × 20 callers, half for another API: one request for each token, no refresh token presented twice")
    func processesShareTargetRefreshes() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly, rotatesRefreshTokens: true)
            let files = h.gateway.resourceServer(named: "files")
            let probes = try (0..<3).map { _ in try h.probe("target", "20:\(files)") }
            for probe in probes {
                let ready = await probe.waitUntilReady()
                try #require(ready, "a probe did not start: \(probe.output.value)")
            }
            probes.forEach { $0.go() }
            var lines: [String] = []
            for probe in probes { lines += try await probe.results() }

            await h.expectTokenRequests(2)
            #expect(await h.gateway.reuseDetections() == 0)
            let own = try #require(try h.storedAccessToken(alice))
            let target = try #require(try h.vault.tokens.token(for: alice, target: try TokenTarget(resources: [files]))?.accessToken)
            #expect(Set(lines) == ["own \(digest(own))", "target \(digest(target))"], "\(Set(lines))")
        }
    }
}

/// Issue 34, item 2 across processes: a client's token, due, is obtained again once for every
/// caller of every process — the client credentials grant under the same lease as a refresh.
@Suite("Client accounts across processes", .timeLimit(.minutes(TestTimeScale.minutes(2))))
struct MultiProcessClientTests {
    @Test("3 processes × 20 callers, half for another API: one client credentials grant for each token")
    func processesShareClientGrants() async throws {
        try await SessionHarness.run { h in
            // Tokens of 30 s: due at once (the leeway is a minute).
            try await h.gateway.registerServiceClient(id: "indexer", authentication: .clientSecretPost("indexer-secret"), accessTokenLifetime: .seconds(30))
            let provider = ProviderMetadata(issuer: h.gateway.baseURL.absoluteString, tokenEndpoint: h.gateway.tokenEndpoint)
            let account = try await h.service.signIn(
                client: ClientSignInRequest(provider: provider, clientID: "indexer", authentication: .clientSecretPost(ClientSecret("indexer-secret"))))
            // The tokens obtained from now on live an hour: one grant serves everyone after it.
            try await h.gateway.registerServiceClient(id: "indexer", authentication: .clientSecretPost("indexer-secret"))
            let files = h.gateway.resourceServer(named: "files")
            let probes = try (0..<3).map { _ in try h.probe("target", "20:\(files)") }
            for probe in probes {
                let ready = await probe.waitUntilReady()
                try #require(ready, "a probe did not start: \(probe.output.value)")
            }
            probes.forEach { $0.go() }
            var lines: [String] = []
            for probe in probes { lines += try await probe.results() }

            #expect(await h.gateway.stats().clientCredentialsGrants == 3, "the sign-in's, then one for each token")
            let id = account.account.id
            let own = try #require(try h.storedAccessToken(id))
            let target = try #require(try h.vault.tokens.token(for: id, target: try TokenTarget(resources: [files]))?.accessToken)
            #expect(Set(lines) == ["own \(digest(own))", "target \(digest(target))"], "\(Set(lines))")
            #expect(try h.vault.tokens.current(for: id)?.tokens.refreshToken == nil)
        }
    }
}
