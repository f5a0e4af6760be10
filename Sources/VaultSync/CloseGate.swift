#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Lets any number of operations on a resource run at once and lets `close` wait for those
/// running, after which none starts: what a check of a "closed" flag followed by the operation
/// cannot do, since `close` can run between the two.
///
/// ```swift
/// let gate = CloseGate()
/// let rows = try gate.ifOpen { try pool.read(fetch) }   // nil once closed
/// gate.close { try? pool.close() }                       // waits for reads in flight
/// ```
///
/// Why: `Vault.close()` closed its GRDB pool while a session service's background read on
/// another thread had passed the closed check; GRDB handed that read a reader whose SQLite
/// connection had just been closed, and `sqlite3_get_autocommit(NULL)` crashed the process
/// (AddressSanitizer, a `vault accounts add` child). A pthread read-write lock: operations hold
/// it shared, `close` exclusively. glibc's default prefers readers, so an operation that starts
/// another inside itself (a read within a write) never waits behind a pending `close`; `close`
/// itself must not be called from inside an operation. Cost: one uncontended
/// `pthread_rwlock_rdlock`/`unlock` pair per operation, tens of nanoseconds against reads of
/// tens of microseconds.
// @unchecked Sendable: `closed` is written only while holding `lock` exclusively (in `close`)
// and read only while holding it shared or exclusively, so no read races a write. `lock` is
// allocated and initialised before `self` is shared and destroyed only in deinit.
package final class CloseGate: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>
    private var closed = false

    package init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        // Default attributes: pthread_rwlock_init cannot fail with them on Linux.
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Runs `body` while the gate is open, holding off `close` until it returns; nil without
    /// running it once the gate is closed.
    package func ifOpen<T>(_ body: () throws -> T) rethrows -> T? {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        guard !closed else { return nil }
        return try body()
    }

    /// Waits until no operation runs, closes the gate and runs `body` before any operation can
    /// look again. False (and `body` not run) if it was closed already.
    @discardableResult
    package func close(_ body: () -> Void) -> Bool {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        guard !closed else { return false }
        closed = true
        body()
        return true
    }

    /// Whether ``close(_:)`` ran.
    package var isClosed: Bool {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return closed
    }
}
