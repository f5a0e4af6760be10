import FlyingFox
import FlyingSocks
import Logging

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
/// under fault injection that is routine, so errors go to debug and info to trace.
private struct SwiftLogBridge: FlyingSocks.Logging {
    let logger: Logger

    func logDebug(_ debug: @autoclosure () -> String) { logger.trace("\(debug())") }
    func logInfo(_ info: @autoclosure () -> String) { logger.trace("\(info())") }
    func logWarning(_ warning: @autoclosure () -> String) { logger.debug("\(warning())") }
    func logError(_ error: @autoclosure () -> String) { logger.debug("\(error())") }
    func logCritical(_ critical: @autoclosure () -> String) { logger.error("\(critical())") }
}
