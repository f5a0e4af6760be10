import AgentWire
import Foundation
import VaultSync

#if canImport(Glibc)
    import Glibc
#endif

/// Asks a running agent for a token, so a tool's own process never holds the vault key.
///
/// ```swift
/// let agent = AgentClient(vault: VaultLocation.defaultURL())
/// let token = try await agent.token(minimumValidity: .seconds(60))
/// request.setValue("\(token.type) \(token.value)", forHTTPHeaderField: "Authorization")
/// ```
public struct AgentClient: Sendable {
    /// The socket's file name.
    public let socketName: String
    /// Where it is searched for, in order (``AgentSocket``).
    public let search: AgentSocket.Places
    /// How long one request may take (a refresh at the identity service included).
    public var timeoutSeconds: Int
    /// Connections kept open between requests (protocol 2), shared by copies of this client.
    private let kept = KeptConnections()

    /// The client of the agent for `vault`, searching every place an agent of this user may
    /// listen (``AgentSocket/directories(environment:)``).
    public init(vault: URL, timeoutSeconds: Int = 60, environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketName = AgentSocket.name(forVault: vault)
        search = AgentSocket.Places(environment: environment)
        self.timeoutSeconds = timeoutSeconds
    }

    /// The client of the agent listening on `socket` (its directory checked the same way).
    public init(socket: URL, timeoutSeconds: Int = 60) {
        socketName = socket.lastPathComponent
        search = AgentSocket.Places(only: socket.deletingLastPathComponent())
        self.timeoutSeconds = timeoutSeconds
    }

    /// Where the agent would listen (the first place), for messages.
    public var socketPath: URL? { search.all.first?.appending(path: socketName) }

    /// A token valid for at least `minimumValidity` (nil: the agent's leeway). Throws
    /// ``AgentFailure`` (with the exit code `vault token` would use) or ``AgentConnectionError``.
    public func token(account: String? = nil, minimumValidity: Duration? = nil) async throws -> AgentToken {
        let response = try await send(AgentRequest(.token, account: account, minTTL: minimumValidity.map { Int($0.components.seconds) }))
        guard let token = response.token else { throw AgentConnectionError.badAnswer("no token in the answer") }
        return token
    }

    /// Sends one request and returns the agent's answer; throws its failure when it is one.
    ///
    /// On a kept connection the request is written from the calling task without blocking and
    /// the answer watched for a short while (``spinNanoseconds``, CPU only); a warm token comes
    /// back in that time and is read at once, with no thread woken. An answer that takes longer
    /// (a refresh at the identity service), and a new connection, are waited for on a Dispatch
    /// thread: nothing blocks the cooperative pool.
    public func send(_ request: AgentRequest) async throws -> AgentResponse {
        let (name, search, kept, timeout) = (socketName, self.search, self.kept, timeoutSeconds)
        let message = request.wire
        var response: AgentResponse?
        if let fd = kept.take() {
            WireProtocol.setTimeouts(fd, seconds: timeout)
            if WireProtocol.sendNow(fd, message) {
                if WireProtocol.answerArrives(fd, withinNanoseconds: Self.spinNanoseconds) {
                    response = try Self.receive(fd, kept: kept)
                } else {
                    response = try await Self.offThePool { try Self.receive(fd, kept: kept) }
                }
                // Nil: closed before answering (the agent closed it while idle): a new one below.
                // Anything else (a timeout, a bad answer) is the request's outcome: never sent twice.
            } else {
                close(fd)
            }
        }
        let answer = try await response.asyncOr {
            try await Self.offThePool { try Self.exchange(message, name: name, search: search, timeoutSeconds: timeout, kept: kept) }
        }
        if let failure = answer.error, !answer.ok { throw failure }
        return answer
    }

    /// How long a request on a kept connection watches for its answer before parking the wait.
    public static let spinNanoseconds: UInt64 = 200_000

