import Foundation
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import SwiftASN1
import VaultSync
import X509

#if canImport(Glibc)
    import Glibc
#endif

/// An ``HTTPTransport`` over SwiftNIO: HTTP/1.1, one connection per request, TLS through NIOSSL.
/// The transport that can check ``HTTPRequest/pins``, and the default of ``OAuthClient`` and
/// the `vault` command: `URLSessionTransport` lives in its own module (`VaultURLSession`) so
/// that linking this one never loads FoundationNetworking and libcurl (about 30 shared
/// libraries, a third of a fresh `vault token`'s start-up).
///
/// Why not AsyncHTTPClient: up to 1.37 it builds its `NIOSSLClientHandler` itself
/// (`HTTPConnectionPool+Factory.swift`) without a verification callback, and NIOSSL's
/// `TLSConfiguration` carries none, so a request could not be tied to the chain that was
/// checked. Here the handler is built per connection with NIOSSL's custom verification callback
/// (`PinnedChainCheck`), and the request is written only after the handshake completed.
///
/// - A request without pins to an https URL gets NIOSSL's standard verification (BoringSSL:
///   chain to ``TrustRoots``, validity, host name).
/// - A request with pins gets the callback: swift-certificates validates the chain (RFC 5280,
///   ``TrustRoots``, host name or IP) and the handshake succeeds only if the validated chain holds
///   one of the pins; otherwise ``TransportError/pinningFailed(host:reason:)``, with no byte of
///   the request written. Plain http with pins is refused before connecting.
/// - With a ``proxy``, an https request to a host it does not exclude goes through an HTTP
///   `CONNECT` tunnel: the proxy sees the host and port, never a byte of the request, and the
///   handshake, the certificate checks and the pins are the server's, end to end.
/// - Redirects are not followed and a 401 is returned as a response.
/// - ``timeout`` (or the request's own) is a *total* deadline, not an idle one.
///
/// ```swift
/// let transport = NIOTransport()
/// let client = OAuthClient(transport: transport, logger: logger)
/// let tokens = try await client.refresh(refreshToken: stored, endpoint: tokenURL, client: credentials,
///                                       pins: [try SPKIPin("sha256/…")])
/// ```
public final class NIOTransport: HTTPTransport {
    /// How long a request may take in all when it does not set ``HTTPRequest/timeout``.
    public let timeout: Duration
    /// The largest response body accepted; a longer one fails with ``TransportError/invalidResponse(reason:)``.
    public let maximumResponseSize: Int
    /// Where a server's chain must lead.
    public let trustRoots: TrustRoots
    /// The proxy https requests go through (`HTTPS_PROXY`); nil: every request goes direct.
    public let proxy: ProxyConfiguration?
    /// The event loops to use; nil: NIO's shared group, started on the first request.
    private let group: (any EventLoopGroup)?
    /// Made on the first https request (loading trust roots is work a command that sends nothing
    /// should not do) and shared by every request, one for direct connections and one for
    /// tunnels. Built on the calling task, once: a hop to a thread pool was tried and made every
    /// TLS test time out under AddressSanitizer with the whole suite running (issue 26's pool
    /// starvation); a failure is not kept.
    private let tlsContexts = Locked<[ContextKind: NIOSSLContext]>([:])
    /// The trust roots read from a lazily named file, the same way.
    private let readRoots = Locked<TrustRoots?>(nil)

    /// Direct connections let NIOSSL check the host name (and an IP literal against the peer's
    /// address); through a proxy the peer is the proxy, so the target's identity is checked by
    /// ``PinnedChainCheck`` alone.
    private enum ContextKind: Hashable {
        case direct, tunnelled
    }

    /// Creates a transport. Making one is cheap: no thread, socket or trust store is touched
    /// before the first request, so a tool can make it at start and send nothing.
    public init(
        timeout: Duration = .seconds(30), maximumResponseSize: Int = 4 << 20, trustRoots: TrustRoots = .system,
        proxy: ProxyConfiguration? = nil, eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        self.timeout = timeout
        self.maximumResponseSize = maximumResponseSize
        self.trustRoots = trustRoots
        self.proxy = proxy
        self.group = eventLoopGroup
    }

