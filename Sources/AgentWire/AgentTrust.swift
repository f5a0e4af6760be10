internal import CProcessControl

#if canImport(Glibc)
    import Glibc
#endif

/// The checks both ends make before they trust an agent's place, and the connection made
/// through them.
///
/// The socket's directory must be a real directory (not a link) owned by this user with no
/// group or other permission bits, the socket a socket owned by this user, and the process
/// listening on it this user's (`SO_PEERCRED`). The checks are made on descriptors, not paths:
/// the directory is opened `O_PATH|O_NOFOLLOW`, checked with `fstat`, and the connection goes
/// through that descriptor (`/proc/self/fd/N/agent-….sock`), so nothing can be swapped between
/// the check and the use. Processes of the same uid remain trusted: they can do anything this
/// user can. Foundation-free (``WireProtocol``): the lean client and `AgentClient` share it.
public enum AgentTrust {
    static func untrusted(_ path: String, _ reason: String) -> AgentConnectionError {
        .untrusted("\(path) \(reason)")
    }

    static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// Checks an opened directory: a directory, this user's, no group or other bits.
    public static func checkDirectory(_ fd: Int32, path: String) throws(AgentConnectionError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unusable("cannot read \(path): \(errorText())") }
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
    public static func openChecked(_ path: String) throws(AgentConnectionError) -> Int32? {
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
            throw .unusable("cannot open \(path): \(errorText(code))")
        }
        do {
            try checkDirectory(fd, path: path)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Checks the entry `name` in the opened directory: false when there is none, else whether
    /// it is a socket of this user's (throws when it is anything else).
    static func checkSocketEntry(_ directory: Int32, _ name: String, path: String) throws(AgentConnectionError) -> Bool {
        var info = stat()
        guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return false }
            throw .unusable("cannot read \(path): \(errorText())")
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

    /// Connects to the agent socket `name`, searching `places` in order; every check made
    /// before a byte is sent. Throws `.notRunning` when no place has a live agent's socket,
    /// `.untrusted` at the first place that fails a check (the search stops there: it is never
    /// skipped in favour of a later place).
    public static func connect(_ name: String, searching places: AgentPlaces) throws(AgentConnectionError) -> (fd: Int32, path: String) {
        for directory in places.runtime {
            if let found = try connect(name, in: directory) { return found }
        }
        guard let home = places.home else {
            if places.runtime.isEmpty { throw .unusable(AgentPlaces.noPlaceMessage) }
            throw .notRunning
        }
        guard let found = try connect(name, in: home) else { throw .notRunning }
        return found
    }

    /// The connection to a live agent's socket `name` in `directory`, nil when there is none
    /// (no directory, no socket, a dead agent's); throws when something there fails a check.
    static func connect(_ name: String, in directory: String) throws(AgentConnectionError) -> (fd: Int32, path: String)? {
        guard let directoryFD = try openChecked(directory) else { return nil }
        defer { close(directoryFD) }
        let path = AgentPlaces.joined(directory, name)
        guard try checkSocketEntry(directoryFD, name, path: path) else { return nil }
        switch connect(through: directoryFD, name) {
        case .success(let fd):
            guard let peer = peerCredentials(fd) else {
                let reason = errorText()
                close(fd)
                throw .unusable("cannot tell who listens on \(path): \(reason)")
            }
            guard peer.uid == getuid() else {
                close(fd)
                throw untrusted(path, "is served by a process of uid \(peer.uid) (pid \(peer.pid)), not by this user's agent")
            }
            return (fd, path)
        case .failure(.notRunning):
            return nil  // a dead agent's socket: look further
        case .failure(let error):
            throw error
        }
    }

    /// The uid and pid of the process at the other end of a connected Unix-domain socket
    /// (`SO_PEERCRED`, filled by the kernel at connect time: a peer cannot lie), or nil.
    public static func peerCredentials(_ fd: Int32) -> (uid: UInt32, pid: Int32)? {
        var uid: UInt32 = 0
        var pid: Int32 = 0
        guard cv_peer_credentials(fd, &uid, &pid) == 0 else { return nil }
        return (uid, pid)
    }

    /// The path of `name` reached through the opened directory `fd`.
    public static func path(through fd: Int32, _ name: String) -> String {
        "/proc/self/fd/\(fd)/\(name)"
    }

    /// `connect` to `name` in the opened directory, through `/proc/self/fd` (no path to swap,
    /// and no `sun_path` length limit on deep home directories).
    static func connect(through directory: Int32, _ name: String) -> Result<Int32, AgentConnectionError> {
        guard var address = address(path(through: directory, name)) else { return .failure(.unusable("the socket name is too long")) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.unusable(errorText())) }
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        } while result != 0 && errno == EINTR
        guard result == 0 else {
            let code = errno
            close(fd)
            return .failure(code == ENOENT || code == ECONNREFUSED ? .notRunning : .unusable(errorText(code)))
        }
        return .success(fd)
    }

    /// A `sockaddr_un` for `path`, or nil when the path is too long for one.
    public static func address(_ path: String) -> sockaddr_un? {
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
}
