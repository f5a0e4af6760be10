import Testing
import VaultSync

@testable import VaultSession

/// ``Coalesced``: one run of the work for every caller asking meanwhile, and a cancelled
/// caller that leaves at once without stopping the work for the others.
@Suite("Coalesced work", .timeLimit(.minutes(1)))
struct CoalescedTests {
    /// Work that runs until the test lets it finish, counting its runs and whether it saw
    /// its own cancellation.
    final class Gate: Sendable {
        let runs = Locked(0)
        let sawCancellation = Locked(false)
        private let release: AsyncStream<Int>
        private let releaser: AsyncStream<Int>.Continuation
        private let started: AsyncStream<Void>
        private let starter: AsyncStream<Void>.Continuation

        init() {
            (release, releaser) = AsyncStream.makeStream()
            (started, starter) = AsyncStream.makeStream()
        }

        func work() async throws -> Int {
            runs.withLock { $0 += 1 }
            starter.yield()
            var values = release.makeAsyncIterator()
            let value = await withTaskCancellationHandler {
                await values.next()
            } onCancel: {
                releaser.finish()
            }
            if Task.isCancelled {
                sawCancellation.withLock { $0 = true }
                throw CancellationError()
            }
            return value ?? -1
        }

        func waitUntilStarted() async {
            var iterator = started.makeAsyncIterator()
            _ = await iterator.next()
        }

        func finish(with value: Int) { releaser.yield(value) }
    }

    @Test("callers asking while the work runs share one run and its result")
    func callersShareOneRun() async throws {
        let gate = Gate()
        let work = Coalesced(whenAbandoned: .finish) { try await gate.work() }
        let callers = (0..<50).map { _ in Task { try await work.value() } }
        await gate.waitUntilStarted()
        gate.finish(with: 42)
        for caller in callers { #expect(try await caller.value == 42) }
        #expect(gate.runs.withLock { $0 } == 1)
        #expect(try await work.value() == 42, "a caller after the end gets the same result")
        #expect(!work.isJoinable)
    }

    @Test("a cancelled caller leaves at once; a work that finishes goes on for the others")
    func cancelledCallerLeavesAtOnce() async throws {
        let gate = Gate()
        let work = Coalesced(whenAbandoned: .finish) { try await gate.work() }
        await gate.waitUntilStarted()
        let leaving = Task { try await work.value() }
        let staying = Task { try await work.value() }
        while work.waiterCount < 2 { await Task.yield() }
        leaving.cancel()
        // It returns while the work still runs: nothing has finished it yet.
        await #expect(throws: CancellationError.self) { try await leaving.value }
        #expect(work.isJoinable)
        gate.finish(with: 7)
        #expect(try await staying.value == 7)
        #expect(!gate.sawCancellation.withLock { $0 })
    }

    @Test("a finishing work runs to the end when every caller left")
    func finishingWorkOutlivesItsCallers() async throws {
        let gate = Gate()
        let work = Coalesced(whenAbandoned: .finish) { try await gate.work() }
        await gate.waitUntilStarted()
        let only = Task { try await work.value() }
        only.cancel()
        await #expect(throws: CancellationError.self) { try await only.value }
        gate.finish(with: 3)
        await work.finished()
        #expect(try await work.value() == 3)
        #expect(!work.wasCancelled)
    }

    @Test("a cancellable work stops when its last caller leaves, not before")
    func cancellableWorkStopsWithItsLastCaller() async throws {
        let gate = Gate()
        let work = Coalesced(whenAbandoned: .cancel) { try await gate.work() }
        await gate.waitUntilStarted()
        let first = Task { try await work.value() }
        let second = Task { try await work.value() }
        while work.waiterCount < 2 { await Task.yield() }
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        #expect(!work.wasCancelled, "one caller still waits")
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        await work.finished()
        #expect(work.wasCancelled)
        #expect(gate.sawCancellation.withLock { $0 }, "the work itself saw the cancellation")
    }

    @Test("a caller already cancelled when it asks does not wait")
    func alreadyCancelledCallerDoesNotWait() async throws {
        let gate = Gate()
        let work = Coalesced(whenAbandoned: .finish) { try await gate.work() }
        await gate.waitUntilStarted()
        let caller = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await work.value()
        }
        await #expect(throws: CancellationError.self) { try await caller.value }
        gate.finish(with: 1)
        #expect(try await work.value() == 1)
    }
}