    /// The same transport (bounds, proxy, event loops) with the PEM bundle at `path` as its
    /// trust roots, read at its first https request.
    public func trusting(caFile path: String) throws(TrustRootsError) -> any HTTPTransport {
        NIOTransport(
            timeout: timeout, maximumResponseSize: maximumResponseSize, trustRoots: .pemFile(lazily: path), proxy: proxy,
            eventLoopGroup: group)
    }

    /// Sends `request` on a connection of its own; throws ``TransportError`` when no HTTP
    /// response was received in time, or the pins did not match (nothing sent).
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let target = try HTTPTarget(request.url)
        if !request.pins.isEmpty, !target.usesTLS {
            throw TransportError.pinningFailed(host: target.hostForMessages, reason: "plain http cannot be pinned; the endpoint must use https")
        }
        return try await withDeadline(request.timeout ?? timeout, clock: ContinuousClock()) {
            try await self.exchange(request, with: target)
        }
    }

    // MARK: - One exchange

    private typealias Connection = (channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>, secured: EventLoopFuture<Void>?)

    /// The trust roots, a lazily named CA file read now (once; a regular file only, so the read
    /// cannot block); a file that cannot be read fails the request before anything is sent, and
    /// is read again next time.
    private func resolvedTrustRoots() throws -> TrustRoots {
        guard case .file = trustRoots.source else { return trustRoots }
        return try readRoots.withLock { current in
            if let current { return current }
            do {
                let read = try trustRoots.resolved()
                current = read
                return read
            } catch {
                throw TransportError.connectionFailed(reason: "\(error)")
            }
        }
    }

    private func exchange(_ request: HTTPRequest, with target: HTTPTarget) async throws -> HTTPResponse {
        let connection: Connection
        let budget = TimeAmount.nanoseconds(Self.nanoseconds(request.timeout ?? timeout))
        // Only https is tunnelled: plain http goes to loopback only (EndpointRule), never proxied.
        let tunnel = proxy.flatMap { proxy in
            target.usesTLS && proxy.proxies(target.host) ? Tunnel(proxy: proxy, deadline: .now() + budget) : nil
        }
        let roots = target.usesTLS ? try resolvedTrustRoots() : trustRoots
        // Through a tunnel the chain and the target's identity are always checked here (with
        // or without pins): NIOSSL would compare IP names with the proxy's address.
        let check =
            request.pins.isEmpty && tunnel == nil
            ? nil : PinnedChainCheck(pins: request.pins, target: target, trustRoots: roots)
        do {
            let context = target.usesTLS ? try sslContext(tunnel == nil ? .direct : .tunnelled, roots: roots) : nil
            let initializer: @Sendable (any Channel) -> EventLoopFuture<Connection> = { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tunnel {
                        return try Self.configureTunnel(channel, tunnel: tunnel, target: target, context: context, check: check)
                    }
                    return try Self.configure(channel, target: target, context: context, check: check)
                }
            }
            // Connecting may take the request's whole budget (NIO's own default is 10 s, a
            // second, shorter limit the caller never set).
            let bootstrap = ClientBootstrap(group: group ?? MultiThreadedEventLoopGroup.singleton).connectTimeout(budget)
            let (host, port) = (tunnel?.proxy.host ?? target.host, tunnel?.proxy.port ?? target.port)
            if let address = try? SocketAddress(ipAddress: host, port: port) {
                // An address needs no lookup: NIO's resolver would queue getaddrinfo on a
                // Dispatch global queue, behind whatever else the process has put there.
                connection = try await bootstrap.connect(to: address, channelInitializer: initializer)
            } else {
                connection = try await bootstrap.connect(host: host, port: port, channelInitializer: initializer)
            }
        } catch {
            throw Self.transportError(for: error, target: target, check: check, tunnel: tunnel)
        }

        let channel = connection.channel
        let head = Self.head(of: request, target: target)
        let limit = maximumResponseSize
        do {
            return try await withTaskCancellationHandler {
                try await channel.executeThenClose { inbound, outbound in
                    // Nothing is written before the handshake, and with it the pin check, succeeded.
                    if let secured = connection.secured { try await secured.get() }
                    var parts: [HTTPClientRequestPart] = [.head(head)]
                    if !request.body.isEmpty { parts.append(.body(.byteBuffer(ByteBuffer(bytes: request.body)))) }
                    parts.append(.end(nil))
                    // One write. If it still reports a failure, the server may have read the whole
                    // request, answered and closed already (seen under load: a refresh the server
                    // had rotated, reported as "connection lost", its new tokens dropped and the
                    // old refresh token replayed next). An answer that arrived is the outcome.
                    var writeFailure: (any Error)?
                    do {
                        try await outbound.write(contentsOf: parts)
                    } catch {
                        writeFailure = error
                    }
                    do {
                        return try await Self.readResponse(from: inbound, limit: limit)
                    } catch {
                        throw writeFailure ?? error
                    }
                }
            } onCancel: {
                channel.channel.close(promise: nil)
            }
        } catch {
            throw Self.transportError(for: error, target: target, check: check, tunnel: tunnel)
        }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow
            ? Int64.max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// The pipeline: TLS (with the pin check when there are pins) and a gate that reports the
    /// end of the handshake, then HTTP/1.1. Runs on the channel's event loop.
    private static func configure(
        _ channel: any Channel, target: HTTPTarget, context: NIOSSLContext?,
        check: PinnedChainCheck?
    ) throws -> Connection {
        let pipeline = channel.pipeline.syncOperations
        var secured: EventLoopFuture<Void>?
        if let context {
            let (tls, gate) = try securing(channel, target: target, context: context, check: check)
            do {
                try pipeline.addHandler(tls)
                try pipeline.addHandler(gate)
            } catch {
                gate.abandon(error)
                throw error
            }
            secured = gate.completed
        }
        try pipeline.addHTTPClientHandlers()
        return (try NIOAsyncChannel(wrappingChannelSynchronously: channel), secured)
    }

    /// The TLS handler for `target` (with the pin check when there are pins) and the gate that
    /// reports the end of its handshake.
    private static func securing(
        _ channel: any Channel, target: HTTPTarget, context: NIOSSLContext, check: PinnedChainCheck?
    ) throws -> (NIOSSLClientHandler, HandshakeGate) {
        // SNI carries names only; for an IP literal NIOSSL checks the certificate against the peer's address.
        let serverName = target.isIPLiteral ? nil : target.host
        let tls =
            if let check {
                try NIOSSLClientHandler(context: context, serverHostname: serverName, customVerificationCallback: check.verify)
            } else {
                try NIOSSLClientHandler(context: context, serverHostname: serverName)
            }
        return (tls, HandshakeGate(channel.eventLoop.makePromise(of: Void.self)))
    }

    /// A connection to the proxy: `CONNECT host:port` first (HTTP/1.1 to the proxy, through
    /// NIOExtras' handler); once the proxy answers 2xx, its HTTP handlers leave the pipeline and
    /// TLS with the server starts on the tunnel, under the same HTTP/1.1 handlers and async
    /// wrapper as a direct connection (installed now, so no read is ever missed). `secured`
    /// completes when the server's handshake did; nothing of the request is written before.
    private static func configureTunnel(
        _ channel: any Channel, tunnel: Tunnel, target: HTTPTarget, context: NIOSSLContext?, check: PinnedChainCheck?
    ) throws -> Connection {
        guard let context else { throw TransportError.connectionFailed(reason: "only https is sent through a proxy") }
        let pipeline = channel.pipeline.syncOperations
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: target.hostHeader)
        if let authorization = tunnel.proxy.authorization { headers.add(name: "Proxy-Authorization", value: authorization) }
        let connected = channel.eventLoop.makePromise(of: Void.self)
        let encoder = HTTPRequestEncoder()
        let decoder = ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes))
        // The CONNECT target is an authority (RFC 9110 §9.3.6): an IPv6 literal in brackets.
        let connect = NIOHTTP1ProxyConnectHandler(
            targetHost: target.host.contains(":") ? "[\(target.host)]" : target.host, targetPort: target.port, headers: headers,
            deadline: tunnel.deadline, promise: connected)
        try pipeline.addHandler(encoder)
        try pipeline.addHandler(decoder)
        try pipeline.addHandler(connect)
        // The request's own HTTP/1.1 handlers, above where TLS will sit.
        let requestEncoder = HTTPRequestEncoder()
        try pipeline.addHandler(requestEncoder)
        try pipeline.addHandler(ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes)))
        let wrapped = try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
        let secured = connected.futureResult.flatMap {
            // On the event loop, in order: the proxy's HTTP codec goes, then TLS comes in its
            // place (its handshake starts as it is added to the active channel).
            // (The CONNECT handler has removed itself.)
            channel.pipeline.removeHandler(decoder).flatMap { channel.pipeline.removeHandler(encoder) }
                .flatMapThrowing {
                    let (tls, gate) = try securing(channel, target: target, context: context, check: check)
                    let sync = channel.pipeline.syncOperations
                    do {
                        try sync.addHandler(gate, position: .before(requestEncoder))
                        try sync.addHandler(tls, position: .before(gate))
                    } catch {
                        gate.abandon(error)  // the proxy closed at once: no promise is left open
                        throw error
                    }
                    return gate.completed
                }
                .flatMap { $0 }
        }
        return (wrapped, secured)
    }

    private func sslContext(_ kind: ContextKind, roots: TrustRoots) throws -> NIOSSLContext {
        try tlsContexts.withLock { contexts in
            if let current = contexts[kind] { return current }
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.minimumTLSVersion = .tlsv12
            // Direct: also what makes NIOSSL check the host name after a pinned handshake.
            configuration.certificateVerification = kind == .direct ? .fullVerification : .noHostnameVerification
            configuration.trustRoots = roots.nioSSLTrustRoots
            let made = try NIOSSLContext(configuration: configuration)
            contexts[kind] = made
            return made
        }
    }

    private static func head(of request: HTTPRequest, target: HTTPTarget) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: target.hostHeader)
        let framing: Set<String> = ["host", "content-length", "connection", "transfer-encoding"]
        for field in request.headers where !framing.contains(field.name.lowercased()) {
            headers.add(name: field.name, value: field.value)
        }
        if !request.body.isEmpty || request.method == .post {
            headers.add(name: "Content-Length", value: String(request.body.count))
        }
        headers.add(name: "Connection", value: "close")
        return HTTPRequestHead(
            version: .http1_1, method: HTTPMethod(rawValue: request.method.rawValue),
            uri: target.requestTarget, headers: headers)
    }

    private static func readResponse(
        from inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>,
        limit: Int
    ) async throws -> HTTPResponse {
        var head: HTTPResponseHead?
        var body: [UInt8] = []
        for try await part in inbound {
            switch part {
            case .head(let received):
                head = received
            case .body(let buffer):
                guard body.count + buffer.readableBytes <= limit else {
                    throw TransportError.invalidResponse(reason: "response body exceeds \(limit) bytes")
                }
                body.append(contentsOf: buffer.readableBytesView)
            case .end:
                guard let received = head else { throw TransportError.invalidResponse(reason: "no status line") }
                if (100..<200).contains(received.status.code) {
                    head = nil  // an interim answer; the real one follows
                    body = []
                    continue
                }
                var headers = HTTPHeaderFields()
                for (name, value) in received.headers { headers.append(name: name, value: value) }
                return HTTPResponse(status: Int(received.status.code), headers: headers, body: Data(body))
            }
        }
        throw TransportError.invalidResponse(reason: "the connection closed before the answer was complete")
    }

    // MARK: - Errors

    /// What went wrong, in this build's words: never a header value or body, and a pin check's
    /// verdict before anything NIOSSL says about the same handshake.
    private static func transportError(
        for error: any Error, target: HTTPTarget, check: PinnedChainCheck?, tunnel: Tunnel? = nil
    ) -> TransportError {
        if case .refused(let reason)? = check?.verdict {
            guard check?.pins.isEmpty == false else {
                return .connectionFailed(reason: "TLS handshake refused by the certificate check of \(target.hostForMessages): \(reason)")
            }
            return .pinningFailed(host: target.hostForMessages, reason: reason)
        }
        if let tunnel, let refusal = error as? NIOHTTP1ProxyConnectHandler.Error {
            return .connectionFailed(reason: "the proxy \(tunnel.proxy) \(Self.proxyRefusal(refusal)) to \(target.hostForMessages)")
        }
        if let tunnel, error is NIOConnectionError {
            return .connectionFailed(reason: "could not connect to the proxy \(tunnel.proxy)")
        }
        switch error {
        case let error as TransportError:
            return error
        case is CancellationError:
            return .cancelled
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return .connectionFailed(reason: "TLS handshake refused: the certificate is not for \(target.hostForMessages)")
        case let error as NIOSSLError:
            return .connectionFailed(reason: "TLS handshake failed: \(String(describing: error).prefix(240))")
        case let error as ChannelError:
            switch error {
            case .connectTimeout: return .timedOut
            case .eof, .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed:
                return .connectionFailed(reason: "connection lost")
            default: return .connectionFailed(reason: "channel error")
            }
        case let error as IOError:
            return .connectionFailed(reason: "\(error)")
        case is NIOConnectionError:
            return .connectionFailed(reason: "could not connect to \(target.hostForMessages)")
        case is SocketAddressError:
            return .connectionFailed(reason: "host not found")
        case let error as HTTPParserError:
            return .invalidResponse(reason: "\(error)")
        default:
            return .connectionFailed(reason: "\(type(of: error))")
        }
    }
}

