import Foundation
import VaultCrypto
import VaultOAuth
import VaultStore

/// What a git or docker credential helper asks for: a host (and path) over a scheme, maybe
/// for one user name.
public struct CredentialRequest: Sendable, Hashable {
    public var scheme: String
    public var host: String
    public var path: String?
    public var username: String?

    public init(scheme: String, host: String, path: String? = nil, username: String? = nil) {
        self.scheme = scheme
        self.host = host
        self.path = path
        self.username = username
    }
}

// MARK: - Credential helpers (git, docker)

extension SessionService {
    /// Every account's credential-helper binding, from the authenticated rows (an edited
    /// binding is `.damaged`, never matched).
    public func credentialBindings() async throws -> [CredentialBinding] {
        try await vaultCall { [vault] in try vault.accounts.all() }.compactMap(\.credentialBinding)
    }

    /// The token for the account whose binding matches `request` (``CredentialHosts/match(_:scheme:host:path:username:)``),
    /// valid for at least `minimumValidity`, and the user name to answer with; nil when no
    /// binding matches.
    ///
    /// ```swift
    /// let request = CredentialRequest(scheme: "https", host: "git.example", path: "team/repo")
    /// if let (token, username) = try await service.credential(for: request, minimumValidity: .seconds(60)) { … }
    /// ```
    public func credential(
        for request: CredentialRequest, minimumValidity: Duration
    ) async throws -> (token: AccessToken, username: String)? {
        let bindings = try await credentialBindings()
        guard let binding = CredentialHosts.match(bindings, request) else { return nil }
        let token = try await validAccessToken(for: binding.account, target: binding.target, minimumValidity: minimumValidity)
        return (token, binding.effectiveUsername)
    }

    /// A git or docker API refused `presented`, a token given for `request`: when it is the
    /// matching account's current token, it is reported unauthorized (``reportUnauthorized(_:)``:
    /// refreshed once, or the session ends). A token the vault did not give, or already
    /// replaced, changes nothing. `presented` nil (docker's erase names no token): the matching
    /// account's current token, whichever it is.
    ///
    /// Decided on the authenticated bindings only. With `presented` nil and nothing matching,
    /// throws `VaultError.Code.recordNotFound`: the unauthenticated bindings that let the
    /// request through decide nothing.
    public func reportRefused(_ request: CredentialRequest, presented: String?) async throws {
        let bindings = try await credentialBindings()
        guard let binding = CredentialHosts.match(bindings, request) else {
            if presented == nil {
                throw SessionError.vault(VaultError(.recordNotFound, "no account of the vault is bound to \(request.host)"))
            }
            return  // git's erase of a credential the vault never gave: nothing to do
        }
        guard let presented else {
            if binding.target.isAccount {
                try await reportCurrentTokenUnauthorized(for: binding.account)
            } else if let stored = try await vaultCall({ [vault] in try vault.tokens.token(for: binding.account, target: binding.target) }) {
                _ = try await reportUnauthorized(AccessToken(stored))
            }
            return
        }
        let current = try await validAccessToken(for: binding.account, target: binding.target)
        if !ConstantTime.equals(current.value, presented) { return }  // not ours, or already replaced
        _ = try await reportUnauthorized(current)
    }

    /// Every credential-helper entry and the user name a request without one gets there.
    public func credentialHosts() async throws -> [String: String] {
        CredentialHosts.entries(try await credentialBindings())
    }
}

extension CredentialHosts {
    /// ``match(_:scheme:host:path:username:)`` for a ``CredentialRequest``.
    public static func match(_ bindings: [CredentialBinding], _ request: CredentialRequest) -> CredentialBinding? {
        match(bindings, scheme: request.scheme, host: request.host, path: request.path, username: request.username)
    }
}
