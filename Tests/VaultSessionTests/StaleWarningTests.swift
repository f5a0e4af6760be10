import Foundation
import Testing
import VaultStore
import VaultTestSupport

@testable import VaultSession

/// Issue 37's stale warnings: an idle warning judged on a deadline older than one already known
/// (another process extended the session before the warning arrived) is never raised.
@Suite("Idle warnings that cannot go stale")
struct StaleWarningTests {
    let alice = AccountID(rawValue: "alice")
    let d0 = Date(timeIntervalSince1970: 1_790_000_000)
    var d1: Date { d0.addingTimeInterval(600) }

    /// The warnings `scheduler` lets through, in order, for `deadlines` of `account`.
    static func raised(_ scheduler: inout TimeoutScheduler, _ account: AccountID, _ deadlines: [Date]) -> [Bool] {
        deadlines.map { scheduler.firstWarning(for: account, deadline: $0) }
    }

    @Test("a warning is raised once per deadline; a later judgement on an earlier deadline (a shorter idle timeout) is raised too")
    func oncePerDeadline() {
        var scheduler = TimeoutScheduler()
        #expect(Self.raised(&scheduler, alice, [d0, d0]) == [true, false], "the same deadline once")
        #expect(Self.raised(&scheduler, alice, [d1, d0]) == [true, true], "staleness is the vault's to say, not a remembered deadline")
        scheduler.forgetWarning(for: alice)
        #expect(Self.raised(&scheduler, alice, [d0]) == [true], "forgotten: raised again")
        #expect(Self.raised(&scheduler, AccountID(rawValue: "bob"), [d0]) == [true], "another account is another story")
    }

    @Test("a deadline in full precision and the same deadline read back from the vault (milliseconds) are one: raised once")
    func extensionDeadlineAtVaultPrecision() {
        var scheduler = TimeoutScheduler()
        let computed = d1.addingTimeInterval(0.000_7)  // as computed here, 0.7 ms past
        let stored = Date(millisecondsSince1970: computed.millisecondsSince1970)  // as read back
        #expect(Self.raised(&scheduler, alice, [computed, stored]) == [true, false])
    }

