import Foundation

/// How many times longer than written a real-time bound in the tests is: `TEST_TIME_SCALE`
/// (at least 1, default 1). A sanitizer slows every process down several times over, and a
/// 10 s bound on a request to the loopback gateway then ran out while it was still answering;
/// `scripts/sanitize.sh` sets it. Only bounds (time limits) scale, never an expected outcome,
/// and a test that sets a short timeout on purpose (to provoke it) passes its own.
///
/// ```swift
/// let transport = URLSessionTransport(timeout: TestTimeScale.scaled(.seconds(10)))
/// ```
public enum TestTimeScale {
    public static let factor: Double =
        ProcessInfo.processInfo.environment["TEST_TIME_SCALE"]
        .flatMap(Double.init).map { max(1, $0) } ?? 1

    /// `duration` times ``factor``.
    public static func scaled(_ duration: Duration) -> Duration { duration * factor }

    /// `minutes` times ``factor``, rounded up: a suite's time limit, which Swift Testing takes in
    /// whole minutes (`.timeLimit(.minutes(TestTimeScale.minutes(1)))`). Under a sanitizer a
    /// suite of loopback requests and child processes runs several times slower, and an unscaled
    /// minute ran out while every request in it was still being answered.
    public static func minutes(_ minutes: Int) -> Int { Int((Double(minutes) * factor).rounded(.up)) }
}
