import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A small HTTP proxy on 127.0.0.1 that only speaks `CONNECT` (RFC 9110 §9.3.6), for tests of
/// a client behind a corporate proxy: every CONNECT is recorded (its target and its
/// `Proxy-Authorization`), then answered with `status`; on 200 the tunnel goes to
/// 127.0.0.1 at the requested port, whatever the requested host (so a name that does not
/// resolve, like ``TestChain/proxiedHost``, reaches a loopback server), and bytes are relayed
/// both ways without being read. Runs on threads of its own with blocking sockets, never on the
/// cooperative pool.
///
/// ```swift
/// let proxy = try ConnectProxy.start()
/// defer { proxy.stop() }
/// let transport = NIOTransport(proxy: try ProxyConfiguration(url: "http://127.0.0.1:\(proxy.port)"))
/// ```
public final class ConnectProxy: Sendable {
    public struct Tunnel: Sendable, Equatable {
        /// `host:port` as the CONNECT line named it.
        public var authority: String
        public var proxyAuthorization: String?
        /// Bytes relayed from the client once the tunnel was open.
        public var bytesFromClient = 0
    }

    public let port: Int
    public let tunnels = Watched<[Tunnel]>([])
    private let listener: Int32
    private let status: Int

    private init(listener: Int32, port: Int, status: Int) {
        self.listener = listener
        self.port = port
        self.status = status
    }

    /// Starts listening; `status` is what every CONNECT is answered with (200 opens the tunnel).
    public static func start(status: Int = 200) throws -> ConnectProxy {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let proxy = ConnectProxy(listener: fd, port: Int(UInt16(bigEndian: address.sin_port)), status: status)
        let thread = Thread { proxy.acceptLoop() }
        thread.start()
        return proxy
    }

    /// Stops accepting; tunnels already open end when either side closes.
    public func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            Thread { self.serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // The request head, byte by byte: nothing after it (the TLS hello) is read here.
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.ends(with: [13, 10, 13, 10]) {
            guard head.count < 16 * 1024, read(client, &byte, 1) == 1 else { return }
            head.append(byte)
        }
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let words = lines[0].split(separator: " ")
        guard words.count == 3, words[0] == "CONNECT", let port = words[1].split(separator: ":").last.flatMap({ Int($0) }) else {
            send(client, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        }
        let authorization = lines.dropFirst().first { $0.lowercased().hasPrefix("proxy-authorization:") }
            .map { String($0.dropFirst("proxy-authorization:".count)).trimmingCharacters(in: .whitespaces) }
        let index = tunnels.value.count
        tunnels.update { $0.append(Tunnel(authority: String(words[1]), proxyAuthorization: authorization)) }
        guard status == 200 else {
            let reason = status == 407 ? "Proxy Authentication Required" : "Forbidden"
            send(client, "HTTP/1.1 \(status) \(reason)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard server >= 0 else { return }
        defer { close(server) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            send(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        }
        send(client, "HTTP/1.1 200 Connection established\r\n\r\n")
        relay(client, server) { count in self.tunnels.update { $0[index].bytesFromClient += count } }
    }

    /// Copies bytes both ways until either side closes.
    private func relay(_ client: Int32, _ server: Int32, counted: (Int) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&fds, 2, 30_000) > 0 else { return }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                guard count > 0 else { return }
                let target = index == 0 ? server : client
                var written = 0
                while written < count {
                    let step = buffer[written..<count].withUnsafeBytes { write(target, $0.baseAddress, $0.count) }
                    guard step > 0 else { return }
                    written += step
                }
                if index == 0 { counted(count) }
            }
        }
    }

    private func send(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
