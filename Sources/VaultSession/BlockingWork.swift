import NIOPosix

/// Where blocking vault work runs: NIO's blocking-I/O thread pool (`NIOThreadPool.singleton`),
/// never the cooperative pool, which a key derivation, an fsync or a SQLite busy wait would
/// hold up for every task of the process. The one off-pool helper of the session service and
/// of the `vault` command (its agent runs every vault call through it).
///
/// ```swift
/// let accounts = try await BlockingWork.run { try vault.accounts.all() }
/// ```
public enum BlockingWork {
    /// Runs `body` on the blocking-I/O pool and returns (or throws) what it did.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(body)
    }
}
