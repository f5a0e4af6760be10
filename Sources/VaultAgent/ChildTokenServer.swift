import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import VaultSync

#if canImport(Glibc)
    import Glibc
#endif

/// Answers a child's token requests on its ``ChildTokenPlace``'s socket: HTTP/1.1 over a Unix
/// socket (so `curl --unix-socket` is a client), one request per connection, peers of another
/// uid closed before a byte is read (`SO_PEERCRED`; the directory is 0700 besides).
///
/// - `GET /token`: `200`, the access token as `text/plain` (no newline);
/// - `GET /token.json`: `200`, `{"access_token", "token_type", "expires_at"}`;
/// - when no token can be had (the agent locked or gone, the grant revoked): `503` with the
///   reason as `text/plain`, never a stale token;
/// - any other path `404`, any other method `405`.
///
/// Every answer says `Cache-Control: no-store`.
public final class ChildTokenServer: Sendable {
    /// What a request is answered with.
    public struct Reply: Sendable {
        /// The HTTP status code.
        public var status: Int
        public var contentType: String
        public var body: String

        public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String) {
            (self.status, self.contentType, self.body) = (status, contentType, body)
        }
    }

    /// Works out the answer for a `GET` of a path (`/token`, `/token.json`, …).
    public typealias Answer = @Sendable (_ path: String) async -> Reply

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// Answers being worked out: ``stop()`` waits for them before the event loop goes.
    private let replies: Replies

    /// Listens on `place`'s socket and serves until ``stop()``.
    public init(place: ChildTokenPlace, answer: @escaping Answer) async throws {
        let fd = try place.withDirectory { directory in
            try AgentSocket.listen(ChildTokenPlace.socketName, in: directory, path: place.socket)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let replies = Replies()
        self.replies = replies
        do {
            channel = try await ServerBootstrap(group: group)
                .childChannelInitializer { channel in
                    AgentServer.peer(of: channel).flatMap { peer in
                        guard let peer, peer.uid == getuid() else { return channel.close() }
                        return channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                            try channel.pipeline.syncOperations.addHandler(ChildTokenHandler(answer: answer, replies: replies))
                        }
                    }
                }
                .withBoundSocket(fd).get()
        } catch {
            close(fd)
            try? await group.shutdownGracefully()
            throw error
        }
        self.group = group
    }

    /// Stops listening, lets the answers being worked out finish (each bounded by the agent
    /// client's timeout), then stops the event loop. The socket file goes with the place.
    public func stop() async {
        try? await channel.close()
        for reply in replies.all() { await reply.value }
        try? await group.shutdownGracefully()
    }

    /// The tasks working out answers.
    final class Replies: Sendable {
        private let tasks = Locked<[UUID: Task<Void, Never>]>([:])

        /// Runs `work` in a task of its own, kept here until it ends.
        func run(_ work: @escaping @Sendable () async -> Void) {
            let id = UUID()
            tasks.withLock { tasks in
                tasks[id] = Task { [weak self] in
                    await work()
                    self?.tasks.withLock { $0[id] = nil }
                }
            }
        }

        func all() -> [Task<Void, Never>] { tasks.withLock { Array($0.values) } }
    }
}

/// One connection: the request's head, then (at its end) the answer, then the connection closed.
private final class ChildTokenHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answer: ChildTokenServer.Answer
    private let replies: ChildTokenServer.Replies
    private var head: HTTPRequestHead?

    init(answer: @escaping ChildTokenServer.Answer, replies: ChildTokenServer.Replies) {
        (self.answer, self.replies) = (answer, replies)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break  // a GET has none worth reading
        case .end:
            guard let head else { return }
            self.head = nil
            guard head.method == .GET else {
                return Self.write(ChildTokenServer.Reply(status: 405, body: "only GET is answered\n"), version: head.version, to: context)
            }
            Self.answer(
                String(head.uri.prefix { $0 != "?" }), version: head.version, with: answer, in: replies,
                to: NIOLoopBound(context, eventLoop: context.eventLoop))
        }
    }

    /// Works out the answer off the event loop, then writes it on the loop.
    private static func answer(
        _ path: String, version: HTTPVersion, with answer: @escaping ChildTokenServer.Answer, in replies: ChildTokenServer.Replies,
        to context: NIOLoopBound<ChannelHandlerContext>
    ) {
        replies.run {
            let reply = await answer(path)
            context.eventLoop.execute { write(reply, version: version, to: context.value) }
        }
    }

    private static func write(_ reply: ChildTokenServer.Reply, version: HTTPVersion, to context: ChannelHandlerContext) {
        let body = context.channel.allocator.buffer(string: reply.body)
        let headers = HTTPHeaders([
            ("Content-Type", reply.contentType), ("Content-Length", "\(body.readableBytes)"), ("Cache-Control", "no-store"),
            ("Connection", "close"),
        ])
        context.write(
            NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: reply.status), headers: headers))),
            promise: nil)
        context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
