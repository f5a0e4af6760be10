import AgentWire
import Foundation
import NIOCore
import NIOExtras
import NIOPosix
import VaultSync

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's listener: a Unix-domain socket (0600 in a 0700 directory), every peer's uid
/// checked with `SO_PEERCRED` before a byte is read, connections served on one SwiftNIO event
/// loop (no thread per connection, nothing blocked while a request is handled).
///
/// A connection speaks protocol 2 (frames, several requests in turn, closed after
/// ``AgentProtocol/idleSeconds`` idle) or, for clients of older builds, protocol 1 (one JSON
/// line each way, then closed); see ``AgentProtocol``. A request too large, cut off or
/// malformed gets an error answer and the connection is closed; the agent keeps serving.
public final class AgentServer: Sendable {
    /// Who connected.
    public struct Peer: Sendable {
        public var uid: UInt32
        public var pid: Int32
    }

    /// The socket (for messages: the agent reaches it through its directory's descriptor).
    public let path: URL
    private let name: String
    /// The socket's directory, opened and checked once; the socket is bound and removed through it.
    private let directory: Int32
    /// The listening socket until ``run()`` hands it to the event loop.
    private let listener: Int32
    private let group: MultiThreadedEventLoopGroup
    /// Each loop as a task executor for the handler's tasks, by loop.
    private let executors: [ObjectIdentifier: EventLoopTaskExecutor]
    private let state = Locked(State())
    /// Closes every connection on the running loops when the agent stops, each after the
    /// answer it owes (NIOExtras' quiescing helper).
    private let quiesce: ServerQuiescingHelper
    private let handler: @Sendable (AgentRequest, Peer) async -> AgentResponse
    private let refusal: @Sendable (Peer) -> Void
    /// What `hello` lists as `feature` (``AgentProtocol/features``: those this agent can use).
    private let features: [String]

    private struct State {
        var channel: (any Channel)?
        var stopped = false
    }

    /// Binds the socket `name` in `directory` (created 0700 when missing; refused unless it is a
    /// real directory of this user's closed to others). A socket left by a dead agent is
    /// replaced; a live agent's is not (``AgentFailure`` with code `already_running`), and
    /// anything else in its place (another user's socket or listener, a link, a file) is refused.
    public init(
        directory: URL, name: String, features: [String] = [], handler: @escaping @Sendable (AgentRequest, Peer) async -> AgentResponse,
        onRefusedPeer refusal: @escaping @Sendable (Peer) -> Void
    ) throws {
        self.features = features
        self.path = directory.appending(path: name)
        self.name = name
        self.handler = handler
        self.refusal = refusal
        let directoryFD = try AgentSocket.prepareDirectory(directory)
        do {
            listener = try Self.bind(name, in: directoryFD, path: path)
        } catch {
            close(directoryFD)
            throw error
        }
        self.directory = directoryFD
        // One loop per core: each connection stays on one, the handler's task runs on it.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        self.group = group
        quiesce = ServerQuiescingHelper(group: group)
        executors = Dictionary(uniqueKeysWithValues: group.makeIterator().map { (ObjectIdentifier($0), EventLoopTaskExecutor($0)) })
    }

    private static func bind(_ name: String, in directoryFD: Int32, path: URL) throws -> Int32 {
        do {
            let (fd, _) = try AgentSocket.connect(name, searching: AgentSocket.Places(only: path.deletingLastPathComponent()))
            close(fd)
            throw AgentFailure(
                code: "already_running", exit: 73, message: "an agent is already running for this vault (socket \(path.path)); stop it first")
        } catch AgentConnectionError.notRunning {
            unlinkat(directoryFD, name, 0)  // a dead agent's socket, or none
        } catch let error as AgentConnectionError {
            if case .untrusted(let reason) = error {
                throw AgentFailure(code: "socket", exit: 82, message: "\(reason); the agent will not listen there")
            }
            throw AgentFailure(code: "socket", exit: 74, message: "\(error)")
        }
        return try AgentSocket.listen(name, in: directoryFD, path: path)
    }