    @Test("activity withdraws a warning, then a shorter idle timeout: the warning for the earlier deadline still comes")
    func shorterTimeoutAfterWithdrawal() async throws {
        let policy = SessionPolicy(idleTimeout: .seconds(60), warningBefore: .seconds(10), absoluteLifetime: .seconds(3600), backgroundTimeout: nil)
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: policy)
            let start = h.time.now()
            #expect(await h.time.waitForSleeper(until: start.addingTimeInterval(50)))
            await h.time.advance(by: .seconds(51))
            #expect(await h.events.next { $0.isIdleWarning } != nil)
            try await h.service.recordActivity(for: alice)  // deadline 111 s, the warning withdrawn
            #expect(await h.events.next { $0 == .idleWarningWithdrawn(alice, idleDeadline: start.addingTimeInterval(111)) } != nil)
            var shorter = policy
            shorter.idleTimeout = .seconds(30)
            try await h.service.setSessionPolicy(shorter, for: alice)  // deadline 81 s: earlier than 111
            let mark = h.events.mark
            #expect(await h.time.waitForSleeper(until: start.addingTimeInterval(71)), "\(h.time.sleepingUntil)")
            await h.time.advance(to: start.addingTimeInterval(71))
            let warning = try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning)
            #expect(warning.deadline == start.addingTimeInterval(81))
        }
    }

    @Test("a receiver's filter drops warnings judged on an older deadline or session version, or after the session was seen to end")
    func receiverFilter() {
        func warning(_ deadline: Date, version: Int64, session: Int64 = 1) -> SessionEvent {
            .idleWarning(
                IdleWarning(account: alice, secondsLeft: 10, deadline: deadline, canExtend: true, session: SessionStamp(session: session, version: version)))
        }
        let bob = AccountID(rawValue: "bob")
        var filter = StaleWarningFilter()
        func admits(_ event: SessionEvent) -> Bool { filter.admits(event) }
        #expect(admits(warning(d0, version: 3)))
        #expect(admits(warning(d0, version: 3)), "the same warning again is not older")
        #expect(!admits(warning(d0, version: 2)), "an older version of the session")
        #expect(admits(.extensionResult(alice, .extended(idleDeadline: d1, remaining: 1))))
        #expect(!admits(warning(d0, version: 5)), "judged on the deadline the extension replaced")
        #expect(admits(warning(d1, version: 6)))
        let d2 = d1.addingTimeInterval(600)
        #expect(admits(.idleWarningWithdrawn(alice, idleDeadline: d2)))
        #expect(!admits(warning(d1, version: 7)), "activity moved the deadline on")
        #expect(admits(.stateChanged(alice, .locked(.idleTimeout))))
        #expect(!admits(warning(d2, version: 8)), "the session was seen to lock")
        #expect(admits(warning(d0, version: 1, session: 9).withAccount(bob)), "another account is another story")
        #expect(admits(.stateChanged(alice, .active)))
        #expect(admits(warning(d2.addingTimeInterval(60), version: 9)), "resumed: warnings are news again")
        // Deadlines are compared at the vault's millisecond precision.
        var precise = StaleWarningFilter()
        precise.learn(d2.addingTimeInterval(0.000_4), for: alice)
        let admitted = precise.admits(warning(d2, version: 1))
        #expect(admitted)
    }

    @Test("end to end: after an extension at a moment that is not a whole millisecond, the warning for the new deadline comes, and says the limit is reached")
    func warningAfterAnExtension() async throws {
        let policy = SessionPolicy(idleTimeout: .seconds(60), warningBefore: .seconds(10), maxExtensions: 1, absoluteLifetime: .seconds(3600))
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: policy)
            #expect(await h.time.waitForSleeper(until: h.time.at(.seconds(50))), "\(h.time.sleepingUntil)")
            await h.time.advance(by: .seconds(50))
            #expect(await h.events.next { $0.isIdleWarning }?.idleWarning?.canExtend == true)
            await h.time.advance(by: .microseconds(2_500_700))
            let mark = h.events.mark
            guard case .extended(let deadline, remaining: 0) = try await h.service.extendSession(for: alice) else {
                Issue.record("the extension was refused")
                return
            }
            let warnAt = Date(millisecondsSince1970: deadline.millisecondsSince1970).addingTimeInterval(-10)
            #expect(await h.time.waitForSleeper(until: warnAt), "\(h.time.sleepingUntil)")
            await h.time.advance(to: warnAt)
            let warning = try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning)
            #expect(!warning.canExtend && warning.deadline.millisecondsSince1970 == deadline.millisecondsSince1970)
        }
    }
}

extension SessionEvent {
    /// The same idle warning for `account`.
    fileprivate func withAccount(_ account: AccountID) -> SessionEvent {
        guard case .idleWarning(var warning) = self else { return self }
        warning.account = account
        return .idleWarning(warning)
    }
}

/// Issue 37, item 5, across real processes (SessionProbe children on the same vault file): a
/// warning one process raised and another made void never reaches a receiver as news.
@Suite("Idle warnings across processes", .timeLimit(.minutes(TestTimeScale.minutes(2))))
struct CrossProcessWarningTests {
    static let policy = SessionPolicy(
        idleTimeout: .seconds(60), warningBefore: .seconds(10), maxExtensions: 20, absoluteLifetime: .seconds(36_000),
        backgroundTimeout: nil, activity: .interactive)

    static var configuration: SessionConfiguration {
        var configuration = SessionConfiguration.testing
        configuration.observationInterval = .seconds(1)
        return configuration
    }

    /// Runs one probe child per `(operation, now)` at once and returns each one's result lines.
    static func run(_ h: SessionHarness, _ steps: [(operation: String, now: Date)]) async throws -> [[String]] {
        let probes = try steps.map { try h.probe($0.operation, "-", now: $0.now) }
        for probe in probes {
            let ready = await probe.waitUntilReady()
            try #require(ready, "a probe did not start: \(probe.output.value)")
        }
        probes.forEach { $0.go() }
        var results: [[String]] = []
        for probe in probes { results.append(try await probe.results()) }
        return results
    }

    /// Lets the receiver (the harness's service, watching the log) read what the children wrote.
    static func reconcile(_ h: SessionHarness) async {
        await h.time.advance(by: .seconds(1))
        #expect(await h.events.flush())
    }