// MARK: - Proxy

extension NIOTransport {
    /// A request's way through the proxy.
    struct Tunnel: Sendable {
        var proxy: ProxyConfiguration
        var deadline: NIODeadline
    }

    /// What the proxy did instead of opening the tunnel, in this build's words.
    static func proxyRefusal(_ error: NIOHTTP1ProxyConnectHandler.Error) -> String {
        typealias Refusal = NIOHTTP1ProxyConnectHandler.Error
        // The handler's errors compare by kind only.
        if error == Refusal.proxyAuthenticationRequired() {
            return "asked for credentials (HTTP 407: give them in the proxy URL) instead of opening a tunnel"
        }
        if error == Refusal.invalidProxyResponseHead(HTTPResponseHead(version: .http1_1, status: .ok)) {
            return "answered the CONNECT with an error status instead of opening a tunnel"
        }
        if error == Refusal.httpProxyHandshakeTimeout() { return "did not open a tunnel in time" }
        if error == Refusal.remoteConnectionClosed() { return "closed the connection instead of opening a tunnel" }
        return "did not open a tunnel"
    }
}

// MARK: - Trust roots

extension NIOTransport {
    /// Which certificate authorities a server's chain must lead to.
    ///
    /// ```swift
    /// NIOTransport(trustRoots: .system)                                   // the system's store
    /// NIOTransport(trustRoots: try .init(derCertificates: [privateCA]))   // a private CA only
    /// ```
    public struct TrustRoots: Sendable {
        enum Source: Sendable {
            case system
            case certificates([NIOSSLCertificate], CertificateStore)
            /// A PEM bundle, read on the first https request (and then kept).
            case file(String, Locked<Result<TrustRoots, TrustRootsError>?>)
        }