    /// Starts serving on the event loop; returns once connections are accepted.
    public func run() async throws {
        let (handler, refusal, executors, quiesce) = (self.handler, self.refusal, self.executors, self.quiesce)
        let hello = AgentConnectionHandler.hello(features: features)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiesce.makeServerChannelHandler(channel: channel))
                }
            }
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                Self.peer(of: channel).flatMap { peer in
                    guard let peer else { return channel.close() }
                    return channel.eventLoop.makeCompletedFuture {
                        let executor = executors[ObjectIdentifier(channel.eventLoop)]
                        try channel.pipeline.syncOperations.addHandler(
                            AgentConnectionHandler(
                                peer: peer, refused: peer.uid != getuid(), handler: handler, refusal: refusal, executor: executor,
                                hello: hello))
                    }
                }
            }
            .withBoundSocket(listener).get()
        let stopNow = state.withLock { state -> Bool in
            state.channel = channel
            return state.stopped
        }
        if stopNow { try? await channel.close() }
    }

    /// Who is at the other end of `channel` (`SO_PEERCRED`), nil when it cannot be told.
    static func peer(of channel: any Channel) -> EventLoopFuture<Peer?> {
        guard let provider = channel as? any SocketOptionProvider else { return channel.eventLoop.makeSucceededFuture(nil) }
        let credentials: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return credentials.map { Peer(uid: $0.uid, pid: $0.pid) }.recover { _ in nil }
    }

    /// Stops accepting, lets the requests being handled write their answers (`stop`'s own
    /// included; at most ``drainSeconds``), closes every connection while the loops still run
    /// (so each tears down its pipeline) and removes the socket. Idempotent.
    public func stop() async {
        let (first, channel) = state.withLock { state -> (Bool, (any Channel)?) in
            defer { state.stopped = true }
            return (!state.stopped, state.channel)
        }
        guard first else { return }
        if channel != nil {
            // Closes the listener, asks every connection to close once it has answered, and
            // completes when all have closed; a handler that never answers is given up on.
            let loop = group.next()
            let closed = loop.makePromise(of: Void.self)
            let finished = loop.makePromise(of: Void.self)
            let once = Locked(false)
            let finish: @Sendable () -> Void = {
                if once.withLock({ done in
                    defer { done = true }
                    return !done
                }) {
                    finished.succeed(())
                }
            }
            closed.futureResult.whenComplete { _ in finish() }
            loop.scheduleTask(in: .seconds(Self.drainSeconds)) { finish() }
            quiesce.initiateShutdown(promise: closed)
            try? await finished.futureResult.get()
        } else {
            close(listener)  // never handed to the event loop
        }
        unlinkat(directory, name, 0)
        close(directory)
        // Tasks that still prefer a loop (a timer the handler started) move to the global
        // executor: a shut-down loop runs nothing.
        for executor in executors.values { executor.retire() }
        try? await group.shutdownGracefully()
    }
}

extension AgentServer {
    /// How long ``stop()`` waits for answers being worked out.
    public static let drainSeconds: Int64 = 5

    /// Runs `body` (waiting for a person: a passphrase prompt) with the request being handled
    /// told `ok=wait` meanwhile, when it said it reads interim answers; just `body` otherwise.
    /// Call it from the handler (its task), around the wait only.
    public static func whileAskingAPerson<T: Sendable>(_ body: () async -> T) async -> T {
        guard let waiting = personWait else { return await body() }
        waiting.change(true)
        let result = await body()
        waiting.change(false)
        return result
    }

    /// How the handler's task reaches its connection's interim answers.
    struct PersonWait: Sendable {
        let change: @Sendable (Bool) -> Void
    }

    @TaskLocal static var personWait: PersonWait?
}

