import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import VaultCrypto
import VaultSync

/// The browser's way back (RFC 8252 §7.3): an HTTP listener on 127.0.0.1 at a port the system
/// picks, for one redirect to one unguessable path.
///
/// It answers the first request to its path with a page that says the tab can be closed (or
/// why the sign-in failed) and hands the query to ``nextRedirect()``; any other path gets a 404
/// and is ignored. It never follows, fetches or logs what it receives. ``close()`` stops it.
///
/// ```swift
/// let listener = try await LoopbackRedirectListener.start()
/// defer { Task { await listener.close() } }
/// let request = try AuthorizationRequest(endpoint: endpoint, clientID: id, redirectURI: listener.redirectURI, scopes: scopes)
/// let query = try await listener.nextRedirect()
/// ```
public final class LoopbackRedirectListener: Sendable {
    /// `http://127.0.0.1:<port>/callback/<random>`: what the authorization request names.
    public let redirectURI: URL
    private let channel: any Channel
    private let redirects: AsyncStream<[URLQueryItem]>

    private init(channel: any Channel, redirectURI: URL, redirects: AsyncStream<[URLQueryItem]>) {
        self.channel = channel
        self.redirectURI = redirectURI
        self.redirects = redirects
    }

    /// Starts listening on 127.0.0.1 (an IP literal, never `localhost`: RFC 8252 §8.3).
    /// `page` chooses the page the browser gets for a redirect's query.
    public static func start(
        page: @escaping @Sendable ([URLQueryItem]) -> RedirectPage = RedirectPage.default
    ) async throws(SignInError) -> LoopbackRedirectListener {
        let path: String
        do {
            path = "/callback/" + Base64URL.encode(try Random.bytes(12))
        } catch {
            throw .listenerFailed(reason: "no randomness from libsodium")
        }
        let (stream, continuation) = AsyncStream.makeStream(of: [URLQueryItem].self, bufferingPolicy: .bufferingOldest(1))
        let answered = Locked(false)
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 16)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try child.pipeline.syncOperations.addHandler(
                        RedirectHandler(path: path, page: page) { query in
                            // Only the first redirect counts; a second (a reload) gets its page but changes nothing.
                            let first = answered.withLock { done -> Bool in
                                defer { done = true }
                                return !done
                            }
                            if first {
                                continuation.yield(query)
                                continuation.finish()
                            }
                        })
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        } catch {
            throw .listenerFailed(reason: "\(error)")
        }
        guard let port = channel.localAddress?.port, let uri = URL(string: "http://127.0.0.1:\(port)\(path)") else {
            try? await channel.close()
            throw .listenerFailed(reason: "the listening socket has no port")
        }
        channel.closeFuture.whenComplete { _ in continuation.finish() }
        return LoopbackRedirectListener(channel: channel, redirectURI: uri, redirects: stream)
    }

    /// The query of the first redirect to ``redirectURI``; waits for it. Throws `.cancelled`
    /// when the task is cancelled or the listener is closed before one arrives.
    public func nextRedirect() async throws(SignInError) -> [URLQueryItem] {
        for await query in redirects { return query }
        throw .cancelled
    }

    /// Stops listening. Idempotent.
    public func close() async {
        try? await channel.close()
    }
}

/// The page the browser shows after the redirect.
public struct RedirectPage: Sendable {
    public var status: Int
    public var title: String
    public var message: String

    public init(status: Int = 200, title: String, message: String) {
        self.status = status
        self.title = title
        self.message = message
    }

    /// "Signed in" when the query has a code, the error code otherwise (escaped, never the
    /// provider's description).
    public static let `default`: @Sendable ([URLQueryItem]) -> RedirectPage = { query in
        if query.contains(where: { $0.name == "code" }) {
            return RedirectPage(title: "Signed in", message: "You can close this tab and go back to the terminal.")
        }
        let code = query.first { $0.name == "error" }?.value ?? "no code"
        return RedirectPage(
            status: 400, title: "Sign-in failed",
            message: "The provider answered \(code). You can close this tab; the terminal says what to do next.")
    }

    var html: String {
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        return """
            <!doctype html><html><head><meta charset="utf-8"><title>\(escape(title))</title></head>
            <body style="font-family: sans-serif; margin: 3em"><h1>\(escape(title))</h1><p>\(escape(message))</p></body></html>

            """
    }
}

/// Answers one HTTP/1.1 request per connection; hands the query of a GET to the listener's path on.
private final class RedirectHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let path: String
    private let page: @Sendable ([URLQueryItem]) -> RedirectPage
    private let deliver: @Sendable ([URLQueryItem]) -> Void
    private var head: HTTPRequestHead?

    init(path: String, page: @escaping @Sendable ([URLQueryItem]) -> RedirectPage, deliver: @escaping @Sendable ([URLQueryItem]) -> Void) {
        self.path = path
        self.page = page
        self.deliver = deliver
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break  // a redirect has no body; nothing is kept
        case .end:
            guard let head else { return }
            self.head = nil
            let components = URLComponents(string: head.uri)
            if head.method == .GET, components?.path == path {
                let query = components?.queryItems ?? []
                respond(context: context, page: page(query))
                deliver(query)
            } else {
                respond(context: context, page: RedirectPage(status: 404, title: "Not found", message: "Nothing here."))
            }
        }
    }

    private func respond(context: ChannelHandlerContext, page: RedirectPage) {
        let body = ByteBuffer(string: page.html)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        headers.add(name: "Connection", value: "close")
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: page.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
    }
}
