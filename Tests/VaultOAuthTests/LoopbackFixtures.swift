import DevGateway
import Foundation
import Logging
import Testing
import VaultOAuth
import VaultSync
import VaultTestSupport
import VaultURLSession

// MARK: - Log capture

/// Every line logged through loggers made by ``logger(label:)``, kept in memory.
final class LogCapture: Sendable {
    private let lines = Locked<[String]>([])

    /// A logger at `.trace` whose lines land here.
    func logger(label: String) -> Logger {
        var logger = Logger(label: label) { _ in CapturingLogHandler(capture: self) }
        logger.logLevel = .trace
        return logger
    }

    /// Every captured line: level, message, metadata and attached error, as text.
    var capturedLines: [String] { lines.withLock { $0 } }

    fileprivate func record(_ line: String) {
        lines.withLock { $0.append(line) }
    }
}

/// A swift-log handler that renders each event to one line and hands it to a ``LogCapture``.
struct CapturingLogHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let renderedMetadata = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let renderedError = event.error.map { " error=\(String(reflecting: $0))" } ?? ""
        capture.record("[\(event.level)] \(event.source) \(event.message) \(renderedMetadata)\(renderedError)")
    }
}

// MARK: - Gateway and client

/// Runs `body` against a fresh gateway on loopback and stops it afterwards, even on failure.
func withGateway<T>(
    logger: Logger = Logger(label: "test.gateway") { _ in SwiftLogNoOpLogHandler() },
    _ body: (DevGateway) async throws -> T
) async throws -> T {
    let gateway = try await DevGateway.start(logger: logger)
    do {
        let result = try await body(gateway)
        await gateway.stop()
        return result
    } catch {
        await gateway.stop()
        throw error
    }
}

/// How many times longer than written a real-time bound in these tests is (``TestTimeScale``).
let testTimeScale = TestTimeScale.factor

/// `duration` times ``testTimeScale``.
func scaled(_ duration: Duration) -> Duration { TestTimeScale.scaled(duration) }

/// A client over a real URLSession transport, recording what it sends. Its timeout is scaled
/// by ``testTimeScale``.
func makeClient(
    timeout: Duration = .seconds(10),
    logger: Logger = Logger(label: "test.client") { _ in SwiftLogNoOpLogHandler() }
) -> (OAuthClient, RecordingTransport) {
    let transport = RecordingTransport(URLSessionTransport(timeout: scaled(timeout)))
    return (OAuthClient(transport: transport, logger: logger, requestDeadline: scaled(.seconds(30))), transport)
}

/// Passes requests to a real transport and remembers them, to check what went on the wire.
final class RecordingTransport: HTTPTransport {
    private let base: any HTTPTransport
    private let recorded = Locked<[HTTPRequest]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    var requests: [HTTPRequest] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        recorded.withLock { $0.append(request) }
        return try await base.send(request)
    }
}

extension HTTPRequest {
    /// The form body as name/value pairs, decoded the way a server would.
    var formParameters: [String: String] {
        let text = String(decoding: body, as: UTF8.self)
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                $0.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "<invalid>"
            }
            result[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return result
    }
}

// MARK: - Outcomes

/// Runs a refresh that must fail, returning its error (or recording an issue if it succeeded).
func refreshFailure(
    _ client: OAuthClient,
    refreshToken: String,
    scope: String? = nil,
    endpoint: URL,
    credentials: ClientCredentials,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> RefreshError? {
    do throws(RefreshError) {
        let tokens = try await client.refresh(refreshToken: refreshToken, scope: scope, endpoint: endpoint, client: credentials)
        Issue.record("refresh unexpectedly succeeded: \(tokens)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

extension RefreshError {
    var isInvalidGrant: Bool {
        if case .invalidGrant = self { return true }
        return false
    }

    /// The OAuth code of a `clientMisconfigured` error.
    var misconfigurationCode: String? {
        if case .clientMisconfigured(let code, _) = self { return code }
        return nil
    }
}

extension IssuedTokens {
    /// The refresh token a fresh grant always has.
    var requiredRefreshToken: String {
        get throws { try #require(refreshToken) }
    }
}
