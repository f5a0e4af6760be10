import Foundation

/// An HTTP proxy for https requests (`HTTPS_PROXY`), reached with `CONNECT` (RFC 9110 §9.3.6):
/// the proxy relays bytes, and TLS — certificate checks and pins — is between this client and
/// the server, end to end. Loopback destinations never go through it, nor hosts `NO_PROXY`
/// names. Plain http is never proxied (it may only go to loopback anyway: ``EndpointRule``).
///
/// ```swift
/// // HTTPS_PROXY=http://proxy.corp.example:3128  NO_PROXY=.corp.example,10.0.0.0/8
/// let transport = NIOTransport(proxy: try ProxyConfiguration.fromEnvironment())
/// ```
public struct ProxyConfiguration: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    public let host: String
    public let port: Int
    /// `Proxy-Authorization` for a proxy URL with a user name (`Basic`); never logged.
    let authorization: String?
    /// `NO_PROXY`'s entries, lowercased: a host and its subdomains (`example.com`,
    /// `.example.com`), an IP address or network (`10.0.0.0/8`, `fd00::/8`), or `*` for all.
    public let exclusions: [String]

    /// A proxy at `url` (`http://[user:password@]host[:port]`; without a scheme, http; without a
    /// port, 1080 as curl assumes). An `https://` or `socks` proxy is refused: this transport
    /// speaks plain HTTP to its proxy.
    public init(url text: String, exclusions: [String] = []) throws(ProxyError) {
        let given = text.trimmingCharacters(in: .whitespaces)
        let withScheme = given.contains("://") ? given : "http://" + given
        guard let components = URLComponents(string: withScheme), let scheme = components.scheme?.lowercased(),
            var host = components.host, !host.isEmpty
        else {
            throw ProxyError("the proxy \(Self.withoutCredentials(given)) is not a URL")
        }
        guard scheme == "http" else {
            throw ProxyError("the proxy \(Self.withoutCredentials(given)) uses \(scheme)://; only an http:// proxy (CONNECT) is supported")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.host = host
        port = components.port ?? 1080
        if let user = components.user {
            let password = components.password ?? ""
            let decoded = (user.removingPercentEncoding ?? user) + ":" + (password.removingPercentEncoding ?? password)
            authorization = "Basic " + Data(decoded.utf8).base64EncodedString()
        } else {
            authorization = nil
        }
        self.exclusions = exclusions.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .map { $0.hasSuffix(".") && $0 != "." ? String($0.dropLast()) : $0 }  // `corp.example.` as `corp.example`
            .filter { !$0.isEmpty }
    }

    /// The proxy the environment names for https: `https_proxy` or `HTTPS_PROXY` (the
    /// lowercase one first, as curl reads them), with `no_proxy` / `NO_PROXY`; nil when neither
    /// is set or it is empty.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(ProxyError)
        -> ProxyConfiguration?
    {
        guard let url = [environment["https_proxy"], environment["HTTPS_PROXY"]].compactMap({ $0 }).first(where: { !$0.isEmpty }) else {
            return nil
        }
        let exclusions = ([environment["no_proxy"], environment["NO_PROXY"]].compactMap { $0 }.first { !$0.isEmpty } ?? "")
            .split(separator: ",").map(String.init)
        return try ProxyConfiguration(url: url, exclusions: exclusions)
    }

    /// Whether a request to `host` (no brackets) goes through the proxy.
    public func proxies(_ host: String) -> Bool {
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
        if Self.isLoopback(name) { return false }
        let address = LoopbackPeer.addressBytes(name)
        for exclusion in exclusions {
            if exclusion == "*" { return false }
            if let address, Self.network(exclusion, contains: address) { return false }
            var domain = exclusion
            if domain.hasPrefix("*.") { domain.removeFirst(1) }
            if domain.hasPrefix(".") { domain.removeFirst() }
            // A port in an entry (`host:8443`) is not matched: the host alone is.
            if address == nil, let colon = domain.lastIndex(of: ":") { domain = String(domain[..<colon]) }
            if name == domain || name.hasSuffix("." + domain) { return false }
        }
        return true
    }

    public var description: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)" }

    /// No credential in `dump`.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["host": host, "port": port, "authorization": authorization == nil ? "none" : "<redacted>", "exclusions": exclusions],
            displayStyle: .struct)
    }

    /// `localhost`, `*.localhost`, 127.0.0.0/8 and ::1: never proxied. IPv4 is read as the
    /// resolver reads it (`inet_aton`: `127.1` and `2130706433` are loopback too).
    static func isLoopback(_ name: String) -> Bool {
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        var address = in_addr()
        if inet_aton(name, &address) != 0 { return UInt32(bigEndian: address.s_addr) >> 24 == 127 }
        guard let bytes = LoopbackPeer.addressBytes(name) else { return false }
        return bytes.count == 4 ? bytes[0] == 127 : bytes == Array(repeating: 0, count: 15) + [1]
    }

    /// Whether `entry` (an address, or `address/bits`) covers `address`.
    static func network(_ entry: String, contains address: [UInt8]) -> Bool {
        let parts = entry.split(separator: "/", maxSplits: 1).map(String.init)
        var text = parts[0]
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        guard let network = LoopbackPeer.addressBytes(text), network.count == address.count else { return false }
        let bits = parts.count == 2 ? Int(parts[1]) ?? -1 : network.count * 8
        guard (0...network.count * 8).contains(bits) else { return false }
        for index in 0..<network.count {
            let covered = max(0, min(8, bits - index * 8))
            let mask = covered == 0 ? UInt8(0) : UInt8(truncatingIfNeeded: 0xFF << (8 - covered))
            if network[index] & mask != address[index] & mask { return false }
        }
        return true
    }

    /// A proxy setting for messages: no user name or password.
    static func withoutCredentials(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        return String(text[..<start]) + String(text[text.index(after: at)...])
    }
}

/// A proxy setting that cannot be used; the message never holds its password.
public struct ProxyError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
