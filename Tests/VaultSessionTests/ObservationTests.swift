import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// A long-running process notices what other processes change in the vault.
@Suite("Seeing other processes", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct ObservationTests {
    static var watching: SessionConfiguration {
        var configuration = SessionConfiguration.testing
        configuration.observationInterval = .seconds(1)
        return configuration
    }

    @Test("another process switches account: accountSwitched once the watch interval ticks")
    func otherProcessSwitchesAccount() async throws {
        try await SessionHarness.run(configuration: Self.watching) { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let bob = try await h.signIn("bob", policy: .tokensOnly)
            try await h.service.start()
            #expect(await h.time.waitForSleeper(until: h.time.at(.seconds(1))), "watch planned at \(h.time.sleepingUntil)")

            let before = h.events.mark
            let probe = try h.probe("switch", alice.rawValue)
            try #require(await probe.waitUntilReady())
            probe.go()
            #expect(try await probe.results() == ["switched"])
            #expect(await h.events.flush())
            #expect(
                h.events.events(after: before) { if case .accountSwitched = $0 { true } else { false } }.isEmpty,
                "nothing is announced before the watch ticks")

            let mark = h.events.mark
            await h.time.advance(by: .seconds(1))
            #expect(await h.events.next(after: mark) { $0 == .accountSwitched(from: bob, to: alice) } != nil)
            #expect(try await h.service.activeAccount() == alice)
            let token = try await h.service.validAccessToken()
            #expect(token.account == alice)
            #expect(token.value == (try h.firstTokens(of: "alice").accessToken))
        }
    }

    @Test("another instance ends a session: stateChanged arrives here on the next tick")
    func otherInstanceEndsSession() async throws {
        try await SessionHarness.run(configuration: Self.watching) { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            try await h.service.start()
            #expect(await h.time.waitForSleeper(until: h.time.at(.seconds(1))))

            let other = h.makeService(on: try h.openAnotherVault())
            try await other.endSession(for: alice)
            let mark = h.events.mark
            await h.time.advance(by: .seconds(1))
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .expired(.endedByUser)) } != nil)
            #expect(await sessionError { try await h.service.validAccessToken() } == .expired(alice, .endedByUser))
        }
    }
}