    /// `work` (blocking socket I/O) on a Dispatch thread, off the cooperative pool.
    private static func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// What the agent serves (`hello`): its protocol versions, operations and features
    /// (``AgentProtocol/pinentryFeature``). Asked on a connection of its own.
    public func hello() async throws -> AgentHello {
        let (name, search, timeout) = (socketName, self.search, timeoutSeconds)
        return try await Self.offThePool {
            let (fd, _) = try AgentSocket.connect(name, searching: search)
            defer { close(fd) }
            WireProtocol.setTimeouts(fd, seconds: timeout)
            var message = WireMessage()
            message.append("op", "hello")
            switch try WireProtocol.exchange(fd, message, preface: true) {
            case .frame(let frame):
                guard frame["ok"] == "1" else { throw AgentConnectionError.badAnswer("the agent refused hello") }
                return AgentHello(versions: frame.values("versions").compactMap { Int($0) }, operations: frame.values("op"), features: frame.values("feature"))
            case .jsonLine: throw AgentConnectionError.olderAgent(1)
            case .closed: throw AgentConnectionError.badAnswer("the connection closed before an answer")
            }
        }
    }

    /// Whether an agent answers on the socket.
    public func isRunning() async -> Bool {
        (try? await send(AgentRequest(.status))) != nil
    }

    /// Sends `message` on a new connection (every check made first: ``AgentTrust``) and reads
    /// the answer; the connection is kept for the next request.
    static func exchange(
        _ message: WireMessage, name: String, search: AgentSocket.Places, timeoutSeconds: Int, kept: KeptConnections
    ) throws -> AgentResponse {
        let (fd, _) = try AgentSocket.connect(name, searching: search)
        WireProtocol.setTimeouts(fd, seconds: timeoutSeconds)
        let answer: WireProtocol.Answer
        do {
            answer = try WireProtocol.exchange(fd, message, preface: true)
        } catch {
            close(fd)
            throw error
        }
        guard let response = try settle(answer, on: fd, kept: kept) else {
            throw AgentConnectionError.badAnswer("the connection closed before an answer")
        }
        return response
    }

    /// The answer on `fd`, which is kept for the next request after a frame and closed
    /// otherwise; nil when the connection closed before answering.
    static func receive(_ fd: Int32, kept: KeptConnections) throws -> AgentResponse? {
        let answer: WireProtocol.Answer
        do {
            answer = try WireProtocol.readAnswer(fd)
        } catch {
            close(fd)
            throw error
        }
        return try settle(answer, on: fd, kept: kept)
    }

    /// What `answer` on `fd` says; `fd` kept after a frame, closed otherwise; nil when the
    /// connection closed before answering.
    private static func settle(_ answer: WireProtocol.Answer, on fd: Int32, kept: KeptConnections) throws -> AgentResponse? {
        switch answer {
        case .frame(let frame):
            kept.give(fd)
            return try AgentResponse(wire: frame)
        case .jsonLine(let line):
            close(fd)
            // An agent of protocol 1 took the preface for a malformed request; any other JSON
            // answer (another uid refused) is a failure as it says.
            guard let response = try? JSONDecoder().decode(AgentResponse.self, from: Data(line)), response.error?.code != "malformed_request" else {
                throw AgentConnectionError.olderAgent(1)
            }
            return response
        case .closed:
            close(fd)
            return nil
        }
    }
}

/// Open connections to the agent between requests: one per request in flight at most, the
/// others closed. Shared by copies of an ``AgentClient``; closed with the last copy.
final class KeptConnections: Sendable {
    /// At most this many kept (enough for a few concurrent callers).
    private static let limit = 4
    private let descriptors = Locked<[Int32]>([])

    /// A kept connection, now the caller's.
    func take() -> Int32? {
        descriptors.withLock { $0.popLast() }
    }

    /// Keeps `fd` for the next request (closed when enough are kept).
    func give(_ fd: Int32) {
        let keep = descriptors.withLock { descriptors -> Bool in
            guard descriptors.count < Self.limit else { return false }
            descriptors.append(fd)
            return true
        }
        if !keep { close(fd) }
    }

    deinit {
        for fd in descriptors.withLock({ $0 }) { close(fd) }
    }
}

extension Optional where Wrapped: Sendable {
    /// The value, else what `fallback` makes.
    fileprivate func asyncOr(_ fallback: () async throws -> Wrapped) async throws -> Wrapped {
        if let self { return self }
        return try await fallback()
    }
}

/// What an agent says it serves (its answer to `hello`).
public struct AgentHello: Sendable, Hashable {
    public var versions: [Int]
    public var operations: [String]
    /// Capabilities added within protocol 2 (`pinentry`: it prompts on the requester's terminal).
    public var features: [String]
}
