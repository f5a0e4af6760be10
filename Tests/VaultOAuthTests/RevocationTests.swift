import DevGateway
import Foundation
import Testing
import VaultOAuth

@Suite("Revocation against the dev gateway")
struct RevocationTests {
    @Test("revoking the refresh token ends the grant: the next refresh is invalid_grant")
    func revokeThenRefresh() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
            let token = try issued.requiredRefreshToken
            let (client, transport) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-cli")

            try await client.revoke(token: token, hint: .refreshToken, endpoint: gateway.revocationEndpoint, client: credentials)
            #expect(
                transport.requests.first?.formParameters == [
                    "token": token, "token_type_hint": "refresh_token", "client_id": "vault-cli",
                ])

            let error = await refreshFailure(client, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(error?.isInvalidGrant == true)
        }
    }

    @Test("revoking an access token also ends its grant; an unknown or repeated revocation succeeds")
    func revokeAccessTokenAndUnknownTokens() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "bob", clientID: "vault-sync", clientSecret: "s3cr3t")
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret("s3cr3t")))

            try await client.revoke(token: issued.accessToken, hint: .accessToken, endpoint: gateway.revocationEndpoint, client: credentials)
            try await client.revoke(token: issued.accessToken, hint: .accessToken, endpoint: gateway.revocationEndpoint, client: credentials)
            try await client.revoke(token: "at_unknown", hint: .accessToken, endpoint: gateway.revocationEndpoint, client: credentials)

            let error = await refreshFailure(client, refreshToken: try issued.requiredRefreshToken, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(error?.isInvalidGrant == true)
        }
    }

    @Test("an admin sign-out revokes the subject's grants")
    func adminSignOut() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "carol", clientID: "vault-cli")
            #expect(await gateway.revokeGrants(subject: "carol") == 1)
            let (client, _) = makeClient()
            let error = await refreshFailure(
                client, refreshToken: try issued.requiredRefreshToken, endpoint: gateway.tokenEndpoint, credentials: ClientCredentials(clientID: "vault-cli"))
            #expect(error?.isInvalidGrant == true)
        }
    }

    @Test("a 503 from the revocation endpoint is transient and leaves the token valid")
    func unavailableRevocationIsTransient() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "dave", clientID: "vault-cli")
            let token = try issued.requiredRefreshToken
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-cli")
            await gateway.failNextRevocationRequests(with: TokenFault(status: 503, retryAfter: 5))

            do throws(RevocationError) {
                try await client.revoke(token: token, hint: .refreshToken, endpoint: gateway.revocationEndpoint, client: credentials)
                Issue.record("revocation unexpectedly succeeded")
            } catch {
                #expect(error == .transient(.server(status: 503, retryAfter: .seconds(5))))
                #expect(error.isTransient)
            }
            let refreshed = try await client.refresh(refreshToken: token, endpoint: gateway.tokenEndpoint, client: credentials)
            #expect(refreshed.refreshToken != nil)
        }
    }

    @Test("unsupported_token_type is reported as such")
    func unsupportedTokenType() async throws {
        try await withGateway { gateway in
            _ = await gateway.issueGrant(subject: "erin", clientID: "vault-cli")
            await gateway.failNextRevocationRequests(with: TokenFault(status: 400, error: "unsupported_token_type"))
            let (client, _) = makeClient()
            do throws(RevocationError) {
                try await client.revoke(
                    token: "at_x", hint: .accessToken, endpoint: gateway.revocationEndpoint, client: ClientCredentials(clientID: "vault-cli"))
                Issue.record("revocation unexpectedly succeeded")
            } catch {
                #expect(error == .unsupportedTokenType)
            }
        }
    }
}
