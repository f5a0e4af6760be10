internal import CProcessControl
import Foundation
import VaultSync

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's listener: a Unix-domain socket (0600 in a 0700 directory), one request per
/// connection, every peer's uid checked with `SO_PEERCRED` before a byte is read.
///
/// Connections are served on threads of their own (blocking reads with a 5 s timeout, so a
/// client that stops sending cannot hold the agent); the handler runs as a task. A request too
/// large, cut off or malformed gets an error answer and the connection is closed; the agent
/// keeps serving.
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
    private let listener: Int32
    private let stopped = Locked(false)
    private let handler: @Sendable (AgentRequest, Peer) async -> AgentResponse
    private let refusal: @Sendable (Peer) -> Void

    /// Binds the socket `name` in `directory` (created 0700 when missing; refused unless it is a
    /// real directory of this user's closed to others). A socket left by a dead agent is
    /// replaced; a live agent's is not (``AgentFailure`` with code `already_running`), and
    /// anything else in its place (another user's socket or listener, a link, a file) is refused.
    public init(
        directory: URL, name: String, handler: @escaping @Sendable (AgentRequest, Peer) async -> AgentResponse,
        onRefusedPeer refusal: @escaping @Sendable (Peer) -> Void
    ) throws {
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
        guard var address = AgentSocket.address(AgentSocket.path(through: directoryFD, name)) else {
            throw AgentFailure(code: "socket", exit: 74, message: "the socket name \(name) is too long")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw AgentFailure(code: "socket", exit: 74, message: String(cString: strerror(errno))) }
        // Created 0600 whatever the umask: no moment where another user may connect.
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw AgentFailure(code: "socket", exit: 74, message: "cannot listen on \(path.path): \(reason)")
        }
        return fd
    }

    /// Accepts connections on a thread of its own until ``stop()``.
    public func run() {
        let listener = self.listener
        Thread.detachNewThread { [self] in
            while !stopped.withLock({ $0 }) {
                let connection = accept(listener, nil, nil)
                if connection < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    break  // the listener was shut down
                }
                // Not inherited by a command `vault exec` starts.
                _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
                Thread.detachNewThread { [self] in serve(connection) }
            }
        }
    }

    /// Stops accepting and removes the socket. Idempotent.
    public func stop() {
        let first = stopped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlinkat(directory, name, 0)
        close(directory)
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var uid: UInt32 = 0
        var pid: Int32 = 0
        guard cv_peer_credentials(fd, &uid, &pid) == 0 else { return }
        let peer = Peer(uid: uid, pid: pid)
        guard uid == getuid() else {
            refusal(peer)
            answer(fd, .failure("peer_refused", exit: 77, "this agent serves only its own user"))
            return
        }
        AgentSocket.setTimeouts(fd, seconds: 5)
        let request: AgentRequest
        switch AgentSocket.readLine(fd, limit: AgentProtocol.maximumRequestSize) {
        case .line(let line):
            guard let decoded = try? JSONDecoder().decode(AgentRequest.self, from: line) else {
                answer(fd, .failure("malformed_request", exit: 64, "the request is not one JSON object of the agent protocol"))
                return
            }
            request = decoded
        case .tooLarge:
            answer(fd, .failure("request_too_large", exit: 64, "the request is larger than \(AgentProtocol.maximumRequestSize) bytes"))
            return
        case .closed, .cutOff:
            return  // nothing to answer: the client went away or stalled
        }
        guard request.v == AgentProtocol.version else {
            answer(fd, .failure("unsupported_version", exit: 64, "this agent speaks protocol version \(AgentProtocol.version), not \(request.v)"))
            return
        }
        let result = Locked<AgentResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let handler = self.handler
        Task {
            let response = await handler(request, peer)
            result.withLock { $0 = response }
            done.signal()
        }
        done.wait()
        answer(fd, result.withLock { $0 } ?? .failure("internal", exit: 1, "the agent produced no answer"))
    }

    private func answer(_ fd: Int32, _ response: AgentResponse) {
        guard var data = try? JSONEncoder().encode(response) else { return }
        data.append(0x0A)
        AgentSocket.writeAll(fd, data)
    }
}
