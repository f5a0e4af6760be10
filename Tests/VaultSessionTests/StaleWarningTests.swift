import Foundation
import Testing
import VaultStore

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
}
