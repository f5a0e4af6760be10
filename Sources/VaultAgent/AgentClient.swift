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
    public func send(_ request: AgentRequest) async throws -> AgentResponse {
        let (name, search, kept) = (socketName, self.search, self.kept)
        let timeout = timeoutSeconds
        let response = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AgentResponse, any Error>) in
            // Blocking socket I/O off the cooperative pool (no thread made per request).
            DispatchQueue.global().async {
                continuation.resume(with: Result { try Self.exchange(request, name: name, search: search, timeoutSeconds: timeout, kept: kept) })
            }
        }
        if let failure = response.error, !response.ok { throw failure }
        return response
    }

    /// Whether an agent answers on the socket.
    public func isRunning() async -> Bool {
        (try? await send(AgentRequest(.status))) != nil
    }

    /// Sends `request` on a kept connection, else on a new one (every check made first:
    /// ``AgentTrust``), and reads the answer. A kept connection the agent closed while it was
    /// idle handled nothing: the request goes again on a new one.
    static func exchange(
        _ request: AgentRequest, name: String, search: AgentSocket.Places, timeoutSeconds: Int, kept: KeptConnections
    ) throws -> AgentResponse {
        let message = request.wire
        if let fd = kept.take() {
            WireProtocol.setTimeouts(fd, seconds: timeoutSeconds)
            // Nil: closed before answering (the agent closed it while idle): a new one below.
            // Anything else (a timeout, a bad answer) is the request's outcome: never sent twice.
            if let response = try answer(fd, message, preface: false, kept: kept) { return response }
        }
        let (fd, _) = try AgentSocket.connect(name, searching: search)
        WireProtocol.setTimeouts(fd, seconds: timeoutSeconds)
        guard let response = try answer(fd, message, preface: true, kept: kept) else {
            throw AgentConnectionError.badAnswer("the connection closed before an answer")
        }
        return response
    }

    /// The answer to `message` on `fd`, which is kept for the next request after a frame and
    /// closed otherwise; nil when the connection closed before answering.
    private static func answer(_ fd: Int32, _ message: WireMessage, preface: Bool, kept: KeptConnections) throws -> AgentResponse? {
        let answer: WireProtocol.Answer
        do {
            answer = try WireProtocol.exchange(fd, message, preface: preface)
        } catch {
            close(fd)
            throw error
        }
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
