import Foundation
import VaultCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent of a vault listens, and the checks on that place.
///
/// `$XDG_RUNTIME_DIR/credentialvault/agent-<16 hex of SHA-256 of the vault's real path>.sock`
/// (the runtime directory is the user's own, 0700, on tmpfs); without a runtime directory,
/// `/tmp/credentialvault-<uid>/`. The directory is created 0700 and must be a real directory
/// (not a link) owned by this user and closed to everyone else, or the agent will not use it.
public enum AgentSocket {
    /// The socket path for the vault at `vault` (one agent per vault file).
    public static func path(forVault vault: URL, environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        directory(environment: environment).appending(path: "agent-\(identifier(of: vault)).sock")
    }

    /// The directory sockets live in.
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return URL(fileURLWithPath: runtime, isDirectory: true).appending(path: "credentialvault", directoryHint: .isDirectory)
        }
        return URL(fileURLWithPath: "/tmp/credentialvault-\(getuid())", isDirectory: true)
    }

    /// 16 hex digits naming the vault by its resolved path.
    static func identifier(of vault: URL) -> String {
        let resolved = vault.standardizedFileURL.resolvingSymlinksInPath().path
        return String(Digest.hex(Digest.sha256(Array(resolved.utf8))).prefix(16))
    }

    /// Creates the directory (0700) if needed and checks it is ours and private.
    public static func prepareDirectory(_ directory: URL) throws {
        if mkdir(directory.path, 0o700) != 0 && errno != EEXIST {
            throw AgentFailure(code: "socket_directory", exit: 74, message: "cannot create \(directory.path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(directory.path, &info) == 0 else {
            throw AgentFailure(code: "socket_directory", exit: 74, message: "cannot read \(directory.path): \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw AgentFailure(code: "socket_directory", exit: 82, message: "\(directory.path) is not a directory (a link?); the agent will not listen there")
        }
        guard info.st_uid == getuid() else {
            throw AgentFailure(code: "socket_directory", exit: 82, message: "\(directory.path) belongs to another user; the agent will not listen there")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw AgentFailure(
                code: "socket_directory", exit: 82,
                message: "\(directory.path) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))); `chmod 700` it")
        }
    }

    /// The device and inode of the file at `url` (following links), or nil when there is none:
    /// tells whether a file was replaced under a process that holds it open.
    public static func fileIdentity(_ url: URL) -> (dev: UInt64, ino: UInt64)? {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// A `sockaddr_un` for `path`, or nil when the path is too long for one.
    static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
            buffer[bytes.count] = 0
        }
        return address
    }

    /// Connects to `path`; the descriptor, or the errno of the failure.
    static func connect(_ path: String) -> Result<Int32, AgentConnectionError> {
        guard var address = address(path) else { return .failure(.unusable("the socket path is too long")) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.unusable(String(cString: strerror(errno)))) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            return .failure(code == ENOENT || code == ECONNREFUSED ? .notRunning : .unusable(String(cString: strerror(code))))
        }
        return .success(fd)
    }

    /// Sets the send and receive timeouts of `fd`.
    static func setTimeouts(_ fd: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Reads up to and including the first newline, at most `limit` bytes. Nil when the peer
    /// closed or timed out before a newline; `.tooLarge` past the limit.
    static func readLine(_ fd: Int32, limit: Int) -> LineRead {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return data.isEmpty ? .closed : .cutOff }
            for byte in buffer.prefix(count) {
                data.append(byte)
                if byte == 0x0A { return .line(Data(data)) }
                if data.count >= limit { return .tooLarge }
            }
        }
    }

    enum LineRead {
        case line(Data)
        case closed
        case cutOff
        case tooLarge
    }

    /// Writes all of `data`; false when the peer went away.
    @discardableResult
    static func writeAll(_ fd: Int32, _ data: Data) -> Bool {
        var offset = 0
        let bytes = [UInt8](data)
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}

/// Why a client could not talk to an agent.
public enum AgentConnectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No agent listens there (no socket, or a stale one of a dead agent).
    case notRunning
    /// The socket is there but unusable (permissions, path length…).
    case unusable(String)
    /// The agent did not answer as the protocol says (cut off, timed out, not JSON).
    case badAnswer(String)

    public var description: String {
        switch self {
        case .notRunning: "no agent is running for this vault"
        case .unusable(let reason): "the agent's socket cannot be used: \(reason)"
        case .badAnswer(let reason): "the agent did not answer: \(reason)"
        }
    }
}
