import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// A process that starts after a deadline passed, with no timer having run, judges the
/// session from the deadlines stored in the vault exactly as a long-running one would.
@Suite("Timeouts judged by a freshly started process", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct ColdStartTests {
    static let minute: Duration = .seconds(60)

    enum Scenario: String, CaseIterable, CustomTestStringConvertible {
        case idle, absolute, background, lockedByUser
        var testDescription: String { rawValue }
    }

    @Test("closed, time passes with no timer running, reopened: the right error", arguments: Scenario.allCases)
    func freshProcessJudgesStoredDeadlines(_ scenario: Scenario) async throws {
        try await SessionHarness.run { h in
            let policy: SessionPolicy
            switch scenario {
            case .absolute: policy = SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(20 * 60))
            default: policy = SessionPolicy()
            }
            let alice = try await h.signIn("alice", policy: policy)
            switch scenario {
            case .background: try await h.service.enterBackground()
            case .lockedByUser: try await h.service.lock()
            default: break
            }
            await h.service.stop()
            h.vault.close()

            let away: Duration =
                switch scenario {
                case .idle: Self.minute * 15 + .seconds(1)
                case .absolute: Self.minute * 20 + .seconds(1)
                case .background: Self.minute * 5 + .seconds(1)
                case .lockedByUser: Self.minute
                }
            await h.time.advance(by: away)

            let expected: SessionError =
                switch scenario {
                case .idle: .locked(alice, .idleTimeout)
                case .absolute: .expired(alice, .absoluteTimeout)
                case .background: .locked(alice, .backgroundTimeout)
                case .lockedByUser: .locked(alice, .lockedByUser)
                }
            let reopened = try h.openAnotherVault()
            let fresh = h.makeService(on: reopened)
            #expect(await sessionError { try await fresh.validAccessToken() } == expected)
            await h.expectTokenRequests(0)
            if scenario == .absolute {
                #expect(try reopened.tokenMetadata(for: alice) == nil, "tokens wiped")
            }
        }
    }

    @Test("start() applies deadlines that passed while no process ran, and announces them")
    func startAnnouncesPassedDeadlines() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice")
            await h.service.stop()
            h.vault.close()
            await h.time.advance(by: Self.minute * 16)

            let fresh = h.makeService(on: try h.openAnotherVault())
            let events = EventLog(fresh)
            try await fresh.start()
            #expect(await events.next { $0 == .hardTimeout(alice, .idleTimeout) } != nil)
            #expect(try await fresh.status() == .locked(.idleTimeout))
        }
    }

    @Test("start() does not lock the active account because another account idled out; it expires the dead ones")
    func startJudgesOtherAccountsWithoutLocking() async throws {
        try await SessionHarness.run { h in
            let bob = try await h.signIn("bob")
            let carol = try await h.signIn("carol", policy: SessionPolicy(absoluteLifetime: .seconds(12 * 60)))
            _ = try await h.signIn("alice")
            await h.time.advance(by: Self.minute * 10)
            try await h.service.recordActivity()  // alice is in use; bob and carol are not
            await h.service.stop()
            h.vault.close()
            await h.time.advance(by: Self.minute * 6)

            let fresh = h.makeService(on: try h.openAnotherVault())
            let events = EventLog(fresh)
            try await fresh.start()
            // What a long-running process would say at minute 16: alice is served…
            #expect(try await fresh.status() == .active)
            #expect(try await fresh.validAccessToken().value == (try h.firstTokens(of: "alice").accessToken))
            // …carol's absolute lifetime is over and her tokens are gone…
            #expect(await events.next { $0 == .hardTimeout(carol, .absoluteTimeout) } != nil)
            #expect(try fresh.vault.tokens.metadata(for: carol) == nil)
            // …and bob's idle timeout applies when bob is used.
            try await fresh.switchAccount(to: bob)
            #expect(await sessionError { try await fresh.validAccessToken() } == .locked(bob, .idleTimeout))
        }
    }

    @Test("a locked session stays locked in every new process until unlock(with:)")
    func lockedStaysLockedUntilUnlocked() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice")
            let first = try h.firstTokens(of: "alice")
            await h.service.stop()
            h.vault.close()
            await h.time.advance(by: Self.minute * 16)

            // The first process to look applies the idle timeout…
            let second = h.makeService(on: try h.openAnotherVault())
            #expect(await sessionError { try await second.validAccessToken() } == .locked(alice, .idleTimeout))
            // …and a separate process, opening the vault with its key file, is still refused.
            let probe = try h.probe("tokens", "1")
            try #require(await probe.waitUntilReady())
            probe.go()
            #expect(try await probe.results() == ["error locked idle_timeout"])
            let third = h.makeService(on: try h.openAnotherVault())
            #expect(await sessionError { try await third.validAccessToken() } == .locked(alice, .idleTimeout))

            try await third.unlock(with: h.store.credential)
            #expect(try await third.validAccessToken().value == first.accessToken)
            // The unlock is in the vault: yet another process is served too.
            let fourth = h.makeService(on: try h.openAnotherVault())
            #expect(try await fourth.validAccessToken().value == first.accessToken)
        }
    }
}
