import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import VaultCrypto
import VaultSync

/// The browser's way back (RFC 8252 §7.3): an HTTP listener on a loopback address, at the
/// redirect URI's port or one the system picks, for one redirect to the registered path,
/// answered only for this user.
///
/// The path is the one the provider registered (``LoopbackRedirect``, by default `/callback`):
/// nothing in it is secret. What protects the flow is the `state`, PKCE and who may talk to
/// the listener: every connection's peer is looked up (``LoopbackPeer``), and one whose socket
/// is not this uid's (another local user who learned the port) gets 403 and changes nothing, so
/// it can neither deliver a code of its own account nor take this user's. Once
/// ``opener(for:)`` has named the authorization URL, only a callback carrying its `state` is
/// taken: anything else reaching the well-known path (a web page, another process of this user)
/// gets 400 and the listener keeps waiting, so it cannot end the sign-in. The first such
/// request hands its query to ``nextRedirect()`` and is answered only when the caller calls
/// ``finish(_:)`` with the outcome, so the page says "Signed in" only once the vault has
/// checked and stored the sign-in; a request after that gets 410. ``opener(for:)`` gives a browser launcher a one-time
/// loopback URL that redirects to the authorization URL, so the state, PKCE challenge and
/// nonce never appear in any process's arguments or environment. Any other path gets a 404.
/// It never follows, fetches or logs what it receives.
///
/// ```swift
/// let listener = try await LoopbackRedirectListener.start(redirect: .default)
/// let request = try AuthorizationRequest(endpoint: endpoint, clientID: id, redirectURI: listener.redirectURI, scopes: scopes)
/// openBrowser(listener.opener(for: request.url))
/// let query = try await listener.nextRedirect()
/// // … check state, exchange the code, verify the ID token, store …
/// await listener.finish(.signedIn)
/// ```
public final class LoopbackRedirectListener: Sendable {
    /// The redirect URI with the port listened on, e.g. `http://127.0.0.1:49152/callback`: what
    /// the authorization request and the code exchange name.
    public let redirectURI: URL
    private let openerBase: String
    private let openerPath: String
    private let channels: [any Channel]
    private let redirects: AsyncStream<[URLQueryItem]>
    private let state: Locked<ListenerState>

    private init(
        channels: [any Channel], redirectURI: URL, openerBase: String, openerPath: String,
        redirects: AsyncStream<[URLQueryItem]>, state: Locked<ListenerState>
    ) {
        self.channels = channels
        self.redirectURI = redirectURI
        self.openerBase = openerBase
        self.openerPath = openerPath
        self.redirects = redirects
        self.state = state
    }

    /// How many times a `localhost` listener without a fixed port tries another port when
    /// `[::1]` has the one `127.0.0.1` got.
    static let localhostAttempts = 8

