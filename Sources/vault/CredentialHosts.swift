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

    /// The account to answer `host` (and `path`) over `scheme`, or nil.
    static func match(_ accounts: [Account], scheme: String, host: String, path: String?) -> Account? {
        let host = host.lowercased()
        let scheme = scheme.lowercased()
        guard scheme == "https" || (scheme == "http" && EndpointRule.violation(URL(string: "http://\(host)/") ?? URL(fileURLWithPath: "/")) == nil)
        else { return nil }
        // Matched on the path the server will resolve: `team/../other` is `other`, never `team`.
        guard let requestPath = pathSegments(path ?? "") else { return nil }
        var best: (account: Account, length: Int)?
        for account in accounts where account.upgradedTo == nil {
            for entry in account.credentialHosts {
                let parts = entry.split(separator: "/", maxSplits: 1)
                guard parts.first.map(String.init) == host else { continue }
                guard let prefix = pathSegments(parts.count > 1 ? String(parts[1]) : "") else { continue }
                guard requestPath.starts(with: prefix) else { continue }
                if best == nil || prefix.count > (best?.length ?? -1) { best = (account, prefix.count) }
            }
        }
        return best?.account
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

/// The credential helpers' two questions, answered in the process that holds the key (the
/// agent, or this command with the vault opened here).
enum CredentialAnswers {
    /// A token for the account whose hosts match, valid at least `minimumValidity`; nil when none matches.
    static func credential(
        in opened: OpenedVault, scheme: String, host: String, path: String?,
        minimumValidity: Duration
    ) async throws -> AgentToken? {
        let accounts = try await OpenedVault.blocking { try opened.vault.accounts() }
        guard let account = CredentialHosts.match(accounts, scheme: scheme, host: host, path: path) else { return nil }
        let token = try await opened.session.validAccessToken(for: account.id, minimumValidity: minimumValidity)
        return AgentToken(token, username: account.credentialUsername ?? "oauth2")
    }

    /// Every credential host and the user name it answers with.
    static func hosts(in opened: OpenedVault) async throws -> [String: String] {
        var hosts: [String: String] = [:]
        for account in try await OpenedVault.blocking({ try opened.vault.accounts() }) where account.upgradedTo == nil {
            for host in account.credentialHosts { hosts[host] = account.credentialUsername ?? "oauth2" }
        }
        return hosts
    }

    /// An API (git, docker) refused `presented`: when it is the account's current token, refresh once.
    static func unauthorized(in opened: OpenedVault, scheme: String, host: String, path: String?, presented: String) async throws {
        let accounts = try await OpenedVault.blocking { try opened.vault.accounts() }
        guard let account = CredentialHosts.match(accounts, scheme: scheme, host: host, path: path) else { return }
        let current = try await opened.session.validAccessToken(for: account.id)
        guard ConstantTime.equals(current.value, presented) else { return }  // not ours, or already replaced
        _ = try await opened.session.reportUnauthorized(current)
    }
}

/// A request asked of the vault's agent when one serves it (no passphrase, no key derivation),
/// else answered with the vault opened here: `vault token`, `exec` and the credential helpers.
struct AgentOrVault {
    var global: GlobalOptions
    var credentials: CredentialOptions
    var noAgent: Bool

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

    func credential(scheme: String, host: String, path: String?) async throws -> AgentToken? {
        var request = AgentRequest(.credential, minTTL: 60)
        (request.protocol, request.host, request.path) = (scheme, host, path)
        return try await send(request) { opened in
            AgentResponse(
                token: try await CredentialAnswers.credential(
                    in: opened, scheme: scheme, host: host, path: path,
                    minimumValidity: .seconds(60)))
        }.token
    }

    func unauthorized(scheme: String, host: String, path: String?, presented: String) async throws {
        var request = AgentRequest(.unauthorized)
        (request.protocol, request.host, request.path, request.presented) = (scheme, host, path, presented)
        _ = try await send(request) { opened in
            try await CredentialAnswers.unauthorized(in: opened, scheme: scheme, host: host, path: path, presented: presented)
            return AgentResponse()
        }
    }

    func hosts() async throws -> [String: String] {
        try await send(AgentRequest(.hosts)) { opened in AgentResponse(hosts: try await CredentialAnswers.hosts(in: opened)) }.hosts ?? [:]
    }
}
