import Dispatch

/// Where a gateway's HTTP server runs: a serial dispatch queue of its own, not Swift's
/// cooperative pool.
///
/// The tests that drive a gateway share the cooperative pool (one thread per core) with the
/// code under test, which does synchronous work there: key derivation, SQLite, waits for other
/// processes. On a loaded 2-core machine, and under a sanitizer's slowdown, that kept an
/// in-process server from answering for longer than its clients' 10 s timeouts. On its own
/// queue the server answers whatever the test threads are busy with, as a server in another
/// process would. The server's structured child tasks (connections, handlers) inherit this
/// preference, and the gateway actor's methods run here when the server calls them.
final class GatewayExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
