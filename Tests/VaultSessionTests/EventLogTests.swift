import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 13, part 2: a subscriber in one process sees, in order, what another process causes.
@Suite("Events every process sees", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct EventLogTests {
    @Test("what another instance does (switch, refresh, lock, unlock, end) arrives here, in order")
    func otherInstanceEventsArriveInOrder() async throws {
        var configuration = SessionConfiguration.testing
        configuration.observationInterval = .seconds(1)
        try await SessionHarness.run(configuration: configuration) { h in
            let policy = SessionPolicy.tokensOnly
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: policy)
            let bob = try await h.signIn("bob", policy: policy)
            try await h.service.start()
            let mark = h.events.mark

            // Another instance on its own connections, as another process.
            let credential = h.store.credential
            let other = h.makeService(on: try h.openAnotherVault())
            try await other.switchAccount(to: alice)
            _ = try await other.validAccessToken()  // refresh (30 s < leeway)
            try await other.lock()
            try await other.unlock(with: credential)
            try await other.endSession(for: alice)
            await other.stop()

            await h.time.advance(by: .seconds(1))
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .expired(.endedByUser)) } != nil)
            let seen = h.events.events(after: mark) { _ in true }
            let kinds = seen.compactMap { event -> String? in
                switch event {
                case .accountSwitched(from: bob, to: alice): "switched"
                case .tokenRefreshed(alice, _): "refreshed"
                case .stateChanged(alice, .locked(.lockedByUser)): "locked"
                case .stateChanged(alice, .active): "unlocked"
                case .stateChanged(alice, .expired(.endedByUser)): "ended"
                default: nil
                }
            }
            #expect(kinds == ["switched", "refreshed", "locked", "unlocked", "ended"], "\(seen)")
        }
    }
}