    @Test("activity in one process after another raised a warning: the receiver never shows that warning, and hears it withdrawn")
    func activityVoidsAnotherProcessWarning() async throws {
        try await SessionHarness.run(configuration: Self.configuration) { h in
            let alice = try await h.signIn("alice", policy: Self.policy)
            try await h.service.start()
            let start = h.time.now()
            let mark = h.events.mark

            // Process A judges inside the warning window (its clock is 51 s on): the warning is
            // logged. Process B then records activity: the deadline moves, no lock at 60 s.
            #expect(try await Self.run(h, [("judge", start.addingTimeInterval(51))]) == [["status active"]])
            #expect(try await Self.run(h, [("activity", start.addingTimeInterval(52))]) == [["active"]])
            let logged = try h.vault.events.list(after: 0).map(\.kind)
            #expect(logged.suffix(2) == ["idle_warning", "idle_warning_withdrawn"], "\(logged)")

            await Self.reconcile(h)
            let moved = start.addingTimeInterval(112)
            #expect(await h.events.next(after: mark) { $0 == .idleWarningWithdrawn(alice, idleDeadline: moved) } != nil)
            #expect(h.events.events(after: mark) { $0.isIdleWarning }.isEmpty, "a warning for a deadline the vault no longer holds was shown")
        }
    }

    @Test("a warning another process raised reaches the receiver with the session version it was judged on")
    func anotherProcessWarningArrives() async throws {
        try await SessionHarness.run(configuration: Self.configuration) { h in
            let alice = try await h.signIn("alice", policy: Self.policy)
            try await h.service.start()
            let start = h.time.now()
            let mark = h.events.mark
            _ = try await Self.run(h, [("judge", start.addingTimeInterval(51))])
            await Self.reconcile(h)
            let warning = try #require(await h.events.next(after: mark) { $0.isIdleWarning }?.idleWarning)
            let session = try #require(try h.vault.sessions.current(for: alice))
            #expect(warning.account == alice && warning.deadline == start.addingTimeInterval(60) && warning.canExtend)
            #expect(warning.session == SessionStamp(session))
        }
    }

    @Test("extension against warning, raced across two processes for 5 rounds: the receiver never gets a warning after the extension that voided it")
    func extensionRacesWarning() async throws {
        try await SessionHarness.run(configuration: Self.configuration) { h in
            let alice = try await h.signIn("alice", policy: Self.policy)
            try await h.service.start()
            var deadline = try #require(try h.vault.sessions.current(for: alice)?.idleDeadline)
            for round in 0..<5 {
                let mark = h.events.mark
                let windowOpen = deadline.addingTimeInterval(-9)
                // Judge and extend at once, in two processes; the extension is a second later on
                // the wall clock, so whichever wins, the log may hold the warning after it.
                let results = try await Self.run(h, [("judge", windowOpen), ("extend", windowOpen.addingTimeInterval(1))])
                #expect(results[1].first?.hasPrefix("extended") == true, "round \(round): \(results)")
                let extended = try #require(try h.vault.sessions.current(for: alice)?.idleDeadline)
                #expect(extended == windowOpen.addingTimeInterval(61))
                await Self.reconcile(h)
                #expect(await h.events.next(after: mark) { $0.extensionResult != nil } != nil, "round \(round)")

                let seen = h.events.events(after: mark) { $0.isIdleWarning || $0.extensionResult != nil }
                let extensionAt = try #require(seen.firstIndex { $0.extensionResult != nil })
                #expect(seen[extensionAt...].allSatisfy { !$0.isIdleWarning }, "round \(round): a stale warning after the extension: \(seen)")
                #expect(seen.compactMap(\.idleWarning).allSatisfy { $0.deadline == deadline }, "round \(round): \(seen)")
                var filter = StaleWarningFilter()
                let inOrder = seen.allSatisfy { filter.admits($0) }
                #expect(inOrder, "round \(round): the receiver's stream is in order")

                // The user is back a second later: the next round may extend again.
                _ = try await Self.run(h, [("activity", windowOpen.addingTimeInterval(2))])
                deadline = try #require(try h.vault.sessions.current(for: alice)?.idleDeadline)
            }
        }
    }
}
