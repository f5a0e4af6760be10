import Clocks
import Foundation
import VaultStore

/// Time for one test: a swift-clocks `TestClock` for every sleep of the service (its timers,
/// device activation's polls), and a wall clock derived from it, so deadlines written to the
/// vault move exactly when the test advances the clock. Nothing ever waits for real time to pass.
///
/// ```swift
/// let time = TestTime()
/// let service = SessionService(vault: vault, oauth: oauth, clock: time.clock, wallClock: time.wallClock)
/// await time.advance(by: .seconds(14 * 60))
/// ```
public final class TestTime: Sendable {
    /// A whole second since 1970 (and since 2001), so every offset of whole milliseconds is exact.
    public static let defaultOrigin = Date(timeIntervalSince1970: 1_800_000_000)

    public let testClock = TestClock<Duration>()
    public let origin: Date
    private let start: TestClock<Duration>.Instant
    private let sleepers = Watched<[UUID: TestClock<Duration>.Instant]>([:])

    public init(origin: Date = TestTime.defaultOrigin) {
        self.origin = origin
        start = testClock.now
    }

    /// Time passed on the test clock since the test began.
    public var elapsed: Duration { start.duration(to: testClock.now) }

    /// The wall-clock time now: the origin plus the test clock's elapsed time.
    public func now() -> Date { origin.addingTimeInterval(elapsed.timeInterval) }

    /// `origin + offset`.
    public func at(_ offset: Duration) -> Date { origin.addingTimeInterval(offset.timeInterval) }

    /// The wall clock to give the vault and the service.
    public var wallClock: WallClock { WallClock { [self] in now() } }

    /// The clock to give the service: the test clock, with its sleepers visible to the test.
    public var clock: TrackedClock { TrackedClock(base: testClock, sleepers: sleepers) }

    public func advance(by duration: Duration) async {
        await testClock.advance(by: duration)
        await wakeOverdue()
    }

    /// Advances to a wall-clock time (no-op if it has passed).
    public func advance(to date: Date) async {
        let milliseconds = Int64((date.timeIntervalSince(now()) * 1000).rounded(.up))
        guard milliseconds > 0 else { return }
        await advance(by: .milliseconds(milliseconds))
    }

    /// A sleeper recorded (``waitForSleeper(until:)`` saw it) but not yet registered with the
    /// test clock when it advanced registers afterwards, until a moment that has come, and
    /// `TestClock` suspends a deadline equal to its now until the next advance: each such
    /// sleeper is woken here, by advancing by zero once it is registered.
    private func wakeOverdue() async {
        for _ in 0..<100 {
            let now = testClock.now
            let woken = await sleepers.wait(upTo: .milliseconds(20)) { !$0.values.contains { $0 <= now } }
            if woken { return }
            await testClock.advance(by: .zero)
        }
    }

    /// Waits until something sleeps on the clock until `date` (within a millisecond): the
    /// service has planned its timer for that moment, so advancing past it will wake it.
    @discardableResult
    public func waitForSleeper(until date: Date, timeout: Duration = TestTimeScale.scaled(.seconds(10))) async -> Bool {
        let target = date.timeIntervalSince(origin)
        let start = self.start
        return await sleepers.wait(upTo: timeout) { sleepers in
            sleepers.values.contains { abs(start.duration(to: $0).timeInterval - target) <= 0.001 }
        }
    }

    /// Waits until something sleeps until a moment still ahead (a real event: the flow planned
    /// its next poll), then advances by `duration`. False, without advancing, if nothing did.
    @discardableResult
    public func advanceWhenSleeping(by duration: Duration, timeout: Duration = TestTimeScale.scaled(.seconds(10))) async -> Bool {
        let now = testClock.now
        let sleeping = await sleepers.wait(upTo: timeout) { $0.values.contains { $0 > now } }
        guard sleeping else { return false }
        await testClock.advance(by: duration)
        return true
    }

    /// The wall-clock times something is sleeping until, earliest first (for failure messages).
    public var sleepingUntil: [Date] {
        sleepers.value.values.map { origin.addingTimeInterval(start.duration(to: $0).timeInterval) }.sorted()
    }
}

/// A `Clock` over a `TestClock` that records who sleeps until when.
public struct TrackedClock: Clock {
    public typealias Duration = Swift.Duration
    public typealias Instant = TestClock<Swift.Duration>.Instant

    public let base: TestClock<Swift.Duration>
    fileprivate let sleepers: Watched<[UUID: Instant]>

    public var now: Instant { base.now }
    public var minimumResolution: Swift.Duration { base.minimumResolution }

    public func sleep(until deadline: Instant, tolerance: Swift.Duration?) async throws {
        let id = UUID()
        sleepers.update { $0[id] = deadline }
        defer { sleepers.update { $0[id] = nil } }
        try await base.sleep(until: deadline, tolerance: tolerance)
    }
}
