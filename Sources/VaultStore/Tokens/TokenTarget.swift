import Foundation

/// What an access token is for: the APIs it is sent to (RFC 8707 resource indicators) and the
/// scopes it carries. An account's own token has the empty target (the grant's scope, whatever
/// audience the server gives it); any other target is obtained from the account's one refresh
/// token and kept beside it.
///
/// Resources and scopes are kept sorted and without repeats, so the same target asked in
/// another order is the same token.
///
/// ```swift
/// let files = try TokenTarget(resources: ["https://files.example.com/"], scopes: ["files.read"])
/// let token = try await session.validAccessToken(for: account, target: files)
/// ```
public struct TokenTarget: Sendable, Hashable, CustomStringConvertible {
    /// RFC 8707 resource indicators: absolute URIs without a fragment, sorted.
    public let resources: [String]
    /// The scopes asked for (RFC 6749 §3.3 scope tokens), sorted; empty asks for the grant's.
    public let scopes: [String]

    /// The account's own token.
    public static let account = TokenTarget(checked: [], scopes: [])

    /// Checks and orders a target. Throws ``TokenTargetError`` for a resource that is not an
    /// absolute URI or carries a fragment (RFC 8707 §2), or a scope that is not a scope token.
    public init(resources: [String] = [], scopes: [String] = []) throws(TokenTargetError) {
        for resource in resources {
            if let reason = Self.problem(resource: resource) { throw TokenTargetError(resource: resource, reason: reason) }
        }
        for scope in scopes where !Self.isScopeToken(scope) {
            throw TokenTargetError(scope: scope)
        }
        self.init(checked: Array(Set(resources)).sorted(), scopes: Array(Set(scopes)).sorted())
    }

    private init(checked resources: [String], scopes: [String]) {
        self.resources = resources
        self.scopes = scopes
    }

    /// Whether this is the account's own token (no resource, no scope asked for).
    public var isAccount: Bool { resources.isEmpty && scopes.isEmpty }

    /// `resource https://a/ https://b/ scope x y`, or `account`.
    public var description: String {
        guard !isAccount else { return "account" }
        var parts: [String] = []
        if !resources.isEmpty { parts.append("resource " + resources.joined(separator: " ")) }
        if !scopes.isEmpty { parts.append("scope " + scopes.joined(separator: " ")) }
        return parts.joined(separator: " ")
    }

    // MARK: Stored form

    /// The `resources` column: one per line (a URI holds no line break).
    var storedResources: String { resources.joined(separator: "\n") }
    /// The `scopes` column: space-separated.
    var storedScopes: String { scopes.joined(separator: " ") }

    /// The target a row's columns name; nil when they are not in the stored form (sorted,
    /// unique, valid): a row the vault did not write that way.
    init?(storedResources: String, storedScopes: String) {
        let resources = storedResources.isEmpty ? [] : storedResources.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let scopes = storedScopes.isEmpty ? [] : storedScopes.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard let target = try? TokenTarget(resources: resources, scopes: scopes), target.resources == resources, target.scopes == scopes
        else { return nil }
        self = target
    }

    // MARK: Rules

    /// Why `resource` cannot be a resource indicator; nil when it can.
    static func problem(resource: String) -> String? {
        guard !resource.isEmpty, resource.utf8.count <= 2048 else { return "is empty or longer than 2048 bytes" }
        guard resource.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            return "holds spaces, control characters or characters outside ASCII (percent-encode them)"
        }
        guard let components = URLComponents(string: resource), let scheme = components.scheme, !scheme.isEmpty else {
            return "is not an absolute URI"
        }
        guard components.fragment == nil, !resource.contains("#") else { return "has a fragment, which RFC 8707 forbids" }
        return nil
    }

    /// RFC 6749 §3.3: `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`.
    static func isScopeToken(_ scope: String) -> Bool {
        !scope.isEmpty && scope.utf8.count <= 512
            && scope.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
    }
}

/// A resource indicator or scope that cannot be asked for, and why.
public struct TokenTargetError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The value refused (a resource URI or a scope: neither is a secret).
    public var value: String
    public var reason: String

    init(resource: String, reason: String) {
        value = resource
        self.reason = "resource \(resource) \(reason)"
    }

    init(scope: String) {
        value = scope
        reason = "scope \(scope) is not a scope token (RFC 6749 §3.3: printable ASCII without spaces, quotes or backslashes)"
    }

    public var description: String { reason }
}