        let source: Source

        /// The system's trust store (on Debian `/etc/ssl/certs/ca-certificates.crt`), read on
        /// the first https request.
        public static var system: TrustRoots { TrustRoots(source: .system) }

        /// Only these DER-encoded certificates: a private certificate authority, or a test's own.
        public init(derCertificates: [[UInt8]]) throws {
            let nioSSL = try derCertificates.map { try NIOSSLCertificate(bytes: $0, format: .der) }
            source = .certificates(nioSSL, CertificateStore(try derCertificates.map { try Certificate(derEncoded: $0) }))
        }

        /// The certificates of a PEM bundle (`--ca-file`, `SSL_CERT_FILE`): a private certificate
        /// authority, instead of the system's store, as curl's `--cacert` does. Read now, so a
        /// missing or empty file is an error before anything is sent.
        ///
        /// ```swift
        /// let transport = NIOTransport(trustRoots: try .init(pemFile: "/etc/corp/ca.pem"))
        /// ```
        public init(pemFile path: String) throws(TrustRootsError) {
            self = try Self.read(path)
        }

        /// The same bundle, read only when the first https request needs it: a command that
        /// sends nothing never parses it. A file that cannot be read then fails that request
        /// (and every later one) with ``TrustRootsError``'s reason; check it with
        /// ``checkReadable(_:)`` first to fail early.
        public static func pemFile(lazily path: String) -> TrustRoots {
            TrustRoots(source: .file(path, Locked(nil)))
        }

