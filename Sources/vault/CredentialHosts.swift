import Foundation
import VaultAgent
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultStore

/// Which account's token a git or docker credential request gets: the account whose
/// credential hosts (`vault accounts set-host`) match the request's host, and path prefix when
/// the entry has one (the longest prefix wins). Only https, or http to this machine.
enum CredentialHosts {
    /// `host[:port][/path]` normalised: host lowercase, no scheme, no trailing slash; nil when
    /// it is not one.
    static func normalise(_ text: String) -> String? {
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
    static func pathSegments(_ path: String) -> [String]? {
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
    static func match(
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
    static func entries(_ bindings: [CredentialBinding]) -> [String: String] {
        var byEntry: [String: [(binding: CredentialBinding, entry: String, length: Int)]] = [:]
        for binding in bindings {
            for entry in binding.hosts { byEntry[entry, default: []].append((binding, entry, 0)) }
        }
        return byEntry.compactMapValues { preferred($0)?.effectiveUsername }
    }
}

extension AgentToken {
    /// What the agent (or this command) hands out for `token`.
    init(_ token: AccessToken, username: String? = nil) {
        self.init(
            value: token.value, type: token.tokenType, expiresAt: token.expiresAt, account: token.account.rawValue,
            scopes: token.scopes, username: username)
    }
}

/// The credential helpers' questions, answered in the process that holds the key (the agent,
/// or this command with the vault opened here), from the authenticated rows.
enum CredentialAnswers {
    static func bindings(in opened: OpenedVault) async throws -> [CredentialBinding] {
        try await BlockingWork.run { try opened.vault.accounts.all() }.compactMap(\.credentialBinding)
    }

    /// A token for the account whose binding matches, valid at least `minimumValidity`; nil when none does.
    static func credential(
        in opened: OpenedVault, scheme: String, host: String, path: String?, username: String?,
        minimumValidity: Duration
    ) async throws -> AgentToken? {
        let bindings = try await bindings(in: opened)
        guard let binding = CredentialHosts.match(bindings, scheme: scheme, host: host, path: path, username: username) else { return nil }
        let token = try await opened.session.validAccessToken(for: binding.account, minimumValidity: minimumValidity)
        return AgentToken(token, username: binding.effectiveUsername)
    }

    /// Every credential host and the user name a request without one gets there.
    static func hosts(in opened: OpenedVault) async throws -> [String: String] {
        CredentialHosts.entries(try await bindings(in: opened))
    }

    /// An API (git, docker) refused `presented`: when it is the matching account's current
    /// token, refresh once. Nil: the current token, whichever it is (docker logout names none);
    /// then an authenticated binding must match, else `.noRecord` (the file's unauthenticated
    /// bindings that let the request through decide nothing).
    static func unauthorized(in opened: OpenedVault, scheme: String, host: String, path: String?, username: String?, presented: String?) async throws {
        let bindings = try await bindings(in: opened)
        guard let binding = CredentialHosts.match(bindings, scheme: scheme, host: host, path: path, username: username) else {
            if presented == nil { throw CommandFailure(.noRecord, "no account of the vault is bound to \(host)") }
            return  // git's erase of a credential the vault never gave: nothing to do
        }
        guard let presented else {
            try await opened.session.reportCurrentTokenUnauthorized(for: binding.account)
            return
        }
        let current = try await opened.session.validAccessToken(for: binding.account)
        if !ConstantTime.equals(current.value, presented) { return }  // not ours, or already replaced
        _ = try await opened.session.reportUnauthorized(current)
    }
}

/// A request asked of the vault's agent when one serves it (no passphrase, no key derivation),
/// else answered with the vault opened here: `vault token`, `exec` and the credential helpers.
struct AgentOrVault {
    var global: GlobalOptions
    var credentials: CredentialOptions
    var noAgent: Bool

    /// `request` to the agent, else `direct` with the vault opened here. `unless`, when given,
    /// is asked first without the key (of the file's unauthenticated bindings): true answers
    /// nil, with no agent and no passphrase needed.
    func send(
        _ request: AgentRequest, unless nothingMatches: ([CredentialBinding]) -> Bool,
        direct: (OpenedVault) async throws -> AgentResponse
    ) async throws -> AgentResponse? {
        let (url, options) = (global.url, global.storeOptions())
        if let bindings = try? await BlockingWork.run({ try Vault.inspectCredentialBindings(at: url, options: options) }), nothingMatches(bindings) {
            return nil
        }
        return try await send(request, direct: direct)
    }

    /// `request` to the agent, else `direct` with the vault opened here.
    func send(_ request: AgentRequest, direct: (OpenedVault) async throws -> AgentResponse) async throws -> AgentResponse {
        if !noAgent {
            do {
                return try await AgentClient(vault: global.url).send(request)
            } catch let failure as AgentFailure {
                throw CommandFailure(failure)
            } catch AgentConnectionError.notRunning {
                // No agent: open the vault here.
            } catch let error as AgentConnectionError {
                if case .badAnswer = error {
                    Terminal.printError("vault: warning: \(error); opening the vault directly")
                } else {
                    // Something else answers in the agent's place, or the place fails a check:
                    // refused, never worked around behind the user's back.
                    throw CommandFailure(error)
                }
            } catch {
                Terminal.printError("vault: warning: \(error); opening the vault directly")
            }
        }
        return try await OpenedVault.with(global, credentials, direct)
    }

    /// The token for a git or docker request; nil when no binding matches (decided without the
    /// key when the file binds nothing that matches: no agent, no passphrase).
    func credential(scheme: String, host: String, path: String?, username: String?) async throws -> AgentToken? {
        var request = AgentRequest(.credential, minTTL: 60)
        (request.protocol, request.host, request.path, request.username) = (scheme, host, path, username)
        let nothingMatches = { CredentialHosts.match($0, scheme: scheme, host: host, path: path, username: username) == nil }
        let token = try await send(request, unless: nothingMatches) { opened in
            AgentResponse(
                token: try await CredentialAnswers.credential(
                    in: opened, scheme: scheme, host: host, path: path, username: username,
                    minimumValidity: .seconds(60)))
        }?.token
        // An agent older than this command ignores `username`: its answer for another user is none.
        if let username, let token, token.username != username { return nil }
        return token
    }

    /// Reports `presented` (nil: the current token) refused; false when the file binds nothing
    /// that matches (decided without the key), so nothing was asked.
    @discardableResult
    func unauthorized(scheme: String, host: String, path: String?, username: String?, presented: String?) async throws -> Bool {
        var request = AgentRequest(.unauthorized)
        (request.protocol, request.host, request.path, request.username, request.presented) = (scheme, host, path, username, presented)
        let nothingMatches = { CredentialHosts.match($0, scheme: scheme, host: host, path: path, username: username) == nil }
        return try await send(request, unless: nothingMatches) { opened in
            try await CredentialAnswers.unauthorized(in: opened, scheme: scheme, host: host, path: path, username: username, presented: presented)
            return AgentResponse()
        } != nil
    }

    func hosts() async throws -> [String: String] {
        try await send(AgentRequest(.hosts)) { opened in AgentResponse(hosts: try await CredentialAnswers.hosts(in: opened)) }.hosts ?? [:]
    }
}
