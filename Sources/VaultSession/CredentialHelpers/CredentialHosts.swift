import Foundation
import VaultOAuth
import VaultStore

/// Which account's token a git or docker credential request gets: the account whose
/// credential hosts match the request's host, and path prefix when the entry has one (the
/// longest prefix wins). Only https, or http to this machine.
///
/// The rules a credential helper must not get wrong live here, with their tests: a path is
/// matched as the server resolves it (`team/../other` is `other`), a user name picks among
/// accounts sharing an entry, and plain http goes nowhere but loopback.
///
/// ```swift
/// let bindings = try await service.credentialBindings()
/// if let binding = CredentialHosts.match(bindings, scheme: "https", host: "git.example", path: "team/repo", username: nil) {
///     print(binding.account, binding.effectiveUsername)
/// }
/// ```
public enum CredentialHosts {
    /// `host[:port][/path]` normalised: host lowercase, no scheme, no trailing slash; nil when
    /// it is not one.
    public static func normalise(_ text: String) -> String? {
        var rest = text.trimmingCharacters(in: .whitespaces)
        for scheme in ["https://", "http://"] where rest.lowercased().hasPrefix(scheme) { rest = String(rest.dropFirst(scheme.count)) }
        let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let authority = parts.first?.lowercased(), !authority.isEmpty,
            authority.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" || $0 == "[" || $0 == "]") })
        else { return nil }
        guard let segments = pathSegments(parts.count > 1 ? String(parts[1]) : "") else { return nil }
        let path = segments.joined(separator: "/")
        guard path.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else { return nil }
        return path.isEmpty ? authority : "\(authority)/\(path)"
    }

    /// The segments of `path` as a server resolves them: percent-encoding decoded once, empty
    /// and `.` segments dropped, `..` taking the one before away. Nil when it climbs above its
    /// root, is not valid percent-encoded UTF-8, or still holds an encoded octet after
    /// decoding (`%252e`: a server decoding twice would see `.`).
    public static func pathSegments(_ path: String) -> [String]? {
        guard let decoded = path.removingPercentEncoding ?? (path.contains("%") ? nil : path) else { return nil }
        if decoded.range(of: "%[0-9A-Fa-f]{2}", options: .regularExpression) != nil { return nil }
        var segments: [String] = []
        for segment in decoded.split(separator: "/", omittingEmptySubsequences: true) {
            switch segment {
            case ".": continue
            case "..":
                guard !segments.isEmpty else { return nil }
                segments.removeLast()
            default: segments.append(String(segment))
            }
        }
        return segments
    }

    /// The binding that answers a request for `host` (and `path`) over `scheme`, or nil.
    ///
    /// The entries matching the host and, when they have one, a prefix of the path; with
    /// `username`, only those of an account answering as that user. The longest prefix wins;
    /// among accounts sharing that entry, the one marked its default (`set-host --default`;
    /// the first account bound to it), else the oldest account.
    public static func match(
        _ bindings: [CredentialBinding], scheme: String, host: String, path: String?, username: String?
    ) -> CredentialBinding? {
        let host = host.lowercased()
        let scheme = scheme.lowercased()
        guard scheme == "https" || (scheme == "http" && EndpointRule.violation(URL(string: "http://\(host)/") ?? URL(fileURLWithPath: "/")) == nil)
        else { return nil }
        // Matched on the path the server will resolve: `team/../other` is `other`, never `team`.
        guard let requestPath = pathSegments(path ?? "") else { return nil }
        var candidates: [(binding: CredentialBinding, entry: String, length: Int)] = []
        for binding in bindings where username == nil || binding.effectiveUsername == username {
            for entry in binding.hosts {
                let parts = entry.split(separator: "/", maxSplits: 1)
                guard parts.first.map(String.init) == host else { continue }
                guard let prefix = pathSegments(parts.count > 1 ? String(parts[1]) : "") else { continue }
                guard requestPath.starts(with: prefix) else { continue }
                candidates.append((binding, entry, prefix.count))
            }
        }
        guard let longest = candidates.map(\.length).max() else { return nil }
        return preferred(candidates.filter { $0.length == longest })
    }

    /// One of several bindings on the same entry: the one marked its default, else the oldest.
    static func preferred(_ candidates: [(binding: CredentialBinding, entry: String, length: Int)]) -> CredentialBinding? {
        if candidates.count <= 1 { return candidates.first?.binding }
        if let marked = candidates.first(where: { $0.binding.defaultHosts.contains($0.entry) }) { return marked.binding }
        return candidates.min { ($0.binding.createdAt ?? .distantFuture, $0.binding.account) < ($1.binding.createdAt ?? .distantFuture, $1.binding.account) }?
            .binding
    }

    /// Every entry and the user name a request without one gets there (its default's).
    public static func entries(_ bindings: [CredentialBinding]) -> [String: String] {
        var byEntry: [String: [(binding: CredentialBinding, entry: String, length: Int)]] = [:]
        for binding in bindings {
            for entry in binding.hosts { byEntry[entry, default: []].append((binding, entry, 0)) }
        }
        return byEntry.compactMapValues { preferred($0)?.effectiveUsername }
    }
}
