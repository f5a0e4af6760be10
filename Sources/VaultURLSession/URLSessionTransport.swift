import Foundation
import VaultOAuth
import VaultSync

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An `HTTPTransport` over Foundation's `URLSession`: ephemeral, no cookies, no cache, no redirects.
///
/// A module of its own: on Linux it pulls in FoundationNetworking and with it libcurl (about
/// 30 shared libraries loaded at every start), which `vault` and anything else that only
/// needs `VaultOAuth` (whose default is `NIOTransport`) should not pay for. It cannot check
/// SPKI pins: a pinned request is refused, never sent unchecked.
///
/// Redirects are not followed, so a request carrying a refresh token or client secret is never
/// re-sent to another location: the 3xx response is returned as it is. A 401 is returned as a
/// response too; the transport never answers an authentication challenge with credentials.
///
/// ```swift
/// let transport = URLSessionTransport(timeout: .seconds(10))
/// let client = OAuthClient(transport: transport, logger: logger)
/// ```
public final class URLSessionTransport: HTTPTransport {
    /// The timeout used for requests that do not set their own.
    public let timeout: Duration
    /// The largest response body accepted; a longer one fails with `TransportError.invalidResponse(reason:)`.
    public let maximumResponseSize: Int
    private let session: URLSession
    private let exchanges: ExchangeDelegate

    /// Creates a transport whose requests time out after `timeout` without progress.
    ///
    /// On Linux, FoundationNetworking counts request timeouts in whole seconds and truncates
    /// (0.3 s would fire at once, before anything is sent), so the transport rounds `timeout`
    /// up to whole seconds there: a request never times out sooner than asked.
    public init(timeout: Duration = .seconds(30), maximumResponseSize: Int = 4 << 20) {
        self.timeout = timeout
        self.maximumResponseSize = maximumResponseSize
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.urlCredentialStorage = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        configuration.timeoutIntervalForRequest = Self.foundationTimeout(timeout)
        self.exchanges = ExchangeDelegate(maximumResponseSize: maximumResponseSize)
        self.session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)
    }

    deinit {
        session.invalidateAndCancel()
    }

    /// Sends `request`; throws `TransportError` when no HTTP response was received.
    ///
    /// A request with pins is refused (`TransportError.pinningFailed(host:reason:)`) without
    /// connecting: on Linux, URLSession never shows the server's certificate chain.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard request.pins.isEmpty else {
            throw TransportError.pinningFailed(
                host: request.url.hostForMessages,
                reason: "this transport (URLSession) cannot see the certificate chain, so it cannot check pins")
        }
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method.rawValue
        urlRequest.timeoutInterval = Self.foundationTimeout(request.timeout ?? timeout)
        urlRequest.cachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        urlRequest.httpShouldHandleCookies = false
        for field in request.headers {
            urlRequest.addValue(field.value, forHTTPHeaderField: field.name)
        }
        if !request.body.isEmpty {
            urlRequest.httpBody = request.body
        }

        // FoundationNetworking makes the task with a `sync` on the session's work queue, which
        // waits while that queue (shared by every session's transfers) is busy: made on a
        // Dispatch thread, never on the cooperative pool, which a few such waits would stall.
        let prepared = urlRequest
        let task = await Self.offPool { [session] in session.dataTask(with: prepared) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                exchanges.begin(task.taskIdentifier, continuation)
                if Task.isCancelled {
                    exchanges.finish(task.taskIdentifier, with: .failure(TransportError.cancelled))
                } else {
                    task.resume()
                }
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// Runs `body` on a Dispatch thread and returns its result.
    private static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: body()) }
        }
    }

    /// The interval to give Foundation for `timeout`.
    ///
    /// swift-corelibs-foundation arms its request timer with `Int(timeoutInterval) * 1000`
    /// milliseconds: a fraction of a second is dropped, and a sub-second timeout fires at once,
    /// usually before the request is written. Rounding up keeps every timeout at least as long
    /// as the caller asked for. Darwin's URLSession takes fractions as they are.
    static func foundationTimeout(_ timeout: Duration) -> TimeInterval {
        let seconds = max(timeout, .zero).timeInterval
        #if canImport(FoundationNetworking)
            return max(1, seconds.rounded(.up))
        #else
            return seconds
        #endif
    }

    /// Maps a URLError to a transport error by its code only: its userInfo holds the URL.
    static func transportError(for error: URLError) -> TransportError {
        switch error.code {
        case .timedOut:
            return .timedOut
        case .cancelled:
            return .cancelled
        case .cannotConnectToHost:
            return .connectionFailed(reason: "connection refused")
        case .cannotFindHost, .dnsLookupFailed:
            return .connectionFailed(reason: "host not found")
        case .networkConnectionLost:
            return .connectionFailed(reason: "connection lost")
        case .notConnectedToInternet:
            return .connectionFailed(reason: "not connected to a network")
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot,
            .clientCertificateRejected, .clientCertificateRequired:
            return .connectionFailed(reason: "TLS handshake failed (URLError \(error.code.rawValue))")
        case .badServerResponse, .cannotParseResponse, .zeroByteResource:
            return .invalidResponse(reason: "URLError \(error.code.rawValue)")
        default:
            return .connectionFailed(reason: "URLError \(error.code.rawValue)")
        }
    }
}