        /// Throws unless `path` is a regular file this process can open: the cheap check a
        /// command makes before relying on ``pemFile(lazily:)``.
        public static func checkReadable(_ path: String) throws(TrustRootsError) {
            // A regular file only: a FIFO or a device would block the reading thread for good.
            let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path  // SSL_CERT_FILE is often a link
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: target) else {
                throw TrustRootsError("cannot read the CA file \(path): there is no such file")
            }
            guard attributes[.type] as? FileAttributeType == .typeRegular else {
                throw TrustRootsError("cannot read the CA file \(path): it is not a regular file")
            }
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw TrustRootsError("cannot read the CA file \(path): no permission")
            }
        }

        /// The file's bytes (at most 16 MiB), read with read(2): Foundation's
        /// `Data(contentsOf:)` leaked its read buffer for an empty file (LeakSanitizer).
        private static func contents(of path: String) throws(TrustRootsError) -> [UInt8] {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw TrustRootsError("cannot read the CA file \(path): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw TrustRootsError("cannot read the CA file \(path): \(String(cString: strerror(errno)))")
                }
                if count == 0 { return bytes }
                bytes += buffer.prefix(count)
                guard bytes.count <= 16 << 20 else { throw TrustRootsError("the CA file \(path) is larger than 16 MiB") }
            }
        }

        private static func read(_ path: String) throws(TrustRootsError) -> TrustRoots {
            try checkReadable(path)
            let bytes = try contents(of: path)
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMBytes(bytes)
            } catch {
                throw TrustRootsError("the CA file \(path) is not a PEM certificate bundle")
            }
            guard !certificates.isEmpty else { throw TrustRootsError("the CA file \(path) holds no PEM certificate") }
            do {
                return try TrustRoots(derCertificates: certificates.map { try $0.toDERBytes() })
            } catch {
                throw TrustRootsError("the CA file \(path) holds a certificate that cannot be read")
            }
        }

        private init(source: Source) { self.source = source }

        /// The roots themselves: a lazily named file read now (once).
        func resolved() throws(TrustRootsError) -> TrustRoots {
            guard case .file(let path, let loaded) = source else { return self }
            // A failure is not kept: the file may be fixed while a long-lived agent runs.
            let result = loaded.withLock { loaded -> Result<TrustRoots, TrustRootsError> in
                if let loaded { return loaded }
                let read = Result { () throws(TrustRootsError) -> TrustRoots in try Self.read(path) }
                if case .success = read { loaded = read }
                return read
            }
            return try result.get()
        }

        var nioSSLTrustRoots: NIOSSLTrustRoots {
            switch source {
            case .system, .file: .default
            case .certificates(let certificates, _): .certificates(certificates)
            }
        }
    }
}

