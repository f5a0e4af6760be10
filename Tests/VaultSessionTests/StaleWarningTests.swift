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

    @Test("a warning is raised once per deadline, and not at all for a deadline older than one known")
    func olderDeadlinesAreStale() {
        var scheduler = TimeoutScheduler()
        #expect(Self.raised(&scheduler, alice, [d0, d0]) == [true, false], "the same deadline once")
        // Another process extended the session to d1; its result reached here first.
        scheduler.learnDeadline(d1, for: alice)
        scheduler.forgetWarning(for: alice)
        #expect(Self.raised(&scheduler, alice, [d0, d1]) == [false, true], "the late warning for the old deadline is stale")
        #expect(Self.raised(&scheduler, AccountID(rawValue: "bob"), [d0]) == [true], "another account is another story")
    }

    @Test("a warning for the later deadline, seen first, makes a late one for the earlier deadline stale")
    func laterWarningFirst() {
        var scheduler = TimeoutScheduler()
        #expect(Self.raised(&scheduler, alice, [d1]) == [true])
        scheduler.forgetWarning(for: alice)
        #expect(Self.raised(&scheduler, alice, [d0]) == [false])
    }

    @Test("an extension's deadline in full precision and the same deadline read back from the vault (milliseconds) are one: the next warning is raised")
    func extensionDeadlineAtVaultPrecision() {
        var scheduler = TimeoutScheduler()
        let extended = d1.addingTimeInterval(0.000_7)  // as computed at the extension, 0.7 ms past
        scheduler.learnDeadline(extended, for: alice)
        let stored = Date(millisecondsSince1970: extended.millisecondsSince1970)  // as the timer reads it back
        #expect(Self.raised(&scheduler, alice, [stored, stored]) == [true, false])
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
