import DevGateway
import Foundation
import OAuthWire
import Testing
import VaultSession
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Issue 12, part 2: a token endpoint slower than the refresh lease must never get the same
/// refresh token twice. The holder renews its lease while its request is in flight, so another
/// process (here a second vault handle, which judges the lease only by its expiry) keeps waiting.
@Suite("Lease renewal while a slow refresh is in flight", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct LeaseRenewalTests {
    @Test("a refresh held by the server for three lease durations: the lease stays renewed, a second holder waits, one request in all")
    func slowServerNeverSeesTheRefreshTokenTwice() async throws {
        var configuration = SessionConfiguration.testing
        configuration.leaseDuration = .seconds(3)
        // The held request must outlive the test on a loaded machine: only the test clock moves
        // the lease. Its deadline too: the OAuth client measures it in real time, and under the
        // sanitizers, with the whole suite running, the default 30 s ran out while the test
        // waited for the first renewal, which ended the refresh and with it every renewal.
        configuration.requestDeadline = .seconds(300)
        try await SessionHarness.run(configuration: configuration, transportTimeout: .seconds(300)) { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            await h.gateway.holdTokenResponses()
            let first = Task { try await h.service.validAccessToken() }
            #expect(await h.gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(10))) { $0.tokenRequests == 1 })

            // Three lease durations pass while the server holds its answer; the holder renews
            // every third of one (it sleeps on the test clock between renewals, and the clock
            // moves only once it sleeps again: its renewal is written in between).
            let started = h.time.now()
            for second in 1...9 {
                let next = started.addingTimeInterval(TimeInterval(second))
                #expect(await h.time.waitForSleeper(until: next), "the holder is renewing: \(h.time.sleepingUntil)")
                await h.time.advance(to: next)
            }
            let other = try h.openAnotherVault()
            let state = try other.refreshState(for: alice)
            let expiry = try #require(state.leaseExpiresAt)
            #expect(expiry > h.time.now(), "the lease was renewed past the time that has passed")
            let seen = try #require(try other.tokens(for: alice)).generation
            guard
                case .busy = try other.leases.begin(
                    for: alice, holder: "another process", seenGeneration: seen,
                    leaseDuration: configuration.leaseDuration)
            else {
                Issue.record("a second holder took over a lease that its holder was renewing")
                return
            }

            await h.gateway.releaseTokenResponses()
            let token = try await first.value
            #expect(try h.storedAccessToken(alice) == token.value)
            await h.expectTokenRequests(1)
            #expect(await h.gateway.reuseDetections() == 0)
        }
    }

    /// The configuration of the tests below: the held request outlives any loaded machine.
    static var heldConfiguration: SessionConfiguration {
        var configuration = SessionConfiguration.testing
        configuration.requestDeadline = .seconds(300)
        return configuration
    }

    @Test("a refresh answered after its lease was lost to another caller: the rotated refresh token is kept, and the next refresh is taken")
    func answerAfterLostLeaseIsKept() async throws {
        let configuration = Self.heldConfiguration
        try await SessionHarness.run(configuration: configuration, transportTimeout: .seconds(300)) { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            await h.gateway.holdTokenResponses()
            let first = Task { try await h.service.validAccessToken() }
            #expect(await h.gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(10))) { $0.tokenRequests == 1 })

            // The lease lost while the server holds its answer: let go (as when it lapses) and
            // taken by another caller, which has not sent anything yet.
            let other = try h.openAnotherVault()
            let holder = try #require(try other.refreshState(for: alice).leaseHolder)
            try other.leases.release(for: alice, holder: holder)
            let seen = try #require(try other.tokens(for: alice)).generation
            guard
                case .acquired = try other.leases.begin(
                    for: alice, holder: "another process", seenGeneration: seen, leaseDuration: configuration.leaseDuration)
            else {
                Issue.record("the other caller could not take the lease that was let go")
                return
            }

            await h.gateway.releaseTokenResponses()
            let token = try await first.value
            let answer = try #require(h.transport.exchanges.last?.response)
            let rotated = try #require(answer.refreshToken)
            #expect(token.value == answer.accessToken)
            let stored = try #require(try other.tokens(for: alice))
            #expect(stored.tokens.refreshToken == rotated, "the refresh token the server rotated to is the one kept")
            #expect(stored.generation == seen + 1)

            // The other caller's own result, from the generation it saw, would be discarded; the
            // lease stays with it until it lets go.
            var late = stored.tokens
            late.accessToken = "late-result"
            #expect(try other.leases.complete(for: alice, holder: "another process", from: seen, tokens: late) == nil)
            #expect(try other.refreshState(for: alice).leaseHolder == "another process")
            try other.leases.release(for: alice, holder: "another process")

            // The next refresh presents the rotated token, and the server takes it.
            await h.time.advance(by: .seconds(TimeInterval(answer.expiresIn ?? 3600)))
            let next = try await h.service.validAccessToken()
            #expect(next.value != token.value)
            #expect(h.transport.exchanges.last?.presentedRefreshToken == rotated)
            await h.expectTokenRequests(2)
            #expect(await h.gateway.reuseDetections() == 0)
            #expect(try other.sessions.current(for: alice)?.state == .active)
        }
    }

    @Test("invalid_grant for a refresh token another caller has since replaced: the grant stands and the caller gets the newer token")
    func staleRefusalLeavesTheGrant() async throws {
        try await SessionHarness.run(configuration: Self.heldConfiguration, transportTimeout: .seconds(300)) { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            await h.gateway.failNextTokenRequests(1, with: TokenFault(status: 400, error: "invalid_grant"))
            await h.gateway.holdTokenResponses()
            let first = Task { try await h.service.validAccessToken() }
            #expect(await h.gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(10))) { $0.tokenRequests == 1 })

            // Meanwhile another caller stores newer tokens (its own refresh, after this one's
            // lease lapsed): the refresh token in flight is no longer the account's.
            let other = try h.openAnotherVault()
            let seen = try #require(try other.tokens(for: alice))
            var newer = seen.tokens
            newer.accessToken = "stored-by-another-caller"
            newer.refreshToken = "rotated-by-another-caller"
            newer.accessTokenExpiresAt = h.time.now().addingTimeInterval(3600)
            _ = try other.tokens.store(newer, for: alice, replacing: seen.generation)

            await h.gateway.releaseTokenResponses()
            let token = try await first.value
            #expect(token.value == "stored-by-another-caller")
            #expect(try other.sessions.current(for: alice)?.state == .active, "the refusal of a replaced token did not end the session")
            #expect(try other.tokens(for: alice)?.tokens.refreshToken == "rotated-by-another-caller")
            #expect(try other.refreshState(for: alice).leaseHolder == nil, "the refused caller let its lease go")
            await h.expectTokenRequests(1)
        }
    }
}
