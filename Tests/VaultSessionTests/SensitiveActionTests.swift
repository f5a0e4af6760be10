import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 37, item 3: Para's "a sensitive action extends the session by its length", up to a cap;
/// and a refresh-token lifetime set per account, warned of by the grant watch.
@Suite("Sensitive actions and per-account refresh-token lifetimes", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct SensitiveActionTests {
    static let hour: Duration = .seconds(3600)

    @Test("a sensitive action moves the absolute deadline to now + the lifetime, never past sign-in + the cap, never back; without a cap it is activity only")
    func absoluteDeadlineMoves() async throws {
        try await SessionHarness.run { h in
            let policy = SessionPolicy(
                idleTimeout: Self.hour * 2, warningBefore: .seconds(60), absoluteLifetime: Self.hour * 2, backgroundTimeout: nil,
                sensitiveActionCap: Self.hour * 8)
            let alice = try await h.signIn("alice", policy: policy)
            let start = h.time.now()
            func deadline() throws -> Date? { try h.vault.sessions.current(for: alice)?.absoluteDeadline }
            #expect(try deadline() == start.addingTimeInterval(2 * 3600))

            await h.time.advance(by: Self.hour + .seconds(1800))
            let moved = try await h.service.recordSensitiveAction(for: alice)
            #expect(moved.absoluteDeadline == start.addingTimeInterval(3.5 * 3600))
            #expect(moved.lastActivityAt == h.time.now(), "a sensitive action is activity")
            #expect(try deadline() == start.addingTimeInterval(3.5 * 3600))

            // One an hour: 4.5 h, 5.5 h, 6.5 h, 7.5 h, then capped at sign-in + 8 h.
            for hours in [4.5, 5.5, 6.5, 7.5, 8] {
                await h.time.advance(by: Self.hour)
                #expect(try await h.service.recordSensitiveAction(for: alice).absoluteDeadline == start.addingTimeInterval(hours * 3600))
            }
            await h.time.advance(by: Self.hour * 3 / 2)
            #expect(try await h.service.status(of: alice) == .expired(.absoluteTimeout), "the cap holds")
            let refused = await sessionError { try await h.service.recordSensitiveAction(for: alice) }
            #expect(refused == .expired(alice, .absoluteTimeout))

            // Without a cap: activity, and the deadline stays.
            let bob = try await h.signIn("bob", policy: SessionPolicy(idleTimeout: Self.hour * 2, absoluteLifetime: Self.hour * 2, backgroundTimeout: nil))
            let bobStart = h.time.now()
            await h.time.advance(by: Self.hour)
            let touched = try await h.service.recordSensitiveAction(for: bob)
            #expect(touched.absoluteDeadline == bobStart.addingTimeInterval(2 * 3600) && touched.lastActivityAt == h.time.now())
        }
    }

    @Test("changing another part of the policy keeps the deadline sensitive actions set, within the new cap")
    func policyChangeKeepsTheMovedDeadline() async throws {
        try await SessionHarness.run { h in
            var policy = SessionPolicy(
                idleTimeout: Self.hour * 2, absoluteLifetime: Self.hour * 2, backgroundTimeout: nil, sensitiveActionCap: Self.hour * 8)
            let alice = try await h.signIn("alice", policy: policy)
            let start = h.time.now()
            await h.time.advance(by: Self.hour)
            #expect(try await h.service.recordSensitiveAction(for: alice).absoluteDeadline == start.addingTimeInterval(3 * 3600))
            policy.refreshTokenLifetime = .seconds(90 * 86_400)
            try await h.service.setSessionPolicy(policy, for: alice)
            #expect(try h.vault.sessions.current(for: alice)?.absoluteDeadline == start.addingTimeInterval(3 * 3600), "kept")
            policy.sensitiveActionCap = Self.hour * 2.5
            try await h.service.setSessionPolicy(policy, for: alice)
            #expect(try h.vault.sessions.current(for: alice)?.absoluteDeadline == start.addingTimeInterval(2.5 * 3600), "within the new cap")
            policy.sensitiveActionCap = nil
            try await h.service.setSessionPolicy(policy, for: alice)
            #expect(try h.vault.sessions.current(for: alice)?.absoluteDeadline == start.addingTimeInterval(2 * 3600), "no cap: the lifetime from sign-in")
        }
    }

    @Test("a policy with a cap but no absolute lifetime, or a cap shorter than the lifetime, is refused")
    func capNeedsALifetime() {
        #expect(throws: VaultError.self) { try SessionPolicy(absoluteLifetime: nil, sensitiveActionCap: Self.hour).validate() }
        #expect(throws: VaultError.self) { try SessionPolicy(absoluteLifetime: Self.hour * 2, sensitiveActionCap: Self.hour).validate() }
        #expect(throws: Never.self) { try SessionPolicy(absoluteLifetime: Self.hour * 2, sensitiveActionCap: Self.hour * 2).validate() }
    }

    @Test("an account's refresh-token lifetime (set by policy, nothing else telling): warned of at sign-in + lifetime - the warning")
    func configuredRefreshLifetime() async throws {
        var configuration = SessionConfiguration.testing
        configuration.grantWatch = GrantWatch(checkInterval: nil, refreshExpiryWarning: .seconds(3 * 86_400))
        try await SessionHarness.run(configuration: configuration) { h in
            let alice = try await h.signIn(
                "alice", expiresIn: .seconds(30 * 86_400),
                policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: nil, refreshTokenLifetime: .seconds(10 * 86_400)))
            let start = h.time.now()
            try await h.service.start()
            let mark = h.events.mark
            func warned() -> Bool { !h.events.events(after: mark) { if case .refreshTokenExpiring = $0 { true } else { false } }.isEmpty }
            // The watch looks at least hourly: half a day at a time, to day 6 (nothing), then day 7.
            for _ in 0..<12 { await h.time.advance(by: Self.hour * 12) }
            #expect(await h.events.flush())
            #expect(!warned(), "not before day 7")
            await h.time.advance(by: Self.hour * 24)
            #expect(await h.events.next(after: mark) { $0 == .refreshTokenExpiring(alice, expiresAt: start.addingTimeInterval(10 * 86_400)) } != nil)
            await h.expectTokenRequests(0)
        }
    }
}
