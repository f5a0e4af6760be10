import Dispatch
import Foundation
import Testing
import VaultSync
import VaultTestSupport

/// `Locked`, the package's one lock: one thread at a time inside `withLock`.
@Suite(.timeLimit(.minutes(TestTimeScale.minutes(1)))) struct LockedTests {
    @Test("8 threads × 5,000 read-yield-write updates under the lock lose no update")
    func noLostUpdate() {
        // Each update reads the counter, gives the CPU away, then writes: without mutual
        // exclusion another thread's update lands in between and is overwritten.
        let counter = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<5_000 {
                counter.withLock { value in
                    let read = value
                    sched_yield()
                    value = read + 1
                }
            }
        }
        #expect(counter.withLock { $0 } == 40_000)
    }

    @Test("an error thrown inside withLock reaches the caller and releases the lock")
    func throwingBodyReleases() {
        struct Refused: Error {}
        let locked = Locked([1, 2, 3])
        #expect(throws: Refused.self) { try locked.withLock { _ throws(Refused) in throw Refused() } }
        // Locked again on the same thread: a lock still held would deadlock here.
        #expect(locked.withLock { $0.count } == 3)
    }
}
