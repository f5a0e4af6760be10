import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
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
}
