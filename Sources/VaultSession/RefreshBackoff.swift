import Foundation

/// Exponential back-off with jitter for transient refresh failures: the n-th failure in a
/// row waits between half and all of `base × 2^(n-1)`, capped, so processes that failed
/// together do not retry together.
struct RefreshBackoff: Sendable {
    var base: Duration
    var cap: Duration

    func delay(afterFailures failures: Int, retryAfter: Duration? = nil) -> Duration {
        let exponent = min(max(failures - 1, 0), 30)
        let ceiling = min(base * (1 << exponent), cap)
        let half = ceiling / 2
        let jitter = Double.random(in: 0...1)
        let computed = half + half * jitter
        guard let retryAfter else { return computed }
        return max(computed, min(retryAfter, cap))
    }
}
