import AgentWire
internal import CProcessControl
import Foundation
import VaultSync

#if canImport(Glibc)
    import Glibc
#endif

/// Where a process that runs a child for longer than a token lives (`vault exec --keep-fresh`)
/// keeps that child's fresh token: a directory of its own, closed to everyone else, on a memory
/// file system (never a disk), holding
///
/// - `token`: the current access token, nothing else (no newline), replaced by `rename(2)` so a
///   reader sees the old token or the new one, never a mix (the pattern of Kubernetes' projected
///   service-account tokens);
/// - `token.sock`: the socket ``ChildTokenServer`` answers on.
///
/// The directory is `<base>/<pid namespace>-<pid>-<start time>`, `<base>` the first that applies of
/// `$XDG_RUNTIME_DIR/credentialvault/exec` (the runtime directory, when it is this user's,
/// private and a tmpfs) and `/dev/shm/credentialvault-<uid>` (refused unless this user's and
/// private: another user who creates that name first makes `--keep-fresh` refuse, never read a
/// token). The owner's pid namespace, process id and start time in the name let a later run
/// tell a place whose owner was killed (``removeStale(in:)``) from one in use, even after the
/// pid was reused, and leave the places of another pid namespace (a container) alone.
public final class ChildTokenPlace: Sendable {
    /// The place's directory.
    public let directory: URL
    /// The directory holding every place of this user's.
    public let base: URL
    private let name: String
    /// `base` and `directory`, opened (`O_PATH`) and checked: everything is done through them.
    private let baseFD: Int32
    private let fd: Int32
    /// Set by ``remove()``: the descriptors are closed, nothing more is written. Writes hold
    /// the lock, so none runs on a descriptor ``remove()`` closed (or one reused since).
    private let removed = Locked(false)

    /// The token file's path, for the child.
    public var tokenFile: URL { directory.appending(path: Self.tokenName) }
    /// The socket's path, for the child.
    public var socket: URL { directory.appending(path: Self.socketName) }

    static let tokenName = "token"
    static let socketName = "token.sock"
    private static let temporaryName = "token.tmp"

    /// Creates this process's place under ``base(environment:)`` (every place there whose owner
    /// is gone removed first), with an empty token file.
    public convenience init(environment: [String: String] = ProcessInfo.processInfo.environment) throws(AgentFailure) {
        try self.init(base: try Self.base(environment: environment))
    }

