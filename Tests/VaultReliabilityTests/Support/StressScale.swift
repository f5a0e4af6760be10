import Foundation

/// How hard the reliability suite pushes: `STRESS_SCALE` unset runs the fast counts of
/// `make test`; `quick` (`STRESS_QUICK=1 make stress`) and `full` (`make stress`) run more.
///
/// ```swift
/// let rotations = StressScale.current.count(test: 500, quick: 2_000, full: 10_000)
/// ```
enum StressScale: String, Sendable {
    case test
    case quick
    case full

    static var current: StressScale {
        StressScale(rawValue: ProcessInfo.processInfo.environment["STRESS_SCALE"] ?? "") ?? .test
    }

    /// Whether counts are reported to `.stress/results.json` (only under `make stress`).
    var reports: Bool { self != .test }

    func count(test: Int, quick: Int, full: Int) -> Int {
        switch self {
        case .test: test
        case .quick: quick
        case .full: full
        }
    }
}
