import VaultSync

/// One piece of work that every caller asking for the same thing while it runs shares: a task
/// of its own does it once, and each caller waits for its result without holding a thread.
///
/// A caller whose task is cancelled stops waiting at once (`CancellationError`); the work and
/// the other callers go on. What happens when the last caller leaves is the work's choice
/// (``WhenAbandoned``): a token refresh finishes, because the server may already have rotated
/// the refresh token and its answer must be stored; a wait for another device's approval is
/// cancelled, since nobody is left to tell.
///
/// ```swift
/// if refreshes[id]?.isJoinable != true {
///     refreshes[id] = Coalesced(whenAbandoned: .finish) { try await self.performRefresh(id) }
/// }
/// let tokens = try await refreshes[id]!.value()
/// ```
///
/// Modelled on Okta AuthFoundation's `CoalescedResult`. The state sits behind a `Locked`
/// because cancellation handlers run on whichever thread cancels, not on the owner's actor.
final class Coalesced<Value: Sendable>: Sendable {
    /// What the work does once every caller has left before it finished.
    enum WhenAbandoned: Sendable {
        /// Goes on to the end (its effects are wanted whether or not anyone waits).
        case finish
        /// Is cancelled.
        case cancel
    }

    private struct State {
        var waiters: [UInt64: CheckedContinuation<Value, any Error>] = [:]
        /// Callers cancelled before their continuation was registered.
        var departed: Set<UInt64> = []
        var nextWaiter: UInt64 = 0
        var result: Result<Value, any Error>?
        var task: Task<Void, Never>?
        /// Cancelled: by ``cancel()`` or because every caller left (``WhenAbandoned/cancel``).
        var cancelled = false
    }

    private let state = Locked(State())
    private let whenAbandoned: WhenAbandoned

    /// Starts `operation` in a task of its own (at `priority`), to be shared by every caller
    /// of ``value()``.
    init(
        whenAbandoned: WhenAbandoned, priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable () async throws -> Value
    ) {
        self.whenAbandoned = whenAbandoned
        let task = Task(priority: priority) {
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            self.finish(with: result)
        }
        // The task may already have finished; `cancel()` before this line is not possible
        // (nobody else holds `self` yet).
        state.withLock { $0.task = task }
    }

    /// Work that its first caller runs itself, in its own task (``lead(_:)``): no task is made
    /// and nothing hops, which is what the token path's common case (one caller) wants. The
    /// others wait with ``value()`` as usual and leave at once when cancelled; should the
    /// leader be cancelled, they get its `CancellationError` and ask again.
    init(ledBy _: Void) {
        self.whenAbandoned = .finish
    }

    /// Runs the work of a ``init(ledBy:)`` value and hands its result to every waiter.
    func lead(isolation: isolated (any Actor)? = #isolation, _ operation: () async throws -> Value) async throws -> Value {
        do {
            let value = try await operation()
            finish(with: .success(value))
            return value
        } catch {
            finish(with: .failure(error))
            throw error
        }
    }

    /// Whether a new caller may still wait for this work: it is running and was not cancelled.
    var isJoinable: Bool { state.withLock { $0.result == nil && !$0.cancelled } }

    /// Whether the work has its result.
    var isFinished: Bool { state.withLock { $0.result != nil } }

    /// How many callers wait now.
    var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// Whether the work was cancelled (by ``cancel()``, or because every caller left).
    var wasCancelled: Bool { state.withLock { $0.cancelled } }

    /// The work's result. Throws `CancellationError` at once when the caller's task is
    /// cancelled, whatever the work is doing.
    func value() async throws -> Value {
        let id = state.withLock { state -> UInt64 in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let (now, abandoned) = state.withLock { state -> (Result<Value, any Error>?, Task<Void, Never>?) in
                    if let result = state.result { return (result, nil) }
                    if state.departed.remove(id) != nil { return (.failure(CancellationError()), abandonedTask(&state)) }
                    state.waiters[id] = continuation
                    return (nil, nil)
                }
                abandoned?.cancel()
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            leave(id)
        }
    }

    /// Waits until the work has its result, whether or not this caller is cancelled meanwhile
    /// (locking waits for a refresh in flight so its rotated token is stored first). Returns at
    /// once for work its first caller leads (``init(ledBy:)``): that caller is the one to wait for.
    func finished() async {
        await state.withLock { $0.task }?.value
    }

    /// Cancels the work itself: every caller gets what it throws (usually `CancellationError`).
    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }

    private func leave(_ id: UInt64) {
        let (continuation, abandoned) = state.withLock { state -> (CheckedContinuation<Value, any Error>?, Task<Void, Never>?) in
            guard state.result == nil else { return (nil, nil) }
            guard let continuation = state.waiters.removeValue(forKey: id) else {
                state.departed.insert(id)  // registers later and leaves then
                return (nil, nil)
            }
            return (continuation, abandonedTask(&state))
        }
        continuation?.resume(throwing: CancellationError())
        abandoned?.cancel()
    }

    /// The task to cancel when the last caller just left and the work is not to finish alone.
    private func abandonedTask(_ state: inout State) -> Task<Void, Never>? {
        guard whenAbandoned == .cancel, state.waiters.isEmpty, state.result == nil else { return nil }
        state.cancelled = true
        return state.task
    }

    private func finish(with result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            state.result = result
            defer {
                state.waiters = [:]
                state.departed = []
            }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }
}
