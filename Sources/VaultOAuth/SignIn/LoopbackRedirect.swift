import Foundation

/// A loopback redirect URI as a provider registers it (RFC 8252 §7.3): `http`, a loopback
/// host, an optional port, a path. Without a port the listener takes any free one and the
/// authorization request names it (the provider must let the port vary, as §7.3 says); with a
/// port, exactly that one.
///
/// The default, `http://127.0.0.1/callback`, is a contract: providers register it, so it never
/// changes. `localhost` is accepted because some providers only register it (RFC 8252 §8.3
/// prefers the IP literal): the listener then binds both `127.0.0.1` and `[::1]` on the same
/// port, since the browser may resolve either. Anything that would leave this machine — another
/// host, `https`, a userinfo, a query or a fragment — is refused.
///
/// ```swift
/// let redirect = try LoopbackRedirect(parsing: "http://localhost:8400/oauth/callback")
/// redirect.host   // .localhost
/// redirect.port   // 8400
/// LoopbackRedirect.default.description   // "http://127.0.0.1/callback"
/// ```
public struct LoopbackRedirect: Sendable, Hashable, CustomStringConvertible {
    /// Where the listener binds.
    public enum Host: String, Sendable, Hashable {
        case ipv4 = "127.0.0.1"
        case ipv6 = "[::1]"
        case localhost

        /// The addresses to bind, in order.
        var addresses: [String] {
            switch self {
            case .ipv4: ["127.0.0.1"]
            case .ipv6: ["::1"]
            case .localhost: ["127.0.0.1", "::1"]
            }
        }
    }

    public let host: Host
    /// The registered port; nil: any free one, chosen when the listener starts.
    public let port: Int?
    /// The path, starting with `/`.
    public let path: String

    /// `http://127.0.0.1/callback`, any port.
    public static let `default` = LoopbackRedirect(host: .ipv4, port: nil, path: "/callback")

    private init(host: Host, port: Int?, path: String) {
        self.host = host
        self.port = port
        self.path = path
    }

    /// Reads a redirect URI given by the user or stored with an account; throws a sentence
    /// saying what is wrong with it.
    public init(parsing text: String) throws(SignInError) {
        func refuse(_ reason: String) -> SignInError { .invalidRedirectURI(reason: reason) }
        guard let components = URLComponents(string: text), let scheme = components.scheme else {
            throw refuse("it is not a URL")
        }
        guard scheme.lowercased() == "http" else {
            throw refuse("a loopback redirect is http:// (RFC 8252 §7.3: the browser brings the code to this machine only)")
        }
        guard components.user == nil, components.password == nil else { throw refuse("it carries a user name or password") }
        guard components.query == nil, components.fragment == nil else { throw refuse("it has a query or a fragment") }
        // URLComponents strips IPv6 brackets from `host`; the encoded form keeps them.
        let named = (components.percentEncodedHost ?? "").lowercased()
        let host: Host
        switch named {
        case "127.0.0.1": host = .ipv4
        case "[::1]", "::1": host = .ipv6
        case "localhost": host = .localhost
        default:
            throw refuse("the host must be 127.0.0.1, [::1] or localhost (a loopback redirect never leaves this machine)")
        }
        if let port = components.port, !(1...65535).contains(port) { throw refuse("the port \(port) is not 1–65535") }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        guard path.hasPrefix("/") else { throw refuse("the path must start with /") }
        self.init(host: host, port: components.port, path: path)
    }

    /// The URI as registered: with the port only when one was given.
    public var description: String { uri(port: port) }

    /// The URI an authorization request names once the listener has its port.
    public func uri(port: Int?) -> String {
        "http://\(host == .localhost ? "localhost" : host.rawValue)\(port.map { ":\($0)" } ?? "")\(path)"
    }
}