/// `struct ucred` (`SO_PEERCRED`'s value) as the kernel lays it out: pid, uid, gid.
private struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// One connection: works out which protocol the client speaks, reads its requests, has each
/// answered by the agent's handler (a task; the event loop is never blocked) and writes the
/// answers in order.
private final class AgentConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Mode {
        case undecided, jsonLine, frames, closing
    }

    private let peer: AgentServer.Peer
    private let refused: Bool
    private let hello: WireMessage
    private let handler: @Sendable (AgentRequest, AgentServer.Peer) async -> AgentResponse
    private let refusal: @Sendable (AgentServer.Peer) -> Void
    private let executor: EventLoopTaskExecutor?
    /// The agent is stopping: close once the request in hand (if any) is answered.
    private var quiescing = false
    private var mode = Mode.undecided
    private var buffer = ByteBuffer()
    /// A request is with the handler: nothing more is read from the buffer until it answers.
    private var busy = false
    private var timer: Scheduled<Void>?
    /// Interim answers while a request that may prompt is with the handler.
    private var interim: RepeatedTask?
    private var context: ChannelHandlerContext?

    init(
        peer: AgentServer.Peer, refused: Bool, handler: @escaping @Sendable (AgentRequest, AgentServer.Peer) async -> AgentResponse,
        refusal: @escaping @Sendable (AgentServer.Peer) -> Void, executor: EventLoopTaskExecutor?, hello: WireMessage
    ) {
        self.hello = hello
        self.executor = executor
        self.peer = peer
        self.refused = refused
        self.handler = handler
        self.refusal = refusal
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        interim?.cancel()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        if refused {
            // Before a byte is read, in the form every version's client reads as a failure.
            refusal(peer)
            answerLine(.failure("peer_refused", exit: 77, "this agent serves only its own user"))
            return
        }
        arm(seconds: AgentProtocol.stalledSeconds)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        guard mode != .closing else { return }
        buffer.writeBuffer(&bytes)
        process()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            quiescing = true
            if !busy { finishAndClose() }
            return
        }
        // The client finished sending: answer what is complete, then close.
        if let event = event as? ChannelEvent, event == .inputClosed, !busy {
            if buffer.readableBytes > 0 { process() }
            if !busy { finishAndClose() }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        mode = .closing
        context.close(promise: nil)
    }

    // MARK: - Reading

    private func process() {
        while !busy, mode != .closing {
            switch mode {
            case .undecided:
                guard decideMode() else { return }
            case .jsonLine:
                processLine()
                return
            case .frames:
                guard processFrame() else { return }
            case .closing:
                return
            }
        }
    }

    /// Reads the preface: protocol 2, a version this agent does not speak, or a JSON line.
    private func decideMode() -> Bool {
        let prefix = WireProtocol.prefacePrefix
        let available = buffer.readableBytesView
        let compared = min(available.count, prefix.count)
        guard available.prefix(compared).elementsEqual(prefix.prefix(compared)) else {
            mode = .jsonLine  // not a preface: protocol 1
            return true
        }
        guard let newline = available.prefix(prefix.count + 8).firstIndex(of: 0x0A) else {
            if available.count >= prefix.count + 8 { mode = .jsonLine }  // answered as a malformed line
            return mode != .undecided
        }
        let version = Int(String(decoding: available[available.startIndex + prefix.count..<newline], as: UTF8.self))
        guard version == WireProtocol.version else {
            var failure = AgentResponse.failure(
                "unsupported_version", exit: 64,
                "this agent speaks protocol versions \(WireProtocol.versions.map(String.init).joined(separator: ", ")), not \(version.map(String.init) ?? "that")"
            ).wire
            for version in WireProtocol.versions { failure.append("versions", String(version)) }
            answerFrame(failure, thenClose: true)
            return false
        }
        buffer.moveReaderIndex(forwardBy: newline - available.startIndex + 1)
        mode = .frames
        return true
    }

    /// Protocol 1: one JSON line, answered, then the connection closes.
    private func processLine() {
        let view = buffer.readableBytesView
        guard let newline = view.prefix(AgentProtocol.maximumRequestSize).firstIndex(of: 0x0A) else {
            if view.count >= AgentProtocol.maximumRequestSize {
                answerLine(.failure("request_too_large", exit: 64, "the request is larger than \(AgentProtocol.maximumRequestSize) bytes"))
            }
            return
        }
        let line = Data(view[view.startIndex...newline])
        buffer.clear()
        guard let request = try? JSONDecoder().decode(AgentRequest.self, from: line) else {
            answerLine(.failure("malformed_request", exit: 64, "the request is not one JSON object of the agent protocol"))
            return
        }
        guard request.v == AgentProtocol.version else {
            answerLine(.failure("unsupported_version", exit: 64, "this agent speaks protocol version \(AgentProtocol.version), not \(request.v)"))
            return
        }
        dispatch(request, asLine: true)
    }

    /// Protocol 2: one frame, answered; the connection stays for the next. False when no whole
    /// frame is there yet (or the connection is closing).
    private func processFrame() -> Bool {
        guard buffer.readableBytes >= 4, let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else {
            arm(seconds: buffer.readableBytes == 0 ? AgentProtocol.idleSeconds : AgentProtocol.stalledSeconds)
            return false
        }
        guard Int(length) + 4 <= WireProtocol.maximumRequestSize else {
            answerFrame(
                AgentResponse.failure("request_too_large", exit: 64, "the request is larger than \(WireProtocol.maximumRequestSize) bytes").wire,
                thenClose: true)
            return false
        }
        guard buffer.readableBytes >= Int(length) + 4 else {
            arm(seconds: AgentProtocol.stalledSeconds)
            return false
        }
        buffer.moveReaderIndex(forwardBy: 4)
        let body = buffer.readBytes(length: Int(length)) ?? []
        buffer.discardReadBytes()
        let message: WireMessage
        do {
            message = try WireMessage(body: body)
        } catch {
            answerFrame(AgentResponse.failure("malformed_request", exit: 64, "\(error)").wire, thenClose: true)
            return false
        }
        if message["op"] == "hello" {
            answerFrame(hello, thenClose: false)
            return true
        }
        do {
            let request = try AgentRequest(wire: message)
            dispatch(request, asLine: false)
        } catch {
            answerFrame(AgentResponse(failure: error).wire, thenClose: false)
            return true
        }
        return true
    }

    /// What `hello` answers: the versions, operations and features this agent serves.
    static func hello(features: [String]) -> WireMessage {
        var message = AgentResponse().wire
        message.append("version", String(WireProtocol.version))
        for version in WireProtocol.versions { message.append("versions", String(version)) }
        for op in AgentRequest.Operation.allCases { message.append("op", op.rawValue) }
        message.append("op", "hello")
        for feature in features { message.append("feature", feature) }
        return message
    }

    // MARK: - Answering

    /// Has the handler answer `request` on a task; the answer is written back on the event loop,
    /// as a JSON line (protocol 1, then closed) or a frame.
    private func dispatch(_ request: AgentRequest, asLine: Bool) {
        guard let context else { return }
        busy = true
        timer?.cancel()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let (handler, peer) = (self.handler, self.peer)
        let eventLoop = context.eventLoop
        // A request that said it reads interim answers is sent them while the handler waits for
        // a person (``AgentServer/whileAskingAPerson(_:)``), and only then: the client's receive
        // timeout keeps catching a stuck agent.
        let waiting: AgentServer.PersonWait? =
            request.terminal != nil && !asLine
            ? AgentServer.PersonWait { asking in
                let change: @Sendable () -> Void = { bound.value.sendInterims(asking) }
                if eventLoop.inEventLoop { change() } else { eventLoop.execute(change) }
            } : nil
        // The handler's task prefers this event loop as its executor: the agent's default actor
        // and the warm token path run here, with no hop to the cooperative pool and back (the
        // vault's blocking work still goes to its own threads).
        Task(executorPreference: executor) {
            let response = await AgentServer.$personWait.withValue(waiting) { await handler(request, peer) }
            let finish: @Sendable () -> Void = {
                let connection = bound.value
                connection.busy = false
                connection.interim?.cancel()
                connection.interim = nil
                guard connection.mode != .closing else { return }
                if asLine {
                    connection.answerLine(response)
                } else {
                    // The agent stopping: this answer is the connection's last.
                    connection.answerFrame(response.wire, thenClose: connection.quiescing)
                    connection.process()
                }
            }
            if eventLoop.inEventLoop { finish() } else { eventLoop.execute(finish) }
        }
    }

    @discardableResult
    private func answerFrame(_ message: WireMessage, thenClose: Bool) -> EventLoopFuture<Void>? {
        guard let context else { return nil }
        let frame = message.frame()
        var out = context.channel.allocator.buffer(capacity: frame.count)
        out.writeBytes(frame)
        let written = context.writeAndFlush(wrapOutboundOut(out))
        if thenClose {
            mode = .closing
            timer?.cancel()
            written.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
        }
        return written
    }

    /// Starts or stops sending `ok=wait` every ``AgentProtocol/interimSeconds`` (at once first).
    private func sendInterims(_ asking: Bool) {
        interim?.cancel()
        interim = nil
        guard asking, busy, let context else { return }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let interval = TimeAmount.seconds(AgentProtocol.interimSeconds)
        interim = context.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: interval) { _ in
            bound.value.answerInterim()
        }
    }

    /// `ok=wait`: the request is still being worked on.
    private func answerInterim() {
        guard busy, mode == .frames else { return }
        var message = WireMessage()
        message.append("ok", WireProtocol.interimOK)
        answerFrame(message, thenClose: false)
    }

    @discardableResult
    private func answerLine(_ response: AgentResponse) -> EventLoopFuture<Void>? {
        guard let context else { return nil }
        mode = .closing
        timer?.cancel()
        guard var data = try? JSONEncoder().encode(response) else {
            context.close(promise: nil)
            return nil
        }
        data.append(0x0A)
        var out = context.channel.allocator.buffer(capacity: data.count)
        out.writeBytes(data)
        let written = context.writeAndFlush(wrapOutboundOut(out))
        written.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
        return written
    }

    private func finishAndClose() {
        guard let context, mode != .closing else { return }
        mode = .closing
        timer?.cancel()
        context.close(promise: nil)
    }

    /// Closes the connection unless something arrives within `seconds` (idle between requests,
    /// or stalled half-way through one).
    private func arm(seconds: Int64) {
        guard let context else { return }
        timer?.cancel()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: .seconds(seconds)) {
            bound.value.finishAndClose()
        }
    }
}

/// An event loop as a task executor (SE-0417): jobs of a task that prefers it run on the loop's
/// thread. Only for the handler's task, whose work between suspension points is short and never
/// blocks (every blocking vault call goes to NIO's thread pool). Retired when the loops shut
/// down: from then on its jobs run on the global concurrent executor.
final class EventLoopTaskExecutor: TaskExecutor {
    private let eventLoop: any EventLoop
    private let retired = Locked(false)

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func retire() {
        retired.withLock { $0 = true }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        if retired.withLock({ $0 }) {
            globalConcurrentExecutor.enqueue(job)
        } else {
            eventLoop.execute { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }
}