/// A CA bundle that cannot be used; says which file and why.
public struct TrustRootsError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Handshake gate

/// Completes its future when the TLS handshake (certificate checks included) succeeded, and
/// fails it when the handshake failed or the connection closed first. Passes everything on.
private final class HandshakeGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let promise: EventLoopPromise<Void>
    var completed: EventLoopFuture<Void> { promise.futureResult }

    init(_ promise: EventLoopPromise<Void>) { self.promise = promise }

    /// Fails the handshake's future when the gate never made it into the pipeline.
    func abandon(_ error: any Error) { promise.fail(error) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent { promise.succeed(()) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)  // a second completion is ignored by NIO
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.eof)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        promise.fail(ChannelError.ioOnClosedChannel)
    }
}

// MARK: - Target

/// Where a request goes, taken apart once: scheme, host, port, and the request target.
struct HTTPTarget: Sendable {
    let usesTLS: Bool
    /// The host without brackets, as it is connected to.
    let host: String
    let port: Int
    let isIPLiteral: Bool
    /// Path and query, percent-encoded as in the URL (`/oauth/token?x=1`).
    let requestTarget: String
    /// `host[:port]`, with brackets around an IPv6 literal.
    let hostHeader: String

    init(_ url: URL) throws(TransportError) {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
            var host = components.host, !host.isEmpty
        else {
            throw .invalidResponse(reason: "not an http(s) URL with a host")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        usesTLS = scheme == "https"
        self.host = host
        port = components.port ?? (usesTLS ? 443 : 80)
        isIPLiteral = (try? SocketAddress(ipAddress: host, port: 0)) != nil
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        requestTarget = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        let bracketed = host.contains(":") ? "[\(host)]" : host
        hostHeader = components.port.map { "\(bracketed):\($0)" } ?? bracketed
    }

    /// `host[:port]` for messages.
    var hostForMessages: String { hostHeader }
}
