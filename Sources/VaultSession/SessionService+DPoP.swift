import Foundation
import VaultOAuth
import VaultStore

extension SessionService {
    /// A DPoP proof (RFC 9449 §4.2) for one request of the tool's own to an API, signed with
    /// the key the account's tokens are bound to (the active account's by default): `ath` binds
    /// it to `accessToken`, `nonce` is the one the API last sent (`DPoP-Nonce`). The key never
    /// leaves the vault (or the agent, which signs for its clients). Throws
    /// ``SessionError/clientMisconfigured(_:code:description:)`` (`not_dpop`) for an account
    /// with bearer tokens.
    ///
    /// ```swift
    /// let token = try await session.validAccessToken()
    /// var request = URLRequest(url: api)
    /// request.setValue(token.authorizationHeader, forHTTPHeaderField: "Authorization")   // "DPoP …"
    /// request.setValue(try await session.dpopProof(method: "GET", url: api, accessToken: token), forHTTPHeaderField: "DPoP")
    /// ```
    public func dpopProof(
        for account: AccountID? = nil, method: String, url: URL, accessToken: AccessToken? = nil, nonce: String? = nil
    ) async throws -> String {
        guard let id = try await accountOrActive(account ?? accessToken?.account) else { throw SessionError.noActiveAccount }
        if let accessToken, accessToken.account != id { throw SessionError.accountChanged(from: accessToken.account, to: id) }
        let key = try await provingKey(id)
        return try key.proof(method: method, url: url, accessToken: accessToken?.value, nonce: nonce, now: now())
    }

    /// A valid token and a proof naming it (`ath`) for one request, together: what a script
    /// needs for a DPoP request (`vault dpop-proof --json`, the agent's `dpop_proof`). The
    /// account is checked for a key before any token is obtained, so a bearer account fails
    /// (`not_dpop`) without a refresh. `target` and `minimumValidity` as for
    /// ``validAccessToken(for:target:minimumValidity:)``.
    public func dpopRequest(
        for account: AccountID? = nil, target: TokenTarget = .account, minimumValidity: Duration? = nil, method: String, url: URL,
        nonce: String? = nil
    ) async throws -> (token: AccessToken, proof: String) {
        guard let id = try await accountOrActive(account) else { throw SessionError.noActiveAccount }
        try DPoPRequestError.check(method: method, url: url)
        let key = try await provingKey(id)
        let token =
            if let minimumValidity {
                try await validAccessToken(for: id, target: target, minimumValidity: minimumValidity)
            } else {
                try await validAccessToken(for: id, target: target)
            }
        return (token, try key.proof(method: method, url: url, accessToken: token.value, nonce: nonce, now: now()))
    }

    /// The key `id`'s tokens are bound to, once its session is found servable; `not_dpop` for
    /// bearer tokens.
    private func provingKey(_ id: AccountID) async throws -> DPoPKey {
        _ = try await servableSession(id)
        guard let stored = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else { throw SessionError.notSignedIn(id) }
        guard let key = try await dpopKey(of: stored) else {
            throw SessionError.clientMisconfigured(id, code: "not_dpop", description: "the account's tokens are bearer tokens: there is no key to prove")
        }
        return key
    }

    /// The thumbprint (RFC 7638) of the key the account's tokens are bound to, or nil for
    /// bearer tokens.
    public func dpopThumbprint(for account: AccountID? = nil) async throws -> String? {
        guard let id = try await accountOrActive(account) else { throw SessionError.noActiveAccount }
        guard let stored = try await vaultCall({ [vault] in try vault.accounts.find(id) }) else { throw SessionError.notSignedIn(id) }
        return try await dpopKey(of: stored)?.thumbprint
    }
}
