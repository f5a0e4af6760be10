internal import CSodium

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent of a vault listens: the socket's name and the directories searched for it.
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
/// Foundation-free (``WireProtocol``): the lean client and `AgentClient` compute the same places.
public struct AgentPlaces: Sendable {
    /// The runtime places that apply, in order (absolute paths).
    public let runtime: [String]
    let includesHome: Bool

    /// This user's places, `variable` reading the environment (`getenv` by default).
    public init(environment variable: (String) -> String? = AgentPlaces.processEnvironment) {
        var runtimes: [String] = []
        if let runtime = variable("XDG_RUNTIME_DIR"), runtime.hasPrefix("/"), Self.isPrivateDirectoryOfOurs(runtime) {
            runtimes.append(runtime)
        }
        let standard = "/run/user/\(getuid())"
        if !runtimes.contains(where: { Self.sameFile($0, standard) }), Self.isPrivateDirectoryOfOurs(standard) {
            runtimes.append(standard)
        }
        runtime = runtimes.map { Self.joined($0, "credentialvault") }
        includesHome = true
    }

    /// One given directory only.
    public init(only directory: String) {
        runtime = [directory]
        includesHome = false
    }

    /// The process's environment variable `name` (`getenv`).
    public static func processEnvironment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// The home place, when there is a home directory. Worked out only when asked: an agent in
    /// the runtime directory costs a client no password-database lookup and no machine id.
    public var home: String? {
        guard includesHome, let home = Self.homeDirectory() else { return nil }
        return Self.joined(home, ".local/state/credentialvault/run-\(Self.machineTag())")
    }

    /// Every place, in search order.
    public var all: [String] { runtime + (home.map { [$0] } ?? []) }

    /// The socket's file name for the vault at `vaultPath` (absolute or relative to the
    /// working directory).
    public static func socketName(forVault vaultPath: String) -> String {
        "agent-\(identifier(ofVault: vaultPath)).sock"
    }

    /// 16 hex digits naming the vault by its resolved path (links and `..` resolved; for a
    /// file that does not exist, its directory resolved).
    public static func identifier(ofVault vaultPath: String) -> String {
        let resolved = resolvedPath(vaultPath)
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        let bytes = Array(resolved.utf8)
        _ = crypto_hash_sha256(&digest, bytes, UInt64(bytes.count))
        return String(hex(digest).prefix(16))
    }

    /// `path` with links, `.` and `..` resolved (`realpath`), its directory resolved when the
    /// file itself does not exist, else the absolute path as given.
    public static func resolvedPath(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : joined(currentDirectory(), path)
        if let real = realPath(absolute) { return real }
        guard let slash = absolute.lastIndex(of: "/") else { return absolute }
        let directory = absolute[..<slash].isEmpty ? "/" : String(absolute[..<slash])
        let name = absolute[absolute.index(after: slash)...]
        guard let real = realPath(directory), !name.isEmpty, name != ".", name != ".." else { return absolute }
        return joined(real, String(name))
    }

    // MARK: - Helpers

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func currentDirectory() -> String {
        guard let cwd = getcwd(nil, 0) else { return "/" }
        defer { free(cwd) }
        return String(cString: cwd)
    }

    static func joined(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// This user's home directory from the password database (never `$HOME`).
    public static func homeDirectory() -> String? {
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
            if let text = readSmallFile(file) {
                identity = String(text.filter { !$0.isWhitespace })
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
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        let bytes = Array("credentialvault-agent-place:\(identity)".utf8)
        _ = crypto_hash_sha256(&digest, bytes, UInt64(bytes.count))
        return String(hex(digest).prefix(12))
    }

    /// The first 4 KiB of a small text file, or nil.
    static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count >= 0 else { return nil }
        return String(decoding: buffer.prefix(count), as: UTF8.self)
    }

    /// Whether `path` (links followed) is a directory of this user's with no group or other bits.
    static func isPrivateDirectoryOfOurs(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && AgentTrust.privacyProblem(info, path: path) == nil
    }

    static func sameFile(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        guard stat(a, &first) == 0, stat(b, &second) == 0 else { return a == b }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    /// The message when no place applies.
    public static var noPlaceMessage: String {
        "no place for the agent's socket: no private runtime directory ($XDG_RUNTIME_DIR, /run/user/\(getuid())) and no home directory for uid \(getuid()) in the password database"
    }
}
