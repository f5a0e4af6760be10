import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where a credential may be sent: over TLS to any host, or in plain HTTP only to this machine,
/// named by a loopback IP literal (127.0.0.0/8, `::1`) or exactly `localhost` (RFC 6749 §3.2,
/// RFC 8252 §8.3). Never to a URL that carries user information.
///
/// Host names are compared as literals, never resolved and never by prefix:
/// `127.evil.example`, `127.0.0.1.nip.io`, `localhost.example`, `0x7f.1` and `127.1` are names
/// (or non-canonical numbers) that a resolver may send anywhere, so plain HTTP to them is refused.
///
/// ```swift
/// try EndpointRule.check(URL(string: "http://127.0.0.1:8080/token")!)   // fine
/// try EndpointRule.check(URL(string: "http://127.0.0.1.nip.io/token")!) // throws
/// ```
public enum EndpointRule {
    /// Why `url` may not receive a credential; nil when it may.
    public static func violation(_ url: URL) -> String? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased()
        else {
            return "it is not an absolute URL"
        }
        if components.user != nil || components.password != nil || components.percentEncodedUser != nil {
            return "it carries user information (user@host), which hides the host a credential would reach"
        }
        guard let host = components.host, !host.isEmpty else { return "it names no host" }
        switch scheme {
        case "https":
            return nil
        case "http":
            return isLoopbackLiteral(host)
                ? nil
                : "plain http is allowed only to this machine by loopback IP literal (127.0.0.0/8, [::1]) or exactly localhost; use https"
        default:
            return "its scheme is \(scheme), not https"
        }
    }

    /// Throws ``EndpointError`` naming the rule when `url` may not receive a credential.
    public static func check(_ url: URL, role: String = "endpoint") throws(EndpointError) {
        if let reason = violation(url) { throw EndpointError(role: role, reason: reason) }
    }

    /// Whether `host` is exactly `localhost`, a canonical dotted-quad IPv4 literal in
    /// 127.0.0.0/8, or the IPv6 loopback literal (with or without brackets).
    static func isLoopbackLiteral(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            // inet_pton takes only the canonical four-part decimal form: no 127.1, no 0x7f.1.
            return UInt32(bigEndian: v4.s_addr) >> 24 == 127 && host.split(separator: ".").count == 4
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &v6) == 1 else { return false }
        return withUnsafeBytes(of: &v6) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
    }
}

/// An endpoint that may not receive a credential, and why. Names the rule, never a secret.
public struct EndpointError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the URL is for ("token endpoint", "revocation endpoint", "device API").
    public var role: String
    public var reason: String

    public var description: String { "the \(role) is refused: \(reason)" }
}
