import Foundation
import Logging
import VaultSync

/// Collects every log record in memory so a test can assert that no secret was logged.
///
/// ```swift
/// let logs = CapturedLogs()
/// var options = VaultOptions(logger: logs.logger())
/// … // exercise the vault
/// #expect(logs.lines.allSatisfy { !$0.contains(token) })
/// ```
public final class CapturedLogs: Sendable {
    private let storage = Locked<[String]>([])

    public init() {}

    /// A logger at `.trace` that records message, metadata and source of every entry.
    public func logger(label: String = "test") -> Logger {
        var logger = Logger(label: label) { label in Handler(label: label, sink: self) }
        logger.logLevel = .trace
        return logger
    }

    /// Every captured entry, rendered as one line each.
    public var lines: [String] { storage.withLock { $0 } }

    /// Whether any captured line contains `secret`.
    public func contains(_ secret: String) -> Bool { lines.contains { $0.contains(secret) } }

    fileprivate func append(_ line: String) { storage.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let label: String
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            sink.append("\(event.level) \(label) \(event.message) \(merged) \(event.source)")
        }
    }
}
