import AgentWire
import Foundation
import VaultAgent
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultStore

extension AgentToken {
    /// What the agent (or this command) hands out for `token`.
    init(_ token: AccessToken, username: String? = nil) {
        self.init(
            value: token.value, type: token.tokenType, expiresAt: token.expiresAt, account: token.account.rawValue,
            scopes: token.scopes, username: username)
        resources = token.target.resources
        requestedScopes = token.target.scopes
    }
}

/// The credential helpers' questions, answered in the process that holds the key (the agent,
/// or this command with the vault opened here): the library decides (``SessionService``'s
/// credential-helper calls), this only wraps the answer for the agent protocol.
enum CredentialAnswers {
    /// A token for the account whose binding matches, valid at least `minimumValidity`; nil when none does.
    static func credential(in opened: OpenedVault, _ request: CredentialRequest, minimumValidity: Duration) async throws -> AgentToken? {
        try await opened.session.credential(for: request, minimumValidity: minimumValidity).map { AgentToken($0.token, username: $0.username) }
    }
}

/// A request asked of the vault's agent when one serves it (no passphrase, no key derivation),
/// else answered with the vault opened here: `vault token`, `exec` and the credential helpers.
struct AgentOrVault {
    var global: GlobalOptions
    var credentials: CredentialOptions
    var noAgent: Bool
    /// Where a locked agent may ask for the passphrase (pinentry); nil: it refuses at once.
    var terminal: RequesterTerminal? = RequesterTerminal.current()

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
            var request = request
            if request.terminal == nil { request.terminal = terminal }
            do {
                return try await AgentClient(vault: global.url).send(request)
            } catch let failure as AgentFailure where failure.code == "unknown_op" {
                throw CommandFailure(
                    .failure,
                    "the agent serving \(global.url.path) predates `\(request.op.rawValue)`: restart it (`vault agent stop`, then `vault agent start`) or use --no-agent"
                )
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
        let asked = CredentialRequest(scheme: scheme, host: host, path: path, username: username)
        let nothingMatches = { CredentialHosts.match($0, asked) == nil }
        let token = try await send(request, unless: nothingMatches) { opened in
            AgentResponse(token: try await CredentialAnswers.credential(in: opened, asked, minimumValidity: .seconds(60)))
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
        let asked = CredentialRequest(scheme: scheme, host: host, path: path, username: username)
        let nothingMatches = { CredentialHosts.match($0, asked) == nil }
        return try await send(request, unless: nothingMatches) { opened in
            try await opened.session.reportRefused(asked, presented: presented)
            return AgentResponse()
        } != nil
    }

    func hosts() async throws -> [String: String] {
        try await send(AgentRequest(.hosts)) { opened in AgentResponse(hosts: try await opened.session.credentialHosts()) }.hosts ?? [:]
    }
}
