import Foundation

/// A failure that may go away if the same request is retried later.
///
/// ```swift
/// case .transient(let failure): try await clock.sleep(for: failure.retryAfter ?? .seconds(30))
/// ```
public enum TransientFailure: Sendable, Hashable {
    /// The server could not be reached, or the connection broke (refused, unreachable, TLS).
    case network(message: String)
    /// No response arrived in time (the transport's timeout, or HTTP 408).
    case timeout
    /// HTTP 429; `retryAfter` is the server's `Retry-After` as a delay, when it gave one.
    case rateLimited(retryAfter: Duration?)
    /// The server failed: a 5xx status, or a `server_error` / `temporarily_unavailable` error
    /// code. `retryAfter`: a 503's `Retry-After` as a delay, when it gave one (RFC 9110 §15.6.4).
    case server(status: Int, retryAfter: Duration? = nil)

    /// How long the server asked the client to wait (`Retry-After`), when it did.
    public var retryAfter: Duration? {
        switch self {
        case .rateLimited(let retryAfter), .server(_, let retryAfter): retryAfter
        case .network, .timeout: nil
        }
    }
}

extension TransientFailure: CustomStringConvertible {
    /// What happened, in one line.
    public var description: String {
        switch self {
        case .network(let message): "network failure: \(message)"
        case .timeout: "the server did not answer in time"
        case .rateLimited(let retryAfter?): "rate limited by the server; retry after \(retryAfter.components.seconds) s"
        case .rateLimited(nil): "rate limited by the server"
        case .server(let status, let retryAfter?): "server error (HTTP \(status)); retry after \(retryAfter.components.seconds) s"
        case .server(let status, nil): "server error (HTTP \(status))"
        }
    }
}

extension TransientFailure {
    /// Classifies a transport error; nil for cancellation and for a pinning failure, which
    /// are not failures to retry (callers check ``TransportError/pinningFailed(host:reason:)`` first).
    init?(_ error: TransportError) {
        switch error {
        case .timedOut: self = .timeout
        case .connectionFailed(let reason): self = .network(message: reason)
        case .invalidResponse(let reason): self = .network(message: "invalid response: \(reason)")
        case .cancelled, .pinningFailed: return nil
        }
    }

    /// Classifies any error a transport threw; nil for cancellation. A custom transport's own
    /// error may describe the request, so only its type is kept.
    init?(transportFailure error: any Error) {
        if let error = error as? TransportError {
            self.init(error)
        } else if error is CancellationError {
            return nil
        } else {
            self = .network(message: "transport failed with \(type(of: error))")
        }
    }

    /// A short, secret-free name for log metadata.
    var outcomeName: String {
        switch self {
        case .network: "transient.network"
        case .timeout: "transient.timeout"
        case .rateLimited: "transient.rate_limited"
        case .server: "transient.server"
        }
    }

    /// The longest `Retry-After` read, about 31 years: a longer one is taken as this, so adding
    /// it to a date never overflows. Callers cap it far lower (the session: its back-off cap).
    static let longestRetryAfter: Int64 = 1_000_000_000

    /// Reads `Retry-After` in both forms of RFC 9110 §10.2.3 as a delay from now: delta-seconds,
    /// or an HTTP date, taken against the response's own `Date` header when it has one (the
    /// server's clock against the server's clock: no skew), else against `now`. A date in the
    /// past means now (zero); anything else unreadable gives nil. The caller caps the delay.
    ///
    /// ```swift
    /// TransientFailure.retryAfter(in: ["Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"], now: now)
    /// ```
    static func retryAfter(in headers: HTTPHeaderFields, now: Date) -> Duration? {
        guard let raw = headers["Retry-After"] else { return nil }
        let text = raw.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            // Digits only: too many for an Int64 is still "a very long time", not nothing.
            return .seconds(min(Int64(text) ?? longestRetryAfter, longestRetryAfter))
        }
        guard let date = httpDate(text) else { return nil }
        let reference = headers["Date"].flatMap { httpDate($0.trimmingCharacters(in: .whitespaces)) } ?? now
        let seconds = date.timeIntervalSince(reference)
        return .seconds(max(0, Int64(min(seconds, Double(longestRetryAfter)).rounded(.up))))
    }

    /// An HTTP date: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), or the obsolete RFC 850
    /// and asctime forms RFC 9110 §5.6.7 says a recipient must accept.
    static func httpDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