// MARK: - Delegate

/// Collects each task's response and body and resumes its caller exactly once.
///
/// Delegate-based rather than `URLSession.data(for:)` so that a 401 carrying
/// `WWW-Authenticate` comes back as a response: swift-corelibs-foundation before 6.3.2 leaves
/// such a task suspended forever when nobody answers the challenge
/// (swift-corelibs-foundation#5456), and answering it would replay credentials.
private final class ExchangeDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct Exchange {
        let continuation: CheckedContinuation<HTTPResponse, any Error>
        var response: HTTPURLResponse?
        var body = Data()
    }

    private let maximumResponseSize: Int
    private let exchanges = Locked<[Int: Exchange]>([:])

    init(maximumResponseSize: Int) {
        self.maximumResponseSize = maximumResponseSize
    }

    func begin(_ id: Int, _ continuation: CheckedContinuation<HTTPResponse, any Error>) {
        exchanges.withLock { $0[id] = Exchange(continuation: continuation) }
    }

    /// Resumes the caller of task `id`, if it has not been resumed yet.
    func finish(_ id: Int, with result: Result<HTTPResponse, any Error>) {
        let exchange = exchanges.withLock { $0.removeValue(forKey: id) }
        exchange?.continuation.resume(with: result)
    }

    /// Finishes with the response and body collected so far for task `id`.
    private func finishWithCollectedResponse(_ id: Int, fallback: HTTPURLResponse? = nil) {
        let collected = exchanges.withLock { $0[id].map { ($0.response, $0.body) } }
        guard let (response, body) = collected else { return }
        guard let http = response ?? fallback else {
            finish(id, with: .failure(TransportError.invalidResponse(reason: "not an HTTP response")))
            return
        }
        var headers = HTTPHeaderFields()
        for (name, value) in http.allHeaderFields {
            headers.append(name: String(describing: name), value: String(describing: value))
        }
        finish(id, with: .success(HTTPResponse(status: http.statusCode, headers: headers, body: body)))
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let http = response as? HTTPURLResponse
        exchanges.withLock { $0[dataTask.taskIdentifier]?.response = http }
        completionHandler(http == nil ? .cancel : .allow)
        if http == nil {
            finish(dataTask.taskIdentifier, with: .failure(TransportError.invalidResponse(reason: "not an HTTP response")))
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let tooLarge = exchanges.withLock { exchanges -> Bool in
            guard exchanges[dataTask.taskIdentifier] != nil else { return false }
            exchanges[dataTask.taskIdentifier]?.body.append(data)
            return (exchanges[dataTask.taskIdentifier]?.body.count ?? 0) > maximumResponseSize
        }
        if tooLarge {
            finish(dataTask.taskIdentifier, with: .failure(TransportError.invalidResponse(reason: "response body exceeds \(maximumResponseSize) bytes")))
            dataTask.cancel()
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let error else {
            finishWithCollectedResponse(task.taskIdentifier)
            return
        }
        let failure: TransportError
        if let urlError = error as? URLError {
            failure = URLSessionTransport.transportError(for: urlError)
        } else {
            failure = .connectionFailed(reason: "\(type(of: error))")
        }
        finish(task.taskIdentifier, with: .failure(failure))
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
            // swift-corelibs-foundation raises HTTP challenges only after the whole 401 has been read:
            // hand that response back, then drop the task instead of retrying with credentials.
            if let failure = challenge.failureResponse as? HTTPURLResponse {
                finishWithCollectedResponse(task.taskIdentifier, fallback: failure)
                completionHandler(.cancelAuthenticationChallenge, nil)
                return
            }
        #endif
        // Darwin: without stored credentials, default handling delivers the 401 as a response,
        // and server-trust challenges get the system's evaluation.
        completionHandler(.performDefaultHandling, nil)
    }
}

extension Duration {
    /// The duration in seconds, as Foundation wants it.
    var timeInterval: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
