#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value that one thread at a time reads or changes: `Synchronization.Mutex`'s interface
/// over a pthread mutex. Every lock in this package is one of these.
///
/// ```swift
/// let subscribers = Locked<[UUID: Continuation]>([:])
/// subscribers.withLock { $0[id] = continuation }
/// ```
///
/// Why not `Mutex`: on Linux a contended `Mutex` is handed from one thread to the next inside
/// the kernel (`FUTEX_LOCK_PI`; the lock word goes from one owner's id straight to the next,
/// swiftlang/swift#88440), and ThreadSanitizer cannot see that hand-over. Under `make sanitize`
/// it reported accesses made while holding a `Mutex` as races (in `SecureBytes`, in the tests'
/// `Watched`). ThreadSanitizer intercepts `pthread_mutex_lock`/`unlock`, so a race it reports
/// around a `Locked` is a real one. The token and store benchmarks, run with each, differed by
/// no more than their run-to-run noise (BENCHMARKS.md, session 3).
// @unchecked Sendable: `value` is only read or written inside `withLock`, between
// pthread_mutex_lock and pthread_mutex_unlock of `mutex`, so no two threads touch it at once;
// what enters and leaves is `sending`, as with `Mutex`. `mutex` is allocated and initialised
// before `self` exists for anyone else, and destroyed only in deinit, when no thread holds it.
package final class Locked<Value: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // Default attributes: pthread_mutex_init cannot fail with them on Linux or Darwin.
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock; what it returns leaves the lock.
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
