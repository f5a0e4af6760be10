internal import CProcessControl
import Foundation
import VaultCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent of a vault listens, and the checks both ends make before they trust it.
///
/// One socket per vault file, `agent-<16 hex of SHA-256 of the vault's real path>.sock`, in the
/// first of these places that applies (clients search all of them, in this order, so an agent
/// started by systemd with a runtime directory is found from cron without one):
///
/// 1. `$XDG_RUNTIME_DIR/credentialvault/`, only when that directory is this user's and closed
///    to everyone else (`su` without `-` keeps another user's runtime directory in the
///    environment: it is skipped, never used);
/// 2. `/run/user/<uid>/credentialvault/`, the same under the standard name, when it exists;
/// 3. `<home>/.local/state/credentialvault/run-<machine>/`, the home directory taken from the
///    password database (not `$HOME`), `<machine>` 12 hex of a hash of the host's machine id so a
///    home shared over NFS never mixes machines. Other users cannot create a directory there
///    first, unlike a fixed name under `/tmp`.
///
/// The socket's directory must be a real directory (not a link) owned by this user with no
/// group or other permission bits, the socket a socket owned by this user, and the process
/// listening on it this user's (`SO_PEERCRED`). The checks are made on descriptors, not paths:
/// the directory is opened `O_PATH|O_NOFOLLOW`, checked with `fstat`, and the connection goes
/// through that descriptor (`/proc/self/fd/N/agent-….sock`), so nothing can be swapped between
/// the check and the use. Processes of the same uid remain trusted: they can do anything this
/// user can.
public enum AgentSocket {
    /// The socket where the agent for `vault` listens (the first place that applies).
    public static func path(forVault vault: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> URL {
        guard let directory = directories(environment: environment).first else { throw noPlace() }
        return directory.appending(path: name(forVault: vault))
    }

    /// The socket's file name for `vault`.
    public static func name(forVault vault: URL) -> String {
        "agent-\(identifier(of: vault)).sock"
    }

    /// Every place an agent of this user may listen, in the order clients search them.
    public static func directories(environment: [String: String] = ProcessInfo.processInfo.environment) -> [URL] {
        Places(environment: environment).all
    }

    /// Where a client looks for an agent's socket, in order. The home place (a password-database
    /// lookup, the machine id read and hashed) is worked out only when no runtime place holds
    /// the socket: an agent in the runtime directory costs `vault token` none of it.
    public struct Places: Sendable {
        let runtime: [URL]
        let includesHome: Bool

        /// This user's places (``AgentSocket``'s list).
        public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
            var runtimes: [String] = []
            if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), isPrivateDirectoryOfOurs(runtime) {
                runtimes.append(runtime)
            }
            let standard = "/run/user/\(getuid())"
            if !runtimes.contains(where: { sameFile($0, standard) }), isPrivateDirectoryOfOurs(standard) {
                runtimes.append(standard)
            }
            runtime = runtimes.map { URL(fileURLWithPath: $0, isDirectory: true).appending(path: "credentialvault", directoryHint: .isDirectory) }
            includesHome = true
        }

        /// One given directory only.
        public init(only directory: URL) {
            runtime = [directory]
            includesHome = false
        }

        /// The home place, when there is a home directory.
        var home: URL? {
            guard includesHome, let home = homeDirectory() else { return nil }
            return URL(fileURLWithPath: home, isDirectory: true)
                .appending(path: ".local/state/credentialvault/run-\(machineTag())", directoryHint: .isDirectory)
        }