    /// Creates this process's place under `base` (created 0700 when missing, refused unless it
    /// is a private directory of this user's), every place there whose owner is gone removed first.
    public init(base: URL) throws(AgentFailure) {
        let baseFD = try AgentSocket.prepareDirectory(base)
        Self.removeStale(in: baseFD)
        guard case .running(let start) = Self.process(getpid()), let namespace = Self.pidNamespace() else {
            close(baseFD)
            throw AgentFailure(code: "token_place", exit: 74, message: "cannot read this process's start time and pid namespace from /proc")
        }
        let name = "\(namespace)-\(getpid())-\(start)"
        guard mkdirat(baseFD, name, 0o700) == 0 else {
            let reason = String(cString: strerror(errno))
            close(baseFD)
            throw AgentFailure(code: "token_place", exit: 74, message: "cannot create \(base.path)/\(name): \(reason)")
        }
        let fd = cv_open_directory(baseFD, name, 1)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            unlinkat(baseFD, name, AT_REMOVEDIR)
            close(baseFD)
            throw AgentFailure(code: "token_place", exit: 74, message: "cannot open \(base.path)/\(name): \(reason)")
        }
        (self.base, self.name, self.baseFD, self.fd) = (base, name, baseFD, fd)
        directory = base.appending(path: name, directoryHint: .isDirectory)
        do {
            try AgentTrust.checkDirectory(fd, path: directory.path)
            try write("")
        } catch {
            remove()
            throw AgentFailure(code: "token_place", exit: 74, message: "\(error)")
        }
    }

    /// Replaces the token file's content with `token` at once (written beside it, 0600, then
    /// renamed over it).
    public func write(_ token: String) throws(AgentFailure) {
        let result: Result<Void, AgentFailure> = removed.withLock { removed in
            guard !removed else {
                return .failure(AgentFailure(code: "token_place", exit: 74, message: "\(directory.path) was removed: the command ended"))
            }
            return Result { () throws(AgentFailure) in try writeLocked(token) }
        }
        try result.get()
    }

    private func writeLocked(_ token: String) throws(AgentFailure) {
        unlinkat(fd, Self.temporaryName, 0)
        let file = openat(fd, Self.temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw failure("cannot write the token file") }
        let written = Self.writeAll(file, Array(token.utf8))
        close(file)
        guard written, renameat(fd, Self.temporaryName, fd, Self.tokenName) == 0 else {
            let error = failure("cannot write the token file")
            unlinkat(fd, Self.temporaryName, 0)
            throw error
        }
    }

    /// Writes all of `bytes` to the file `fd`; false on an error.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    /// `body` with the place's directory, opened (`O_PATH`).
    func withDirectory<T>(_ body: (Int32) throws -> T) rethrows -> T {
        try body(fd)
    }

    private func failure(_ what: String) -> AgentFailure {
        AgentFailure(code: "token_place", exit: 74, message: "\(what) in \(directory.path): \(String(cString: strerror(errno)))")
    }

    /// Removes the token file, the socket and the directory, when the child ended; later calls
    /// and writes do nothing.
    public func remove() {
        removed.withLock { removed in
            guard !removed else { return }
            removed = true
            Self.empty(fd)
            close(fd)
            unlinkat(baseFD, name, AT_REMOVEDIR)
            close(baseFD)
        }
    }

    /// The files a place may hold, removed from the place opened as `fd`.
    private static func empty(_ fd: Int32) {
        for file in [tokenName, temporaryName, socketName] { unlinkat(fd, file, 0) }
    }

    // MARK: - Where

    /// Where places are made (see the type's description); refused when no memory file system
    /// of this user's is at hand: a token is never written to a disk.
    public static func base(environment: [String: String] = ProcessInfo.processInfo.environment) throws(AgentFailure) -> URL {
        for runtime in AgentPlaces(environment: { environment[$0] }).runtime where isMemoryFileSystem(runtime) {
            return URL(fileURLWithPath: runtime, isDirectory: true).appending(path: "exec", directoryHint: .isDirectory)
        }
        if isMemoryFileSystem("/dev/shm") {
            return URL(fileURLWithPath: "/dev/shm/credentialvault-\(getuid())", isDirectory: true)
        }
        throw AgentFailure(
            code: "token_place", exit: 74,
            message:
                "no memory file system for the token file: neither a private runtime directory ($XDG_RUNTIME_DIR, /run/user/\(getuid())) nor /dev/shm is a tmpfs, and a token is never written to a disk"
        )
    }

    /// Whether `path` (or, when it does not exist yet, its parent) is on tmpfs or ramfs.
    static func isMemoryFileSystem(_ path: String) -> Bool {
        let answer = cv_is_memory_file_system(path)
        return answer == 1 || (answer < 0 && cv_is_memory_file_system((path as NSString).deletingLastPathComponent) == 1)
    }

    // MARK: - Places left by killed owners

    /// Removes every place in `base` whose owner is no longer running (killed before it could
    /// clean up); places in use are left. The number removed.
    @discardableResult
    public static func removeStale(in base: URL) -> Int {
        guard let fd = try? AgentTrust.openChecked(base.path) else { return 0 }
        defer { close(fd) }
        return removeStale(in: fd)
    }

    @discardableResult
    private static func removeStale(in baseFD: Int32) -> Int {
        var removed = 0
        guard let namespace = pidNamespace() else { return 0 }
        for name in entries(of: baseFD) {
            // Only places of this pid namespace: a container sharing the directory numbers its
            // processes otherwise, and its places are not judged from here.
            let parts = name.split(separator: "-")
            guard parts.count == 3, UInt64(parts[0]) == namespace, let pid = Int32(parts[1]), let start = UInt64(parts[2]) else { continue }
            switch process(pid) {
            case .gone: break
            case .running(let started) where started != start: break  // the pid now names another process
            case .running, .unknown: continue
            }
            let fd = cv_open_directory(baseFD, name, 1)
            guard fd >= 0 else { continue }
            empty(fd)
            close(fd)
            if unlinkat(baseFD, name, AT_REMOVEDIR) == 0 { removed += 1 }
        }
        return removed
    }

    /// The names in the directory opened as `fd` (`O_PATH`: read through a new descriptor).
    private static func entries(of fd: Int32) -> [String] {
        let readable = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard readable >= 0, let stream = fdopendir(readable) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// What `/proc` says of process `pid`.
    enum ProcessState: Equatable {
        /// Running, started at this many clock ticks after boot (`/proc/PID/stat` field 22).
        case running(UInt64)
        /// No such process.
        case gone
        /// `/proc` could not tell (no permission, no descriptor left): taken as running.
        case unknown
    }

    static func process(_ pid: Int32) -> ProcessState {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno == ENOENT ? .gone : .unknown }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        Glibc.close(fd)
        let stat = String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
        // After "pid (comm)" come the fields from 3 (state) on: field 22 is the 20th of them.
        guard let close = stat.lastIndex(of: ")") else { return .unknown }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let start = UInt64(fields[19]) else { return .unknown }
        return .running(start)
    }

    /// This process's pid namespace (the inode of `/proc/self/ns/pid`).
    static func pidNamespace() -> UInt64? {
        var info = stat()
        guard stat("/proc/self/ns/pid", &info) == 0 else { return nil }
        return UInt64(info.st_ino)
    }
}
