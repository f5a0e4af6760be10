import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// A small HTTP/1.1 server on `127.0.0.1` (TLS with a ``TestChain``, or plain) that records
/// what reached it: connections, completed TLS handshakes, every application byte, every
/// request; and answers each request the way the test asks, including a byte at a time.
///
/// Waits on it are events (``wait(upTo:until:)``): the timeout only bounds a broken test.
///
/// ```swift
/// let server = try await LoopbackServer.start(tls: chain.serverIdentity, answer: .json(200, #"{"access_token":"a"}"#))
/// defer { Task { await server.stop() } }
/// _ = try await transport.send(HTTPRequest(method: .post, url: server.url("/oauth/token")))
/// #expect(server.log.value.requests.count == 1)
/// ```
public final class LoopbackServer: Sendable {
    /// The certificate chain (leaf first, DER) and the leaf's private key (PEM) the server presents.
    public struct TLSIdentity: Sendable {
        public let chainDER: [[UInt8]]
        public let keyPEM: String
    }

    /// How the server answers a complete request.
    public enum Answer: Sendable {
        /// The whole answer at once, with a JSON content type.
        case json(Int, String)
        /// The status line and headers at once, then the body one byte per `interval` (real
        /// time): a server that keeps a request alive without ever stalling.
        case trickle(String, every: Duration)
        /// Never answer.
        case silence
    }

    /// One request as the server parsed it.
    public struct Request: Sendable {
        public var method: String
        public var target: String
        public var headers: [String: String]
        public var body: String
    }

    /// Everything the server saw.
    public struct Log: Sendable {
        public var connections = 0
        public var handshakes = 0
        /// Bytes of application data received (after TLS): zero means not a byte of a request arrived.
        public var applicationBytes = 0
        public var requests: [Request] = []
        /// Body bytes of answers written so far.
        public var bodyBytesSent = 0
        public var closedConnections = 0
    }

    public let port: Int
    public let usesTLS: Bool
    /// What reached the server so far.
    public let log: Watched<Log>
    private let channel: any Channel

    private init(port: Int, usesTLS: Bool, channel: any Channel, log: Watched<Log>) {
        self.port = port
        self.usesTLS = usesTLS
        self.channel = channel
        self.log = log
    }

    /// `https://127.0.0.1:PORT/path` (or http without TLS).
    public func url(_ path: String) -> URL {
        URL(string: "\(usesTLS ? "https" : "http")://127.0.0.1:\(port)\(path)")!
    }

    /// Starts a server on an ephemeral port of 127.0.0.1.
    public static func start(tls: TLSIdentity?, answer: Answer) async throws -> LoopbackServer {
        let context = try tls.map { identity in
            let configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try identity.chainDER.map { .certificate(try NIOSSLCertificate(bytes: $0, format: .der)) },
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(identity.keyPEM.utf8), format: .pem)))
            return try NIOSSLContext(configuration: configuration)
        }
        let log = Watched(Log())
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    try channel.pipeline.syncOperations.addHandler(Responder(answer: answer, log: log))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw ChannelError.unknownLocalAddress
        }
        return LoopbackServer(port: port, usesTLS: tls != nil, channel: channel, log: log)
    }

    /// Stops accepting connections.
    public func stop() async {
        try? await channel.close()
    }

    /// Waits until the log satisfies `condition` (false after `timeout` of real time).
    @discardableResult
    public func wait(
        upTo timeout: Duration = TestTimeScale.scaled(.seconds(10)),
        until condition: @escaping @Sendable (Log) -> Bool
    ) async -> Bool {
        await log.wait(upTo: timeout, until: condition)
    }
}

/// Reads one request per connection and answers it. Runs on the connection's event loop.
private final class Responder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let answer: LoopbackServer.Answer
    private let log: Watched<LoopbackServer.Log>
    private var received: [UInt8] = []
    private var answered = false
    private var trickle: Scheduled<Void>?
    private var remaining: ArraySlice<UInt8> = []
    private var step = TimeAmount.seconds(1)

    init(answer: LoopbackServer.Answer, log: Watched<LoopbackServer.Log>) {
        self.answer = answer
        self.log = log
    }

    func channelActive(context: ChannelHandlerContext) {
        log.update { $0.connections += 1 }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent { log.update { $0.handshakes += 1 } }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        received.append(contentsOf: buffer.readableBytesView)
        log.update { $0.applicationBytes += buffer.readableBytes }
        guard !answered, let request = Self.parse(received) else { return }
        answered = true
        log.update { $0.requests.append(request) }
        respond(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        trickle?.cancel()
        log.update { $0.closedConnections += 1 }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func respond(context: ChannelHandlerContext) {
        switch answer {
        case .silence:
            return
        case .json(let status, let body):
            write(head(status: status, length: body.utf8.count) + body, context: context)
            log.update { $0.bodyBytesSent += body.utf8.count }
            context.close(mode: .output, promise: nil)
        case .trickle(let body, let interval):
            write(head(status: 200, length: body.utf8.count), context: context)
            remaining = Array(body.utf8)[...]
            let (seconds, attoseconds) = interval.components
            step = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
            scheduleNextByte(context: context)
        }
    }

    /// Writes one more byte of the body after `step`, until none is left.
    private func scheduleNextByte(context: ChannelHandlerContext) {
        trickle = context.eventLoop.assumeIsolated().scheduleTask(in: step) {
            guard let byte = self.remaining.popFirst() else {
                context.close(mode: .output, promise: nil)
                return
            }
            self.write(String(decoding: [byte], as: UTF8.self), context: context)
            self.log.update { $0.bodyBytesSent += 1 }
            self.scheduleNextByte(context: context)
        }
    }

    private func head(status: Int, length: Int) -> String {
        "HTTP/1.1 \(status) \(status == 200 ? "OK" : "Answer")\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(length)\r\nConnection: close\r\n\r\n"
    }

    private func write(_ text: String, context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text)), promise: nil)
    }

    /// A complete request (head and Content-Length body), or nil while more is to come.
    private static func parse(_ bytes: [UInt8]) -> LoopbackServer.Request? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else { return nil }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines.first?.split(separator: " ") ?? []
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = headers["content-length"].flatMap(Int.init) ?? 0
        let bodyStart = end + separator.count
        guard bytes.count >= bodyStart + length else { return nil }
        return LoopbackServer.Request(
            method: requestLine.first.map(String.init) ?? "", target: requestLine.dropFirst().first.map(String.init) ?? "",
            headers: headers, body: String(decoding: bytes[bodyStart..<(bodyStart + length)], as: UTF8.self))
    }
}
