import Foundation

/// The source of wall-clock times that are written to disk (created, expiry, deadlines).
///
/// Kept apart from `Clock` instants, which cannot be persisted. Tests pass a fixed or
/// hand-advanced value:
///
/// ```swift
/// let clock = WallClock { Date(timeIntervalSince1970: 1_800_000_000) }
/// ```
public struct WallClock: Sendable {
    public var now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    /// The system's real time.
    public static let system = WallClock { Date() }
}
