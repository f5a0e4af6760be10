import FlyingFox
import FlyingSocks
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The FlyingFox pieces that need FlyingSocks: the 127.0.0.1 address, the bound port, logging.
///
/// Kept in one file so FlyingSocks' `Logging` protocol never meets swift-log's `Logging`
/// module elsewhere.
enum LoopbackServer {
    /// An HTTP server for 127.0.0.1 on an ephemeral port, logging through `logger`.
    static func make(logger: Logger) throws -> HTTPServer {
        HTTPServer(
            address: try .inet(ip4: "127.0.0.1", port: 0),
            // The handler time limit; injected latency must stay below it.
            timeout: 600,
            pool: NoDelaySocketPool(base: HTTPServer.defaultPool()),
            logger: SwiftLogBridge(logger: logger)
        )
    }

    /// The port the server is listening on, once it is.
    static func port(of server: HTTPServer) async -> UInt16? {
        guard case .ip4(_, let port)? = await server.listeningAddress else { return nil }
        return port
    }
}

/// Forwards FlyingFox's own log lines (connections, request lines: never bodies) to swift-log.
///
/// FlyingFox reports a client that hangs up mid-request as an error; for a development server
/// under fault injection that is routine, so errors go to debug and info to trace; critical
/// ones stay errors, but for the cancellation `stop()` causes.
private struct SwiftLogBridge: FlyingSocks.Logging {
    let logger: Logger

    func logDebug(_ debug: @autoclosure () -> String) { logger.trace("\(debug())") }
    func logInfo(_ info: @autoclosure () -> String) { logger.trace("\(info())") }
    func logWarning(_ warning: @autoclosure () -> String) { logger.debug("\(warning())") }
    func logError(_ error: @autoclosure () -> String) { logger.debug("\(error())") }
    func logCritical(_ critical: @autoclosure () -> String) {
        let message = critical()
        // `stop()` cancels the server's task, which FlyingFox reports as a critical
        // "server error: …CancellationError…": routine, and at error level it buried real
        // errors under one line per test gateway.
        if message.contains("CancellationError") {
            logger.debug("\(message)")
        } else {
            logger.error("\(message)")
        }
    }
}

/// The server's socket pool, with Nagle's algorithm turned off on every socket it waits on.
///
/// FlyingFox sends a response's head and body in two writes. With Nagle on, the body waits
/// until the client acknowledges the head, and a client on a reused connection delays that
/// acknowledgement (40 ms on Linux): every request after a connection's first took ~45 ms
/// instead of ~2 ms (`VaultBench profile http`). The listening socket is covered too, and
/// Linux hands its setting to the connections it accepts.
private struct NoDelaySocketPool<Base: AsyncSocketPool>: AsyncSocketPool {
    let base: Base

    func prepare() async throws { try await base.prepare() }

    func run() async throws { try await base.run() }

    func suspendSocket(_ socket: Socket, untilReadyFor events: Socket.Events) async throws {
        // Best effort: a socket that is not TCP refuses the option and is served as before.
        try? socket.setValue(true, for: BoolSocketOption(level: Int32(IPPROTO_TCP), name: TCP_NODELAY))
        try await base.suspendSocket(socket, untilReadyFor: events)
    }
}
