import AgentWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Why a client could not talk to an agent (``AgentWire``'s, shared with the lean client).
public typealias AgentConnectionError = AgentWire.AgentConnectionError

/// Where the agent of a vault listens, and the checks both ends make before they trust it, for
/// callers holding `URL`s: the rules themselves live once, Foundation-free, in ``AgentPlaces``
/// (the places and the socket's name) and ``AgentTrust`` (the checks on descriptors and
/// `SO_PEERCRED`), which the lean client shares.
public enum AgentSocket {
    /// The socket where the agent for `vault` listens (the first place that applies).
    public static func path(forVault vault: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> URL {
        guard let directory = directories(environment: environment).first else { throw noPlace() }
        return directory.appending(path: name(forVault: vault))
    }

    /// The socket's file name for `vault`.
    public static func name(forVault vault: URL) -> String {
        AgentPlaces.socketName(forVault: vault.path)
    }

    /// Every place an agent of this user may listen, in the order clients search them.
    public static func directories(environment: [String: String] = ProcessInfo.processInfo.environment) -> [URL] {
        Places(environment: environment).all
    }

    /// Where a client looks for an agent's socket, in order (``AgentPlaces``).
    public struct Places: Sendable {
        let places: AgentPlaces

        /// This user's places (``AgentPlaces``'s list).
        public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
            places = AgentPlaces(environment: { environment[$0] })
        }

        /// One given directory only.
        public init(only directory: URL) {
            places = AgentPlaces(only: directory.path)
        }

        /// Every place, in search order.
        public var all: [URL] { places.all.map { URL(fileURLWithPath: $0, isDirectory: true) } }
    }

    /// Connects to the agent socket `name`, searching `places` in order, every check made
    /// before a byte is sent (``AgentTrust/connect(_:searching:)``).
    static func connect(_ name: String, searching places: Places) throws(AgentConnectionError) -> (fd: Int32, path: URL) {
        let (fd, path) = try AgentTrust.connect(name, searching: places.places)
        return (fd, URL(fileURLWithPath: path))
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
            opened = try AgentTrust.openChecked(directory.path)
        } catch {
            throw failure(error)
        }
        guard let opened else {
            throw AgentFailure(code: "socket_directory", exit: 74, message: "\(directory.path) disappeared while it was being prepared")
        }
        return opened
    }

    /// A socket listening as `name` in the directory opened as `directoryFD` (`path` for
    /// messages), created 0600 whatever the umask: no moment where another user may connect.
    static func listen(_ name: String, in directoryFD: Int32, path: URL) throws(AgentFailure) -> Int32 {
        guard var address = AgentTrust.address(AgentTrust.path(through: directoryFD, name)) else {
            throw AgentFailure(code: "socket", exit: 74, message: "the socket name \(name) is too long")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw AgentFailure(code: "socket", exit: 74, message: String(cString: strerror(errno))) }
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, Glibc.listen(fd, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw AgentFailure(code: "socket", exit: 74, message: "cannot listen on \(path.path): \(reason)")
        }
        return fd
    }

    static func noPlace() -> AgentFailure {
        AgentFailure(code: "socket_directory", exit: 74, message: AgentPlaces.noPlaceMessage)
    }

    // MARK: - I/O

    /// The device and inode of the file at `url` (following links), or nil when there is none:
    /// tells whether a file was replaced under a process that holds it open.
    public static func fileIdentity(_ url: URL) -> (dev: UInt64, ino: UInt64)? {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }
}
