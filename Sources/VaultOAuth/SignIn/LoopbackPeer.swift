import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Who is at the other end of a TCP connection over loopback: the uid that owns the peer's
/// socket, read from the kernel's socket tables (`/proc/net/tcp`, and `/proc/net/tcp6` for
/// `[::1]` and IPv4-mapped peers).
///
/// The loopback redirect listener answers only this user's browser: another local user who
/// learned the callback's port cannot deliver a code of their own (their account) or take
/// this user's. The lookup fails closed: a peer that is not found, is not a live socket
/// owned by a process (an orphaned or `TIME_WAIT` entry shows uid 0 and inode 0), or is found
/// more than once, has no owner.
///
/// ```swift
/// // The accepted connection's peer is 127.0.0.1:51234, our end 127.0.0.1:8400.
/// let owner = LoopbackPeer.owner(peer: ("127.0.0.1", 51234), local: ("127.0.0.1", 8400))
/// guard owner == getuid() else { /* 403, and the listener keeps waiting */ }
/// ```
public enum LoopbackPeer {
    /// The uid owning the socket whose local end is `peer` and remote end `local`, or nil.
    ///
    /// The kernel prints these tables a page at a time, resuming by position: a socket opened or
    /// closed meanwhile (a browser's other connections) can shift a live entry past the point
    /// where the next page starts, so it is missed, or printed twice. A missing peer is looked
    /// up again (three reads in all), and an entry printed twice (one inode) counts once.
    public static func owner(peer: (address: String, port: Int), local: (address: String, port: Int)) -> uid_t? {
        for _ in 0..<3 {
            var tables: [String] = []
            for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
                if let text = read(file) { tables.append(text) }
            }
            if let owner = owner(peer: peer, local: local, tables: tables) { return owner }
        }
        return nil
    }

    /// The whole of a procfs file (whose size `stat` reports as 0, so it is read until EOF).
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer.prefix(count)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The same, from the tables' text (for tests).
    static func owner(peer: (address: String, port: Int), local: (address: String, port: Int), tables: [String]) -> uid_t? {
        guard let peerAddress = addressBytes(peer.address), let localAddress = addressBytes(local.address) else { return nil }
        var owners: [UInt64: uid_t] = [:]  // by inode: a socket printed twice is one socket
        for table in tables {
            for line in table.split(separator: "\n").dropFirst() {
                guard let entry = Entry(line) else { continue }
                guard entry.local == Endpoint(address: peerAddress, port: peer.port),
                    entry.remote == Endpoint(address: localAddress, port: local.port)
                else { continue }
                // A live socket of a process: an orphan or a TIME_WAIT entry has inode 0 (and uid 0).
                guard entry.inode != 0 else { return nil }
                owners[entry.inode] = entry.uid
            }
        }
        return owners.count == 1 ? owners.values.first : nil
    }

    struct Endpoint: Equatable {
        var address: [UInt8]
        var port: Int
    }

    /// One line of `/proc/net/tcp{,6}`:
    /// `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …`
    struct Entry {
        var local: Endpoint
        var remote: Endpoint
        var uid: uid_t
        var inode: UInt64

        init?(_ line: Substring) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 10, let local = Self.endpoint(fields[1]), let remote = Self.endpoint(fields[2]),
                let uid = uid_t(fields[7]), let inode = UInt64(fields[9])
            else { return nil }
            (self.local, self.remote, self.uid, self.inode) = (local, remote, uid, inode)
        }

        /// `0100007F:1F90` (IPv4) or 32 hex digits (IPv6): the address as the kernel keeps it,
        /// printed as host-order 32-bit words. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
        /// how an IPv4 peer of a dual-stack socket appears) is read as the IPv4 address.
        static func endpoint(_ field: Substring) -> Endpoint? {
            let parts = field.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1], radix: 16) else { return nil }
            let hex = parts[0]
            var words: [UInt32] = []
            var index = hex.startIndex
            while index < hex.endIndex {
                guard let end = hex.index(index, offsetBy: 8, limitedBy: hex.endIndex), let word = UInt32(hex[index..<end], radix: 16) else {
                    return nil
                }
                words.append(word)
                index = end
            }
            // Each word was printed from memory holding network-order bytes: its host-order
            // bytes are the address's bytes.
            let bytes = words.flatMap { word in withUnsafeBytes(of: word) { Array($0) } }
            switch bytes.count {
            case 4:
                return Endpoint(address: bytes, port: port)
            case 16:
                return Endpoint(address: unmapped(bytes), port: port)
            default:
                return nil
            }
        }
    }

    /// An address's bytes in network order: 4 for IPv4, 16 for IPv6 (4 for an IPv4-mapped one).
    static func addressBytes(_ text: String) -> [UInt8]? {
        var address = in_addr()
        if inet_pton(AF_INET, text, &address) == 1 { return withUnsafeBytes(of: address.s_addr) { Array($0) } }
        var address6 = in6_addr()
        guard inet_pton(AF_INET6, text, &address6) == 1 else { return nil }
        return unmapped(withUnsafeBytes(of: address6) { Array($0) })
    }

    /// `::ffff:a.b.c.d` as `a.b.c.d`; any other IPv6 address as it is.
    static func unmapped(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF else { return bytes }
        return Array(bytes[12..<16])
    }
}
