import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// The codelab's session events, driven by the test clock: idle warning, extension, hard
/// timeout; plus the absolute lifetime and the background timeout. Default policy: 15 min
/// idle, warning 60 s before, 3 extensions, 12 h absolute, 5 min in the background, lock.
@Suite("Idle warning, extension and timeouts", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct IdleTimeoutTests {
    static let minute: Duration = .seconds(60)

    /// Signs alice in, waits for the timer to plan the 14-minute warning, advances to it
    /// and returns the warning.
    static func advanceToFirstWarning(_ h: SessionHarness, policy: SessionPolicy? = nil) async throws
        -> (AccountID, IdleWarning)
    {
        let alice = try await h.signIn("alice", policy: policy)
        #expect(await h.time.waitForSleeper(until: h.time.at(minute * 14)), "timer planned at \(h.time.sleepingUntil)")
        let mark = h.events.mark
        await h.time.advance(by: minute * 14)
        let warning = try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning)
        return (alice, warning)
    }

    @Test("the idle warning comes 60 s before the idle deadline, not earlier")
    func warningAtTheRightSecond() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice")
            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 14)), "timer planned at \(h.time.sleepingUntil)")

            await h.time.advance(by: Self.minute * 14 - .seconds(1))
            #expect(try await h.service.status() == .active)
            #expect(await h.events.flush())
            #expect(h.events.events { $0.isIdleWarning }.isEmpty, "warned before 14:00")

            await h.time.advance(by: .seconds(1))
            let warning = try #require(await h.events.next { $0.isIdleWarning }?.idleWarning)
            #expect(warning.account == alice)
            #expect(warning.secondsLeft == 60)
            #expect(warning.canExtend)
            #expect(warning.deadline == h.time.at(Self.minute * 15))
            #expect(h.time.now() == h.time.at(Self.minute * 14))
            #expect(await h.events.flush())
            #expect(h.events.events { $0.isIdleWarning }.count == 1, "one warning per deadline")
        }
    }

    @Test("activity moves the idle deadline: the warning comes 14 minutes after the last activity")
    func activityPostponesTheWarning() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice")
            await h.time.advance(by: Self.minute * 10)
            try await h.service.recordActivity()
            #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == h.time.at(Self.minute * 25))
            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 24)), "timer planned at \(h.time.sleepingUntil)")

            await h.time.advance(by: Self.minute * 14 - .seconds(1))
            #expect(try await h.service.status() == .active)
            #expect(await h.events.flush())
            #expect(h.events.events { $0.isIdleWarning }.isEmpty, "warned although there was activity")
            await h.time.advance(by: .seconds(1))
            let warning = try #require(await h.events.next { $0.isIdleWarning }?.idleWarning)
            #expect(warning.deadline == h.time.at(Self.minute * 25))
            #expect(warning.secondsLeft == 60)
        }
    }

    @Test("an extension moves the idle deadline and counts down; past the limit it is refused")
    func extensionsUntilTheLimit() async throws {
        try await SessionHarness.run { h in
            let (alice, firstWarning) = try await Self.advanceToFirstWarning(h)
            var warning = firstWarning
            for remaining in [2, 1, 0] {
                #expect(warning.canExtend)
                let now = h.time.now()
                let mark = h.events.mark
                let result = try await h.service.extendSession()
                #expect(result == .extended(idleDeadline: now.addingTimeInterval(15 * 60), remaining: remaining))
                #expect(await h.events.next(after: mark) { $0 == .extensionResult(alice, result) } != nil)
                #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == now.addingTimeInterval(15 * 60))

                // The user comes back a minute later, then leaves again: the next warning comes
                // 14 minutes after that activity (an idle session is not extended twice).
                await h.time.advance(by: Self.minute)
                try await h.service.recordActivity()
                #expect(await h.time.waitForSleeper(until: now.addingTimeInterval(15 * 60)), "timer planned at \(h.time.sleepingUntil)")
                let next = h.events.mark
                await h.time.advance(by: Self.minute * 14)
                warning = try #require(await h.events.next(after: next) { $0.isIdleWarning }?.idleWarning)
                #expect(warning.secondsLeft == 60)
                #expect(warning.deadline == now.addingTimeInterval(16 * 60))
            }
            #expect(!warning.canExtend, "the last warning says no extension is left")
            #expect(try await h.service.extendSession() == .refused(.limitReached))
            #expect(try h.vault.sessions.current(for: alice)?.extensionsUsed == 3)

            // The refused extension changed nothing: the session still ends at its deadline.
            #expect(await h.time.waitForSleeper(until: warning.deadline))
            let mark = h.events.mark
            await h.time.advance(by: .seconds(60))
            #expect(await h.events.next(after: mark) { $0 == .hardTimeout(alice, .idleTimeout) } != nil)
        }
    }

    @Test("a session nobody used since its extension is not extended again: the warning says so, the request is refused, activity makes it extendable")
    func idleSessionsAreNotExtendedTwice() async throws {
        try await SessionHarness.run { h in
            let (alice, _) = try await Self.advanceToFirstWarning(h)
            let extendedAt = h.time.now()
            #expect(try await h.service.extendSession() == .extended(idleDeadline: extendedAt.addingTimeInterval(15 * 60), remaining: 2))
            let stored = try #require(try h.vault.sessions.current(for: alice))
            #expect(stored.lastActivityAt < extendedAt, "an extension is not activity")

            // Nothing happens until the next warning: it says no extension, and none is granted.
            #expect(await h.time.waitForSleeper(until: extendedAt.addingTimeInterval(14 * 60)))
            var mark = h.events.mark
            await h.time.advance(by: Self.minute * 14)
            let idle = try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning)
            #expect(!idle.canExtend)
            #expect(try await h.service.extendSession() == .refused(.noActivitySinceExtension))
            #expect(try h.vault.sessions.current(for: alice)?.extensionsUsed == 1)

            // Activity (the user is back) moves the deadline; at the warning after it, an
            // extension is allowed again.
            try await h.service.recordActivity()
            let activeAt = h.time.now()
            #expect(await h.time.waitForSleeper(until: activeAt.addingTimeInterval(14 * 60)))
            mark = h.events.mark
            await h.time.advance(by: Self.minute * 14)
            #expect(try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning).canExtend)
            #expect(try await h.service.extendSession() == .extended(idleDeadline: h.time.now().addingTimeInterval(15 * 60), remaining: 1))
        }
    }

    @Test("a second extension while one is in flight is ignored")
    func oneExtensionInFlight() async throws {
        let gate = ExtensionGate()
        try await SessionHarness.run(extensionHandler: gate.handler) { h in
            let (alice, _) = try await Self.advanceToFirstWarning(h)
            let service = h.service
            let first = Task { try await service.extendSession() }
            #expect(await gate.waitUntilAsked(1))

            #expect(try await h.service.extendSession() == .ignored)
            #expect(gate.asked == 1, "the ignored request never reached the server")
            gate.answer(true)
            #expect(try await first.value == .extended(idleDeadline: h.time.at(Self.minute * 29), remaining: 2))
            #expect(try h.vault.sessions.current(for: alice)?.extensionsUsed == 1)

            // Once answered, a new request goes through again (after activity: an idle session is
            // not extended twice); the server may refuse it.
            try await h.service.recordActivity()
            let second = Task { try await service.extendSession() }
            #expect(await gate.waitUntilAsked(2))
            gate.answer(false)
            #expect(try await second.value == .refused(.serverRefused))
            #expect(try h.vault.sessions.current(for: alice)?.extensionsUsed == 1)
        }
    }

    @Test("hard timeout at the idle deadline locks; tokens need an unlock with the key file")
    func hardTimeoutLocks() async throws {
        try await SessionHarness.run { h in
            let (alice, warning) = try await Self.advanceToFirstWarning(h)
            #expect(await h.time.waitForSleeper(until: warning.deadline), "timer planned at \(h.time.sleepingUntil)")
            let mark = h.events.mark
            await h.time.advance(by: .seconds(59))
            #expect(try await h.service.status() == .active)
            await h.time.advance(by: .seconds(1))
            #expect(await h.events.next(after: mark) { $0 == .hardTimeout(alice, .idleTimeout) } != nil)
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .locked(.idleTimeout)) } != nil)

            #expect(await sessionError { try await h.service.validAccessToken() } == .locked(alice, .idleTimeout))
            #expect(try await h.service.status() == .locked(.idleTimeout))
            #expect(h.vault.isLocked, "the keys are out of memory")
            #expect(try await h.service.extendSession() == .refused(.sessionOver), "a hard timeout is never bypassed")

            // A wrong key file changes nothing.
            let wrongKey = h.store.directory.file("wrong.key")
            try VaultCredential.createKeyFile(at: wrongKey)
            await #expect(throws: SessionError.self) { try await h.service.unlock(with: .keyFile(wrongKey)) }
            #expect(await sessionError { try await h.service.validAccessToken() } == .locked(alice, .idleTimeout))

            let unlockMark = h.events.mark
            try await h.service.unlock(with: h.store.credential)
            #expect(await h.events.next(after: unlockMark) { $0 == .stateChanged(alice, .active) } != nil)
            let token = try await h.service.validAccessToken()
            #expect(token.value == (try h.firstTokens(of: "alice").accessToken))
            #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == h.time.now().addingTimeInterval(15 * 60))
        }
    }

    @Test("the absolute lifetime expires the session, wipes its tokens and is never extended")
    func absoluteLifetime() async throws {
        try await SessionHarness.run { h in
            let policy = SessionPolicy(absoluteLifetime: .seconds(20 * 60))
            let (alice, _) = try await Self.advanceToFirstWarning(h, policy: policy)
            // Extending is capped at the absolute deadline (20:00), not 14:00 + 15 min.
            #expect(try await h.service.extendSession() == .extended(idleDeadline: h.time.at(Self.minute * 20), remaining: 2))

            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 19)), "timer planned at \(h.time.sleepingUntil)")
            var mark = h.events.mark
            await h.time.advance(by: Self.minute * 5)
            let warning = try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning)
            #expect(warning.secondsLeft == 60)
            #expect(!warning.canExtend)
            #expect(try await h.service.extendSession() == .refused(.absoluteLifetimeReached))

            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 20)))
            mark = h.events.mark
            await h.time.advance(by: Self.minute)
            #expect(await h.events.next(after: mark) { $0 == .hardTimeout(alice, .absoluteTimeout) } != nil)
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .expired(.absoluteTimeout)) } != nil)
            #expect(try h.vault.tokens.metadata(for: alice) == nil, "tokens wiped")
            #expect(await sessionError { try await h.service.validAccessToken() } == .expired(alice, .absoluteTimeout))
            #expect(try await h.service.extendSession() == .refused(.sessionOver))
            await h.expectTokenRequests(0)
        }
    }

    @Test("more than 5 minutes in the background locks the session on return")
    func backgroundTimeoutLocks() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice")
            await h.time.advance(by: Self.minute)
            try await h.service.enterBackground()
            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 6)), "timer planned at \(h.time.sleepingUntil)")
            let mark = h.events.mark
            await h.time.advance(by: Self.minute * 5 + .seconds(1))

            #expect(await sessionError { try await h.service.enterForeground() } == .locked(alice, .backgroundTimeout))
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .locked(.backgroundTimeout)) } != nil)
            #expect(try await h.service.status() == .locked(.backgroundTimeout))
            #expect(await sessionError { try await h.service.validAccessToken() } == .locked(alice, .backgroundTimeout))
        }
    }

    @Test("under 5 minutes in the background the session stays active and the warning counts the time away")
    func shortBackgroundKeepsTheCountdown() async throws {
        try await SessionHarness.run { h in
            let (alice, warning) = try await Self.advanceToFirstWarning(h)
            #expect(warning.secondsLeft == 60)
            try await h.service.enterBackground()
            await h.time.advance(by: .seconds(30))
            let mark = h.events.mark
            try await h.service.enterForeground()

            #expect(try await h.service.status() == .active)
            let resumed = try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning)
            #expect(resumed.account == alice)
            #expect(resumed.secondsLeft == 30)
            #expect(resumed.deadline == warning.deadline)
            #expect(try await h.service.validAccessToken().account == alice)
        }
    }
}
