#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs `side` on a thread of its own while `main` runs on the calling thread, and returns
/// both results once both have finished: for two long, independent pieces of blocking work
/// (`vault verify` has SQLite check the file's structure on one connection while it reads
/// every row on another).
///
/// The side thread is always joined before this returns or throws, so nothing it uses
/// outlives the call. When both throw, `side`'s error is the one thrown. When no thread can be
/// started, `side` runs on the calling thread first.
///
/// ```swift
/// let (problems, rows) = try alongside({ try structureCheck() }, { try readEveryRow() })
/// ```
package func alongside<Side: Sendable, Main>(
    _ side: @escaping @Sendable () throws -> Side, _ main: () throws -> Main
) throws -> (Side, Main) {
    let outcome = SideOutcome<Side>()
    let work = SideWork {
        let result = Result { try side() }
        outcome.result = result
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(work).toOpaque()
    let started = pthread_create(
        &thread, nil,
        { context in
            guard let context else { return nil }
            Unmanaged<SideWork>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
    guard started == 0 else {
        Unmanaged<SideWork>.fromOpaque(context).release()
        return (try side(), try main())
    }
    let mainResult = Result { try main() }
    pthread_join(thread, nil)
    guard let sideResult = outcome.result else { preconditionFailure("the side thread ended without a result") }
    return (try sideResult.get(), try mainResult.get())
}

/// The side thread's closure, passed to `pthread_create` as its context (retained once, released by the thread).
// @unchecked Sendable: `run` is set once in init and only called, once, by the thread it is handed to.
private final class SideWork: @unchecked Sendable {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Where the side thread leaves its result.
// @unchecked Sendable: `result` is written once by the side thread before it exits and read
// by the caller only after `pthread_join` returned for that thread, which orders the write
// before the read (and ThreadSanitizer models it so); no other access exists.
private final class SideOutcome<Value>: @unchecked Sendable {
    var result: Result<Value, any Error>?
}
