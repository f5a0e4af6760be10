import VaultTestSupport
import Clocks
import Foundation
import VaultStore

/// Time for one test: a swift-clocks `TestClock` that drives every activation deadline and
/// poll, and a wall clock derived from it for every time written to a vault. Nothing waits
/// for real time to pass; the test advances the clock once something sleeps on it.
///
/// ```swift
/// let time = DeviceTime()
/// await time.advanceWhenSleeping(by: .seconds(5))
/// ```
final class DeviceTime: Sendable {
    static let origin = Date(timeIntervalSince1970: 1_800_000_000)

    let testClock = TestClock<Duration>()
    private let start: TestClock<Duration>.Instant
    private let sleepers = Watched<[UUID: TestClock<Duration>.Instant]>([:])

    init() { start = testClock.now }

    var elapsed: Duration { start.duration(to: testClock.now) }
    func now() -> Date { Self.origin.addingTimeInterval(elapsed.timeInterval) }
    var wallClock: WallClock { WallClock { [self] in now() } }
    var clock: SleeperClock { SleeperClock(base: testClock, sleepers: sleepers) }

    /// Waits until something sleeps until a moment still ahead (a real event: the flow planned
    /// its next poll), then advances by `duration`. False, without advancing, if nothing did.
    @discardableResult
    func advanceWhenSleeping(by duration: Duration, timeout: Duration = TestTimeScale.scaled(.seconds(10))) async -> Bool {
        let now = testClock.now
        let sleeping = await sleepers.wait(upTo: timeout) { $0.values.contains { $0 > now } }
        guard sleeping else { return false }
        await testClock.advance(by: duration)
        return true
    }
}

/// A `Clock` over a `TestClock` that records who sleeps until when.
struct SleeperClock: Clock {
    typealias Duration = Swift.Duration
    typealias Instant = TestClock<Swift.Duration>.Instant

    let base: TestClock<Swift.Duration>
    fileprivate let sleepers: Watched<[UUID: Instant]>

    var now: Instant { base.now }
    var minimumResolution: Swift.Duration { base.minimumResolution }

    func sleep(until deadline: Instant, tolerance: Swift.Duration?) async throws {
        let id = UUID()
        sleepers.update { $0[id] = deadline }
        defer { sleepers.update { $0[id] = nil } }
        try await base.sleep(until: deadline, tolerance: tolerance)
    }
}
