import DevGateway
import Foundation
import Testing

@testable import VaultOAuth

@Suite("Refresh against the dev gateway")
struct RefreshTests {
    @Test("a refresh rotates the token; presenting the old one again revokes the whole family")
    func rotationAndReuseDetection() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
            let original = try issued.requiredRefreshToken
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-cli")

            let refreshed = try await client.refresh(refreshToken: original, endpoint: gateway.tokenEndpoint, client: credentials)
            let rotated = try #require(refreshed.refreshToken)
            #expect(rotated != original)
            #expect(refreshed.accessToken != issued.accessToken)
            #expect(refreshed.isBearer)
            #expect(refreshed.expiresIn == 3600)
            #expect(refreshed.scope == "openid profile")

            let reuse = await refreshFailure(client, refreshToken: original, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(reuse?.isInvalidGrant == true)
            #expect(await gateway.reuseDetections() == 1)

            // The family is revoked: even the legitimately rotated token is dead now.
            let afterReuse = await refreshFailure(client, refreshToken: rotated, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(afterReuse?.isInvalidGrant == true)
            #expect(await gateway.presentedRefreshTokens() == [original, original, rotated])
        }
    }

    @Test("without rotation the server returns no refresh token and the old one keeps working")
    func noRotationKeepsTheOldToken() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "bob", clientID: "vault-cli", rotatesRefreshTokens: false)
            let token = try issued.requiredRefreshToken
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-cli")

            let first = try await client.refresh(refreshToken: token, endpoint: gateway.tokenEndpoint, client: credentials)
            #expect(first.refreshToken == nil)
            let second = try await client.refresh(refreshToken: token, endpoint: gateway.tokenEndpoint, client: credentials)
            #expect(second.accessToken != first.accessToken)
            #expect(await gateway.reuseDetections() == 0)
        }
    }

    @Test("a public client sends client_id in the body and no Authorization header")
    func publicClientAuthentication() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "carol", clientID: "vault-cli")
            let (client, transport) = makeClient()

            _ = try await client.refresh(
                refreshToken: try issued.requiredRefreshToken,
                endpoint: gateway.tokenEndpoint,
                client: ClientCredentials(clientID: "vault-cli")
            )

            let sent = try #require(transport.requests.first)
            #expect(sent.headers["authorization"] == nil)
            #expect(sent.headers["Content-Type"] == "application/x-www-form-urlencoded")
            #expect(sent.headers["Accept"] == "application/json")
            #expect(
                sent.formParameters == [
                    "grant_type": "refresh_token",
                    "refresh_token": try issued.requiredRefreshToken,
                    "client_id": "vault-cli",
                ])
        }
    }

    @Test("a confidential client authenticates with HTTP Basic; a wrong secret is invalid_client")
    func confidentialClientAuthentication() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "dave", clientID: "vault-sync", clientSecret: "s3cr3t-value")
            let token = try issued.requiredRefreshToken
            let (client, transport) = makeClient()

            let refreshed = try await client.refresh(
                refreshToken: token,
                endpoint: gateway.tokenEndpoint,
                client: ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret("s3cr3t-value")))
            )
            let sent = try #require(transport.requests.first)
            #expect(sent.headers["Authorization"]?.hasPrefix("Basic ") == true)
            #expect(sent.formParameters["client_id"] == nil)

            let wrongSecret = await refreshFailure(
                client,
                refreshToken: try #require(refreshed.refreshToken),
                endpoint: gateway.tokenEndpoint,
                credentials: ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret("guess")))
            )
            #expect(wrongSecret?.misconfigurationCode == "invalid_client")

            // A confidential client configured as public is rejected the same way, not as a dead grant.
            let noSecret = await refreshFailure(
                client,
                refreshToken: try #require(refreshed.refreshToken),
                endpoint: gateway.tokenEndpoint,
                credentials: ClientCredentials(clientID: "vault-sync")
            )
            #expect(noSecret?.misconfigurationCode == "invalid_client")
            #expect(noSecret?.isTransient == false)
        }
    }

    @Test("client id and secret with reserved characters round-trip through Basic and the form body")
    func reservedCharactersRoundTrip() async throws {
        try await withGateway { gateway in
            let clientID = "app:1+2&x y%z"
            let secret = "p:w+d&s e%c€=/"
            let confidential = await gateway.issueGrant(subject: "erin", clientID: clientID, clientSecret: secret)
            let (client, _) = makeClient()

            let refreshed = try await client.refresh(
                refreshToken: try confidential.requiredRefreshToken,
                endpoint: gateway.tokenEndpoint,
                client: ClientCredentials(clientID: clientID, authentication: .clientSecretBasic(ClientSecret(secret)))
            )
            #expect(refreshed.refreshToken != nil)

            let publicID = "cli&grant_type=password %"
            let publicGrant = await gateway.issueGrant(subject: "erin", clientID: publicID)
            let publicRefresh = try await client.refresh(
                refreshToken: try publicGrant.requiredRefreshToken,
                scope: "openid",
                endpoint: gateway.tokenEndpoint,
                client: ClientCredentials(clientID: publicID)
            )
            #expect(publicRefresh.scope == "openid")
        }
    }

    @Test("form encoding follows RFC 6749 Appendix B, with Basic credentials encoded before base64")
    func formEncodingMatchesTheRFC() throws {
        #expect(FormURLEncoding.encode(" %\"&+£€") == "+%25%22%26%2B%C2%A3%E2%82%AC")
        #expect(FormURLEncoding.encode([("a b", "c=d&e")]) == "a+b=c%3Dd%26e")
        let header = ClientCredentials.basicAuthorization(clientID: "a:b", secret: "c d")
        let decoded = try #require(Data(base64Encoded: String(header.dropFirst("Basic ".count))))
        #expect(String(decoding: decoded, as: UTF8.self) == "a%3Ab:c+d")
    }

    @Test("a narrower scope is granted; a wider one is invalid_scope")
    func scopeNarrowing() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "frank", clientID: "vault-cli", rotatesRefreshTokens: false)
            let token = try issued.requiredRefreshToken
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-cli")

            let narrowed = try await client.refresh(refreshToken: token, scope: "profile", endpoint: gateway.tokenEndpoint, client: credentials)
            #expect(narrowed.scope == "profile")
            let widened = await refreshFailure(client, refreshToken: token, scope: "openid admin", endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(widened?.misconfigurationCode == "invalid_scope")
        }
    }

    @Test("an unknown refresh token is invalid_grant")
    func unknownToken() async throws {
        try await withGateway { gateway in
            _ = await gateway.issueGrant(subject: "gina", clientID: "vault-cli")
            let (client, _) = makeClient()
            let error = await refreshFailure(
                client, refreshToken: "rt_never_issued", endpoint: gateway.tokenEndpoint, credentials: ClientCredentials(clientID: "vault-cli"))
            #expect(error?.isInvalidGrant == true)
        }
    }

    @Test("a plain-http endpoint off loopback is refused before anything is sent")
    func insecureEndpointIsRefused() async throws {
        let (client, transport) = makeClient()
        let endpoint = try #require(URL(string: "http://id.example.com/oauth/token"))
        let error = await refreshFailure(client, refreshToken: "rt", endpoint: endpoint, credentials: ClientCredentials(clientID: "vault-cli"))
        #expect(error?.misconfigurationCode == "insecure_endpoint")
        #expect(transport.requests.isEmpty)
    }
}
