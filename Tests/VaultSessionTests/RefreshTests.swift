import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// Refreshing ahead of expiry against a real gateway: when a request goes out, what is
/// stored, and that a rotated refresh token is never presented again.
@Suite("Refresh ahead of expiry", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct RefreshTests {
    @Test("a fresh token is served without asking the server; one inside the leeway is refreshed and the rotation stored")
    func refreshesOnlyInsideTheLeeway() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: .tokensOnly)
            let first = try h.firstTokens(of: "alice")

            let fresh = try await h.service.validAccessToken()
            #expect(fresh.value == first.accessToken)
            #expect(fresh.account == alice)
            await h.expectTokenRequests(0)

            // 30 s before expiry: inside the 60 s leeway.
            await h.time.advance(by: .seconds(3570))
            let mark = h.events.mark
            let refreshed = try await h.service.validAccessToken()
            await h.expectTokenRequests(1)
            #expect(refreshed.value != first.accessToken)
            #expect(h.owner(ofAccessToken: refreshed.value) == "alice")
            #expect(refreshed.expiresAt == h.time.now().addingTimeInterval(3600))

            let stored = try #require(try h.vault.tokens.current(for: alice))
            let exchange = try #require(h.transport.exchanges.last?.response)
            let rotated = try #require(exchange.refreshToken)
            #expect(rotated != first.refreshToken)
            #expect(stored.tokens.refreshToken == rotated, "the vault keeps the rotated refresh token")
            #expect(stored.tokens.accessToken == refreshed.value)
            #expect(await h.events.next(after: mark) { $0 == .tokenRefreshed(alice, generation: stored.generation) } != nil)

            // Asking again right away serves the stored token.
            #expect(try await h.service.validAccessToken().value == refreshed.value)
            await h.expectTokenRequests(1)
            h.expectNoTokenInLogs()
        }
    }

    @Test("over several refreshes each rotated refresh token is presented exactly once")
    func rotatedTokensAreNeverSentAgain() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            var served: [String] = []
            for _ in 0..<6 {
                served.append(try await h.service.validAccessToken().value)
                await h.time.advance(by: .seconds(3570))
            }
            let stats = await h.gateway.stats()
            #expect(stats.tokenRequests == 6)
            #expect(Set(stats.presentedRefreshTokens).count == stats.presentedRefreshTokens.count, "a refresh token was presented twice")
            #expect(stats.reuseDetections == 0)
            #expect(Set(served).count == 6)
            // Each request presented the refresh token the previous answer rotated to.
            let issuedChain = [try h.firstTokens(of: "alice").refreshToken] + h.transport.exchanges.map { $0.response?.refreshToken }
            #expect(stats.presentedRefreshTokens == issuedChain.prefix(6).compactMap { $0 })
            #expect(try h.vault.tokens.current(for: alice)?.tokens.refreshToken == issuedChain.last ?? nil)
            h.expectNoTokenInLogs()
        }
    }

    @Test("an API's 401 refreshes once; a 401 for a token already replaced sends nothing")
    func unauthorizedRefreshesOnce() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: .tokensOnly)
            let rejected = try await h.service.validAccessToken()
            let replacement = try await h.service.reportUnauthorized(rejected)
            #expect(replacement.account == alice)
            #expect(replacement.value != rejected.value)
            #expect(h.owner(ofAccessToken: replacement.value) == "alice")
            await h.expectTokenRequests(1)

            // Another caller reports the same old token: it gets the new one, no second refresh.
            #expect(try await h.service.reportUnauthorized(rejected) == replacement)
            await h.expectTokenRequests(1)
            #expect(try await h.service.validAccessToken() == replacement)
        }
    }

    @Test("200 concurrent callers share one refresh and all get the same new token")
    func concurrentCallersShareOneRefresh() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            let first = try h.firstTokens(of: "alice")
            let service = h.service
            let tokens = try await withThrowingTaskGroup(of: AccessToken.self) { group in
                for _ in 0..<200 { group.addTask { try await service.validAccessToken() } }
                return try await group.reduce(into: [AccessToken]()) { $0.append($1) }
            }
            #expect(tokens.count == 200)
            await h.expectTokenRequests(1)
            let values = Set(tokens.map(\.value))
            #expect(values.count == 1)
            #expect(values.first != first.accessToken)
            #expect(values.first == (try h.storedAccessToken(alice)))
            #expect(Set(tokens.map(\.account)) == [alice])
            h.expectNoTokenInLogs()
        }
    }
}

/// Callers that share a refresh: one that gives up leaves at once, and the refresh it started
/// is still stored for the others (its rotated refresh token must not be lost).
@Suite("Callers sharing a refresh", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct SharedRefreshCancellationTests {
    @Test("a caller cancelled while the refresh is in flight leaves at once; the others get the stored refresh")
    func cancelledCallerLeavesTheRefreshToTheOthers() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            let service = h.service
            h.transport.holdNextResponse()
            let leaving = Task { try await service.validAccessToken() }
            #expect(await h.transport.waitUntilHolding(), "the refresh reached the server")
            let staying = (0..<3).map { _ in Task { try await service.validAccessToken() } }

            // The server has answered (the answer is held): the cancelled caller does not wait for it.
            leaving.cancel()
            await #expect(throws: CancellationError.self) { try await leaving.value }

            h.transport.releaseHeldResponse()
            var served: Set<String> = []
            for caller in staying { served.insert(try await caller.value.value) }
            #expect(served.count == 1, "the waiting callers share one refreshed token")
            let stored = try #require(try h.vault.tokens.current(for: alice))
            #expect(served.first == stored.tokens.accessToken, "the refresh the cancelled caller started was stored")
            #expect(stored.tokens.refreshToken == h.transport.exchanges.last?.response?.refreshToken, "the rotated refresh token was kept")
            await h.expectTokenRequests(1)
        }
    }
}