    /// Starts listening for `redirect`: on 127.0.0.1, on [::1], or for `localhost` on both at
    /// one port (the browser may resolve either; if either address is taken, it fails, unless
    /// the machine has no IPv6 loopback at all). `owner` tells who owns a connection's peer
    /// (the kernel's socket tables; a test may stand in another user).
    public static func start(
        redirect: LoopbackRedirect = .default,
        owner: @escaping @Sendable (_ peer: (address: String, port: Int), _ local: (address: String, port: Int)) -> uid_t? = LoopbackPeer.owner
    ) async throws(SignInError) -> LoopbackRedirectListener {
        let openerPath: String
        do {
            openerPath = "/start/" + Base64URL.encode(try Random.bytes(12))
        } catch {
            throw .listenerFailed(reason: "no randomness from libsodium")
        }
        guard openerPath != redirect.path else { throw .listenerFailed(reason: "the opener path met the redirect path") }
        let (stream, continuation) = AsyncStream.makeStream(of: [URLQueryItem].self, bufferingPolicy: .bufferingOldest(1))
        let state = Locked(ListenerState())
        let user = getuid()
        let path = redirect.path
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 64)
            .childChannelInitializer { child in
                // Decided once, at accept, before a byte is read; unknown means refused.
                let ours: Bool
                if let peer = child.remoteAddress, let peerIP = peer.ipAddress, let peerPort = peer.port,
                    let local = child.localAddress, let localIP = local.ipAddress, let localPort = local.port
                {
                    ours = owner((peerIP, peerPort), (localIP, localPort)) == user
                } else {
                    ours = false
                }
                return child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try child.pipeline.syncOperations.addHandler(
                        RedirectHandler(path: path, openerPath: openerPath, trusted: ours, state: state) { query in
                            continuation.yield(query)
                            continuation.finish()
                        })
                }
            }
        let attempts = redirect.host == .localhost && redirect.port == nil ? localhostAttempts : 1
        var channels: [any Channel] = []
        var lastFailure = ""
        for _ in 0..<attempts {
            do {
                channels = try await bind(bootstrap, addresses: redirect.host.addresses, port: redirect.port ?? 0)
                break
            } catch let failure as BindFailure {
                lastFailure = failure.reason
                if !failure.portTakenOnLaterAddress { break }
            } catch {
                lastFailure = "\(error)"
                break
            }
        }
        guard let first = channels.first, let port = first.localAddress?.port, let uri = URL(string: redirect.uri(port: port)) else {
            for channel in channels { try? await channel.close() }
            throw .listenerFailed(reason: lastFailure.isEmpty ? "the listening socket has no port" : lastFailure)
        }
        let finished = Locked(channels.count)
        for channel in channels {
            // The stream ends when the last socket closes.
            channel.closeFuture.whenComplete { _ in
                if finished.withLock({ count in
                    count -= 1
                    return count == 0
                }) {
                    continuation.finish()
                }
            }
        }
        let openerHost = first.localAddress?.protocol == .inet6 ? "[::1]" : "127.0.0.1"
        return LoopbackRedirectListener(
            channels: channels, redirectURI: uri, openerBase: "http://\(openerHost):\(port)", openerPath: openerPath,
            redirects: stream, state: state)
    }

    /// Why binding stopped, and whether another port may do.
    private struct BindFailure: Error {
        var reason: String
        var portTakenOnLaterAddress: Bool
    }

    /// Binds every address at one port: the first at `port` (0: any), the others at the port
    /// the first got. All or none: on a failure the ones bound are closed.
    private static func bind(_ bootstrap: ServerBootstrap, addresses: [String], port: Int) async throws -> [any Channel] {
        var channels: [any Channel] = []
        var chosen = port
        for (index, address) in addresses.enumerated() {
            do {
                let channel = try await bootstrap.bind(host: address, port: chosen).get()
                channels.append(channel)
                chosen = channel.localAddress?.port ?? chosen
            } catch {
                let errno = (error as? IOError)?.errnoCode
                if index > 0, address == "::1", errno == EADDRNOTAVAIL || errno == EAFNOSUPPORT {
                    // No IPv6 loopback on this machine: `localhost` can only be 127.0.0.1.
                    continue
                }
                for channel in channels { try? await channel.close() }
                let taken = errno == EADDRINUSE
                let shown = address.contains(":") ? "[\(address)]" : address
                throw BindFailure(
                    reason: taken ? "\(shown):\(chosen) is in use by another program" : "cannot listen on \(shown):\(chosen) (\(error))",
                    portTakenOnLaterAddress: taken && index > 0 && port == 0)
            }
        }
        return channels
    }

    /// A one-time URL on this listener that redirects this user's browser to `authorization`:
    /// what a browser launcher (`xdg-open`) is given instead of the authorization URL, whose
    /// state, challenge and nonce would otherwise be readable by every user in its argv.
    public func opener(for authorization: URL) -> URL {
        let expected = URLComponents(url: authorization, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?.value
        state.withLock { state in
            state.openerTarget = authorization
            state.expectedState = expected
        }
        return URL(string: openerBase + openerPath) ?? redirectURI
    }

    /// The query of the first redirect to ``redirectURI``; waits for it. Throws `.cancelled`
    /// when the task is cancelled or the listener is closed before one arrives. The browser
    /// waits for its page until ``finish(_:)``.
    public func nextRedirect() async throws(SignInError) -> [URLQueryItem] {
        for await query in redirects { return query }
        throw .cancelled
    }

    /// Answers the browser waiting on the redirect (if one is) with `page`, and stops listening.
    public func finish(_ page: RedirectPage) async {
        let reply = state.withLock { state -> (page: EventLoopPromise<RedirectPage>, written: EventLoopPromise<Void>)? in
            defer { state.reply = nil }
            state.finished = true
            return state.reply
        }
        reply?.page.succeed(page)
        // The page is on the socket before this returns: `vault login` exits next, and a page
        // still queued on the event loop then never reached the browser ("connection closed").
        // Completed however the write ends (a browser gone is a failed write, not a wait).
        try? await reply?.written.futureResult.get()
        for channel in channels { try? await channel.close() }
    }

    /// Stops listening; a browser still waiting is told the sign-in did not finish. Idempotent.
    public func close() async {
        await finish(.unfinished)
    }
}

/// What the listener's connections share.
struct ListenerState: Sendable {
    /// Where the opener URL sends the browser, until it is used once.
    var openerTarget: URL?
    var openerUsed = false
    /// The callback was reached (once; a reload gets a page of its own).
    var redirected = false
    /// The `state` of the authorization request the opener leads to: only a callback with it is
    /// taken. Nil: any (an opener was never asked for).
    var expectedState: String?
    /// ``LoopbackRedirectListener/finish(_:)`` ran: a connection accepted before still gets an answer.
    var finished = false
    /// The browser waiting for the outcome, and when its page was written.
    var reply: (page: EventLoopPromise<RedirectPage>, written: EventLoopPromise<Void>)?
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

