import Foundation
import Synchronization
import Testing
import VaultStore
import VaultTestSupport

@testable import VaultSession

/// ``TimeoutScheduler``: the session service's one timer (asked again after each delay it
/// returns, never after it stopped or was re-armed) and its once-per-deadline idle warnings.
@Suite("Timeout scheduler", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct TimeoutSchedulerTests {
    /// Counts the times the timer asked, and hands each ask to the test.
    final class Asks: Sendable {
        let count = Mutex(0)
        let stream: AsyncStream<Int>
        let continuation: AsyncStream<Int>.Continuation

        init() { (stream, continuation) = AsyncStream.makeStream(of: Int.self) }

        /// Records one ask; `delays[n]` is what the n-th ask returns (nil past the end).
        func ask(_ delays: [Duration?]) -> Duration? {
            let n = count.withLock { value in
                value += 1
                return value
            }
            continuation.yield(n)
            return n <= delays.count ? delays[n - 1] : nil
        }
    }

    @Test("asked at once, then after each delay it returns; a nil ends the timer")
    func asksAfterEachDelay() async throws {
        let time = TestTime()
        let asks = Asks()
        var scheduler = TimeoutScheduler()
        scheduler.arm(on: time.clock) { asks.ask([.seconds(10), .seconds(5), nil]) }
        var next = asks.stream.makeAsyncIterator()
        #expect(await next.next() == 1, "asked when armed")

        #expect(await time.waitForSleeper(until: time.at(.seconds(10))))
        await time.advance(by: .seconds(9))
        #expect(asks.count.withLock { $0 } == 1, "not before the delay")
        await time.advance(by: .seconds(1))
        #expect(await next.next() == 2)

        #expect(await time.waitForSleeper(until: time.at(.seconds(15))))
        await time.advance(by: .seconds(5))
        #expect(await next.next() == 3)
        // The third ask returned nil: nothing sleeps any more, however far time goes.
        await time.advance(by: .seconds(3600))
        #expect(time.sleepingUntil.isEmpty)
        #expect(asks.count.withLock { $0 } == 3)
        scheduler.stop()
    }

    @Test("re-arming replaces the running timer; stopping ends it")
    func rearmAndStop() async throws {
        let time = TestTime()
        let first = Asks()
        let second = Asks()
        var scheduler = TimeoutScheduler()
        scheduler.arm(on: time.clock) { first.ask([.seconds(10), .seconds(10)]) }
        var firstAsks = first.stream.makeAsyncIterator()
        #expect(await firstAsks.next() == 1)
        #expect(await time.waitForSleeper(until: time.at(.seconds(10))))

        scheduler.arm(on: time.clock) { second.ask([.seconds(30)]) }
        var secondAsks = second.stream.makeAsyncIterator()
        #expect(await secondAsks.next() == 1)
        #expect(await time.waitForSleeper(until: time.at(.seconds(30))))
        await time.advance(by: .seconds(20))
        #expect(first.count.withLock { $0 } == 1, "the replaced timer is never asked again")

        scheduler.stop()
        await time.advance(by: .seconds(60))
        #expect(second.count.withLock { $0 } == 1, "a stopped timer is not asked")
    }

    @Test("an idle warning is raised once per deadline, again once forgotten")
    func warningsOncePerDeadline() {
        var scheduler = TimeoutScheduler()
        let alice = AccountID(rawValue: "alice")
        let bob = AccountID(rawValue: "bob")
        let deadline = TestTime.defaultOrigin.addingTimeInterval(900)
        var raised: [Bool] = []
        raised.append(scheduler.firstWarning(for: alice, deadline: deadline))
        raised.append(scheduler.firstWarning(for: alice, deadline: deadline))  // the same deadline twice
        raised.append(scheduler.firstWarning(for: bob, deadline: deadline))  // per account
        raised.append(scheduler.firstWarning(for: alice, deadline: deadline.addingTimeInterval(60)))  // a moved deadline
        scheduler.forgetWarning(for: alice)
        raised.append(scheduler.firstWarning(for: alice, deadline: deadline.addingTimeInterval(60)))  // forgotten: raised again
        #expect(raised == [true, false, true, true, true])
    }
}