        /// Every place, in search order.
        public var all: [URL] { runtime + (home.map { [$0] } ?? []) }
    }

    /// 16 hex digits naming the vault by its resolved path.
    static func identifier(of vault: URL) -> String {
        let resolved = vault.standardizedFileURL.resolvingSymlinksInPath().path
        return String(Digest.hex(Digest.sha256(Array(resolved.utf8))).prefix(16))
    }

    // MARK: - Checks

    /// Why a place or a socket is not trusted, in words that name what is wrong.
    static func untrusted(_ path: String, _ reason: String) -> AgentConnectionError {
        .untrusted("\(path) \(reason)")
    }

    /// Checks an opened directory: a directory, this user's, no group or other bits.
    static func checkDirectory(_ fd: Int32, path: String) throws(AgentConnectionError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unusable("cannot read \(path): \(String(cString: strerror(errno)))") }
        if let problem = privacyProblem(info, path: path) { throw problem }
    }

    /// What makes `info` not a private directory of this user's, or nil.
    static func privacyProblem(_ info: stat, path: String) -> AgentConnectionError? {
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return untrusted(path, "is not a directory") }
        guard info.st_uid == getuid() else { return untrusted(path, "belongs to uid \(info.st_uid), not to this user (uid \(getuid()))") }
        guard info.st_mode & 0o077 == 0 else {
            return untrusted(path, "is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))); `chmod 700` it")
        }
        return nil
    }

    /// Opens `directory` (`O_PATH|O_NOFOLLOW`) and checks it; nil when it does not exist.
    static func openChecked(_ directory: URL) throws(AgentConnectionError) -> Int32? {
        let path = directory.path
        let fd = cv_open_directory(AT_FDCWD, path, 1)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP || code == ENOTDIR {
                // The last component is a link, or something other than a directory.
                var info = stat()
                if lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFLNK { throw untrusted(path, "is a symbolic link") }
                throw untrusted(path, "is not a directory")
            }
            throw .unusable("cannot open \(path): \(String(cString: strerror(code)))")
        }
        do {
            try checkDirectory(fd, path: path)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Checks the entry `name` in the opened directory: nil when there is none, else whether
    /// it is a socket of this user's.
    static func checkSocketEntry(_ directory: Int32, _ name: String, path: String) throws(AgentConnectionError) -> Bool {
        var info = stat()
        guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return false }
            throw .unusable("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFSOCK else {
            let what =
                switch kind {
                case S_IFLNK: "a symbolic link"
                case S_IFIFO: "a FIFO"
                case S_IFREG: "a regular file"
                case S_IFDIR: "a directory"
                default: "something else"
                }
            throw untrusted(path, "is not a socket (\(what))")
        }
        guard info.st_uid == getuid() else { throw untrusted(path, "belongs to uid \(info.st_uid), not to this user (uid \(getuid()))") }
        return true
    }

    /// Connects to the agent socket `name`, searching `directories` in order; every check made
    /// before a byte is sent. Throws `.notRunning` when no place has a live agent's socket,
    /// `.untrusted` at the first place that fails a check (the search stops there: it is never
    /// skipped in favour of a later place).
    static func connect(_ name: String, searching places: Places) throws(AgentConnectionError) -> (fd: Int32, path: URL) {
        for directory in places.runtime {
            if let found = try connect(name, in: directory) { return found }
        }
        guard let home = places.home else {
            if places.runtime.isEmpty { throw .unusable(noPlace().message) }
            throw .notRunning
        }
        guard let found = try connect(name, in: home) else { throw .notRunning }
        return found
    }

    /// The connection to a live agent's socket `name` in `directory`, nil when there is none
    /// (no directory, no socket, a dead agent's); throws when something there fails a check.
    private static func connect(_ name: String, in directory: URL) throws(AgentConnectionError) -> (fd: Int32, path: URL)? {
        guard let directoryFD = try openChecked(directory) else { return nil }
        defer { close(directoryFD) }
        let path = directory.appending(path: name).path
        guard try checkSocketEntry(directoryFD, name, path: path) else { return nil }
        switch connect(through: directoryFD, name) {
        case .success(let fd):
            var uid: UInt32 = 0
            var pid: Int32 = 0
            guard cv_peer_credentials(fd, &uid, &pid) == 0 else {
                close(fd)
                throw .unusable("cannot tell who listens on \(path): \(String(cString: strerror(errno)))")
            }
            guard uid == getuid() else {
                close(fd)
                throw untrusted(path, "is served by a process of uid \(uid) (pid \(pid)), not by this user's agent")
            }
            return (fd, URL(fileURLWithPath: path))
        case .failure(.notRunning):
            return nil  // a dead agent's socket: look further
        case .failure(let error):
            throw error
        }
    }

    /// The path of `name` reached through the opened directory `fd`.
    static func path(through fd: Int32, _ name: String) -> String {
        "/proc/self/fd/\(fd)/\(name)"
    }

    /// `connect` to `name` in the opened directory, through `/proc/self/fd` (no path to swap,
    /// and no `sun_path` length limit on deep home directories).
    static func connect(through directory: Int32, _ name: String) -> Result<Int32, AgentConnectionError> {
        guard var address = address(path(through: directory, name)) else { return .failure(.unusable("the socket name is too long")) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.unusable(String(cString: strerror(errno)))) }
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        } while result != 0 && errno == EINTR
        guard result == 0 else {
            let code = errno
            close(fd)
            return .failure(code == ENOENT || code == ECONNREFUSED ? .notRunning : .unusable(String(cString: strerror(code))))
        }
        return .success(fd)
    }

    // MARK: - The agent's side

    /// Creates the agent's directory when needed (0700, and its missing parents under the home
    /// directory 0700 too), opens it and checks it. The open directory's descriptor.
    static func prepareDirectory(_ directory: URL) throws(AgentFailure) -> Int32 {
        func failure(_ error: AgentConnectionError) -> AgentFailure {
            switch error {
            case .untrusted(let reason): AgentFailure(code: "socket_directory", exit: 82, message: "\(reason); the agent will not listen there")
            default: AgentFailure(code: "socket_directory", exit: 74, message: "\(error)")
            }
        }
        let components = directory.standardizedFileURL.pathComponents
        var current = ""
        for component in components {
            current = current.isEmpty || current == "/" ? current + component : current + "/" + component
            if access(current, F_OK) == 0 { continue }
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                let reason = errno == EROFS ? "the file system is read-only" : String(cString: strerror(errno))
                throw AgentFailure(code: "socket_directory", exit: 74, message: "cannot create \(current): \(reason)")
            }
        }
        let opened: Int32?
        do {
            opened = try openChecked(directory)
        } catch {
            throw failure(error)
        }
        guard let opened else {
            throw AgentFailure(code: "socket_directory", exit: 74, message: "\(directory.path) disappeared while it was being prepared")
        }
        return opened
    }

    // MARK: - Places

    /// This user's home directory from the password database (never `$HOME`).
    static func homeDirectory() -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let status = getpwuid_r(getuid(), &entry, &buffer, buffer.count, &result)
        guard status == 0, result != nil, let directory = entry.pw_dir else { return nil }
        let home = String(cString: directory)
        return home.hasPrefix("/") ? home : nil
    }

    /// 12 hex digits naming this host: a hash of its machine id (which must not be shown as
    /// is), else of its host name.
    static func machineTag() -> String {
        var identity = ""
        for file in ["/etc/machine-id", "/var/lib/dbus/machine-id"] {
            if let text = try? String(contentsOfFile: file, encoding: .utf8) {
                identity = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if !identity.isEmpty { break }
            }
        }
        if identity.isEmpty {
            var name = [UInt8](repeating: 0, count: 256)
            let got = name.withUnsafeMutableBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { chars in chars.baseAddress.map { gethostname($0, chars.count - 1) } ?? -1 }
            }
            if got == 0 { identity = "host:" + String(decoding: name.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return String(Digest.hex(Digest.sha256(Array("credentialvault-agent-place:\(identity)".utf8))).prefix(12))
    }

    /// Whether `path` (links followed) is a directory of this user's with no group or other bits.
    static func isPrivateDirectoryOfOurs(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && privacyProblem(info, path: path) == nil
    }

    static func sameFile(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        guard stat(a, &first) == 0, stat(b, &second) == 0 else { return a == b }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    static func noPlace() -> AgentFailure {
        AgentFailure(
            code: "socket_directory", exit: 74,
            message:
                "no place for the agent's socket: no private runtime directory ($XDG_RUNTIME_DIR, /run/user/\(getuid())) and no home directory for uid \(getuid()) in the password database"
        )
    }

    // MARK: - I/O

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
    /// Something at the agent's place fails a check (another user's directory or socket, a
    /// link, a listener of another uid): nothing was sent to it.
    case untrusted(String)
    /// The agent did not answer as the protocol says (cut off, timed out, not JSON).
    case badAnswer(String)

    public var description: String {
        switch self {
        case .notRunning: "no agent is running for this vault"
        case .unusable(let reason): "the agent's socket cannot be used: \(reason)"
        case .untrusted(let reason): "refused to talk to the agent: \(reason); nothing was sent"
        case .badAnswer(let reason): "the agent did not answer: \(reason)"
        }
    }
}
