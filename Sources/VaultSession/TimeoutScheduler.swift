import Foundation
import VaultStore

/// When the session service looks at its sessions again: one timer on the injected clock,
/// re-armed whenever something changed, and the idle deadlines already warned about (each
/// warning is raised once per deadline, whichever process judged it first).
///
/// The timer asks `next` what to do: `next` judges the sessions (warning, locking, expiring)
/// and returns how long to sleep before asking again, or nil to stop until re-armed. It holds
/// its owner only through `next`, which should capture it weakly, so a service released
/// without stopping is not kept alive until its next deadline.
///
/// ```swift
/// var scheduler = TimeoutScheduler()
/// scheduler.arm(on: clock) { [weak self] in await self?.delayUntilNextDeadline() }
/// if scheduler.firstWarning(for: account, deadline: deadline) { publish(warning) }
/// ```
struct TimeoutScheduler {
    private var timer: Task<Void, Never>?
    /// The idle deadline a warning was already raised for, per account, in milliseconds (the
    /// precision the vault stores times in: a deadline computed here in full precision and the
    /// same deadline read back from the vault are one deadline).
    ///
    /// Whether a warning is stale is not decided here: this process raises warnings only on the
    /// session as the vault holds it, and another process's only after checking it against the
    /// vault (``SessionService`` `stillHolds`). A deadline remembered here never hides a later
    /// warning for an earlier deadline (a policy that shortened the idle timeout).
    private var warned: [AccountID: Int64] = [:]

    /// (Re)starts the timer: the one running is cancelled, then `next` is asked at once and
    /// again after each delay it returns, until it returns nil or the timer is cancelled.
    mutating func arm(on clock: any Clock<Duration>, next: @escaping @Sendable () async -> Duration?) {
        timer?.cancel()
        timer = Task {
            while !Task.isCancelled {
                guard let delay = await next() else { return }
                do { try await clock.sleep(for: delay) } catch { return }
            }
        }
    }

    /// Stops the timer until the next ``arm(on:next:)``.
    mutating func stop() {
        timer?.cancel()
        timer = nil
    }

    /// Whether a warning for `deadline` is the first for that deadline of `account` (and
    /// remembers it): false for one already raised here, or delivered from another process.
    mutating func firstWarning(for account: AccountID, deadline: Date) -> Bool {
        let deadline = deadline.millisecondsSince1970
        guard warned[account] != deadline else { return false }
        warned[account] = deadline
        return true
    }

    /// Forgets the warning raised for `account`: its deadline moved (activity, an extension, a
    /// new session) or its session ended, so the next warning is raised again.
    mutating func forgetWarning(for account: AccountID) {
        warned[account] = nil
    }
}
