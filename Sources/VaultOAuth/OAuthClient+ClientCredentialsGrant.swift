import Foundation

// MARK: - Client credentials grant (RFC 6749 §4.4)

extension OAuthClient {
    /// Obtains an access token for the client itself (RFC 6749 §4.4): no user, no refresh
    /// token expected (§4.4.3) — ask again when the token is due.
    ///
    /// Sends `grant_type=client_credentials[&scope=…][&resource=…]…` with the client's
    /// authentication, which must be a confidential client's (a secret, Basic or in the body,
    /// or a signed assertion, RFC 7523): a public client cannot use this grant, and is refused
    /// here with nothing sent. Errors are classified by ``RefreshError``; `invalid_grant`, which
    /// this grant has no grant for, is reported as the client's (``RefreshError/clientMisconfigured(code:description:)``),
    /// as is `invalid_client`.
    ///
    /// ```swift
    /// let client = ClientCredentials(clientID: "backup", authentication: .clientSecretPost(ClientSecret(secret)))
    /// let tokens = try await oauth.clientCredentialsGrant(scope: "backup:write", endpoint: tokenURL, client: client)
    /// ```
    public func clientCredentialsGrant(
        scope: String? = nil,
        resources: [String] = [],
        endpoint: URL,
        client: ClientCredentials,
        pins: [SPKIPin] = [],
        deadline: Duration? = nil
    ) async throws(RefreshError) -> TokenResponse {
        if case .none = client.authentication {
            throw .clientMisconfigured(
                code: "invalid_client", description: "the client credentials grant needs a confidential client (a secret or a signing key)")
        }
        var form = [("grant_type", "client_credentials")]
        if let scope { form.append(("scope", scope)) }
        form += resources.map { ("resource", $0) }
        do {
            return try await tokenRequest(
                grantType: "client_credentials", form: form, endpoint: endpoint, client: client, pins: pins, deadline: deadline, secrets: [])
        } catch .invalidGrant(let description) {
            throw .clientMisconfigured(code: "invalid_grant", description: description)
        }
    }
}
