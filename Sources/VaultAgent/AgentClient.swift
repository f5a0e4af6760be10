import Foundation

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
        let (name, search) = (socketName, self.search)
        let timeout = timeoutSeconds
        let response = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AgentResponse, any Error>) in
            // Blocking socket I/O off the cooperative pool (no thread made per request).
            DispatchQueue.global().async {
                continuation.resume(with: Result { try Self.exchange(request, name: name, search: search, timeoutSeconds: timeout) })
            }
        }
        if let failure = response.error, !response.ok { throw failure }
        return response
    }

    /// Whether an agent answers on the socket.
    public func isRunning() async -> Bool {
        (try? await send(AgentRequest(.status))) != nil
    }

    /// Connects (every check made first: ``AgentSocket``), sends `request`, reads the answer.
    static func exchange(_ request: AgentRequest, name: String, search: AgentSocket.Places, timeoutSeconds: Int) throws -> AgentResponse {
        let (fd, _) = try AgentSocket.connect(name, searching: search)
        defer { close(fd) }
        AgentSocket.setTimeouts(fd, seconds: timeoutSeconds)
        var body = try JSONEncoder().encode(request)
        body.append(0x0A)
        guard AgentSocket.writeAll(fd, body) else { throw AgentConnectionError.badAnswer("the connection closed while sending") }
        switch AgentSocket.readLine(fd, limit: AgentProtocol.maximumResponseSize) {
        case .line(let line):
            do {
                return try JSONDecoder().decode(AgentResponse.self, from: line)
            } catch {
                throw AgentConnectionError.badAnswer("the answer is not the agent protocol's JSON")
            }
        case .closed, .cutOff:
            throw AgentConnectionError.badAnswer("the connection closed before an answer (timed out after \(timeoutSeconds) s?)")
        case .tooLarge:
            throw AgentConnectionError.badAnswer("the answer is larger than \(AgentProtocol.maximumResponseSize) bytes")
        }
    }
}