    /// The vault checked the redirect, exchanged the code, verified the ID token and stored the account.
    public static let signedIn = RedirectPage(title: "Signed in", message: "You can close this tab and go back to the terminal.")

    /// The sign-in stopped before it finished (cancelled, timed out, the listener closed).
    public static let unfinished = RedirectPage(
        status: 400, title: "Sign-in not finished", message: "The sign-in did not finish; nothing was stored. Go back to the terminal.")

    /// The vault refused the sign-in: `reason` (a secret-free sentence) says why.
    public static func failed(_ reason: String) -> RedirectPage {
        RedirectPage(
            status: 400, title: "Sign-in failed",
            message: "The vault did not accept this sign-in: \(reason). Nothing was stored; you can close this tab, the terminal says what to do next.")
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

/// Answers one HTTP/1.1 request per connection: the opener, the callback (held until the
/// outcome), 403 for a peer of another user, 404 for anything else.
private final class RedirectHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let path: String
    private let openerPath: String
    private let trusted: Bool
    private let state: Locked<ListenerState>
    private let deliver: @Sendable ([URLQueryItem]) -> Void
    private var head: HTTPRequestHead?

    init(
        path: String, openerPath: String, trusted: Bool, state: Locked<ListenerState>,
        deliver: @escaping @Sendable ([URLQueryItem]) -> Void
    ) {
        self.path = path
        self.openerPath = openerPath
        self.trusted = trusted
        self.state = state
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
            guard trusted else {
                respond(context: context, page: RedirectPage(status: 403, title: "Forbidden", message: "This sign-in belongs to another user."))
                return
            }
            let components = URLComponents(string: head.uri)
            guard head.method == .GET, let requested = components?.percentEncodedPath else {
                respond(context: context, page: RedirectPage(status: 404, title: "Not found", message: "Nothing here."))
                return
            }
            if requested == openerPath {
                let target = state.withLock { state -> URL? in
                    guard !state.openerUsed, let target = state.openerTarget else { return nil }
                    state.openerUsed = true
                    return target
                }
                guard let target else {
                    respond(
                        context: context,
                        page: RedirectPage(status: 410, title: "Link used", message: "This sign-in link was already used; go back to the terminal."))
                    return
                }
                redirect(context: context, to: target)
            } else if requested == path {
                let answered = components?.queryItems?.first { $0.name == "state" }?.value
                enum Turn { case take(EventLoopPromise<RedirectPage>, EventLoopPromise<Void>), notOurs, again, over }
                let turn = state.withLock { state -> Turn in
                    if state.finished { return .over }
                    if let expected = state.expectedState, answered != expected { return .notOurs }
                    guard !state.redirected else { return .again }
                    state.redirected = true
                    let reply = (page: context.eventLoop.makePromise(of: RedirectPage.self), written: context.eventLoop.makePromise(of: Void.self))
                    state.reply = reply
                    return .take(reply.page, reply.written)
                }
                let promise: EventLoopPromise<RedirectPage>
                let written: EventLoopPromise<Void>
                switch turn {
                case .take(let taken, let whenWritten):
                    (promise, written) = (taken, whenWritten)
                case .notOurs:
                    // Not this sign-in's answer (its state is another): ignored, the sign-in waits on.
                    respond(
                        context: context,
                        page: RedirectPage(status: 400, title: "Not this sign-in", message: "This is not the answer the terminal is waiting for."))
                    return
                case .again:
                    respond(
                        context: context,
                        page: RedirectPage(status: 409, title: "Already answered", message: "This sign-in was already answered; go back to the terminal."))
                    return
                case .over:
                    respond(
                        context: context, page: RedirectPage(status: 410, title: "Sign-in over", message: "This sign-in has ended; go back to the terminal."))
                    return
                }
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                promise.futureResult.whenSuccess { page in bound.value.0.respond(context: bound.value.1, page: page, then: written) }
                deliver(components?.queryItems ?? [])
            } else {
                respond(context: context, page: RedirectPage(status: 404, title: "Not found", message: "Nothing here."))
            }
        }
    }

    private func redirect(context: ChannelHandlerContext, to target: URL) {
        var headers = HTTPHeaders()
        headers.add(name: "Location", value: target.absoluteString)
        headers.add(name: "Content-Length", value: "0")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .found, headers: headers))), promise: nil)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
    }

    private func respond(context: ChannelHandlerContext, page: RedirectPage, then written: EventLoopPromise<Void>? = nil) {
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
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            bound.value.close(promise: nil)
            written?.succeed()
        }
    }
}
