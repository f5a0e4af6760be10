import DevGateway
import Foundation
import Testing
import VaultOAuth

@Suite("Secrets never leak into logs or descriptions")
struct SecretHygieneTests {
    @Test("no token or secret appears in any log line, error or description across refreshes and revocation")
    func nothingLeaks() async throws {
        let capture = LogCapture()
        let secret = "client-secret-Zq8vW3"
        try await withGateway(logger: capture.logger(label: "test.gateway")) { gateway in
            let (client, transport) = makeClient(logger: capture.logger(label: "test.client"))
            let credentials = ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret(secret)))
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-sync", clientSecret: secret)
            let original = try issued.requiredRefreshToken
            var rendered: [String] = [issued.description, String(reflecting: issued), credentials.description]

            let refreshed = try await client.refresh(refreshToken: original, endpoint: gateway.tokenEndpoint, client: credentials)
            rendered += [refreshed.description, String(reflecting: refreshed)]

            // A rotated token presented again: invalid_grant, and the family is revoked.
            if let error = await refreshFailure(client, refreshToken: original, endpoint: gateway.tokenEndpoint, credentials: credentials) {
                #expect(error.isInvalidGrant)
                rendered += [error.description, String(reflecting: error), error.localizedDescription]
            }
            // A wrong secret.
            let wrong = ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret(secret + "x")))
            if let error = await refreshFailure(client, refreshToken: original, endpoint: gateway.tokenEndpoint, credentials: wrong) {
                #expect(error.misconfigurationCode == "invalid_client")
                rendered += [error.description, String(reflecting: error)]
            }
            // A server that echoes the presented token back in its error description.
            let echoed = #"{"error":"invalid_grant","error_description":"token \#(original) is revoked"}"#
            await gateway.failNextTokenRequests(with: TokenFault(status: 400, body: echoed))
            if let error = await refreshFailure(client, refreshToken: original, endpoint: gateway.tokenEndpoint, credentials: credentials) {
                #expect(error == .invalidGrant(description: "token <redacted> is revoked"))
                rendered += [error.description, String(reflecting: error)]
            }
            try await client.revoke(token: try #require(refreshed.refreshToken), hint: .refreshToken, endpoint: gateway.revocationEndpoint, client: credentials)

            for request in transport.requests {
                var dumped = ""
                dump(request, to: &dumped)
                rendered += [request.description, String(reflecting: request), dumped]
            }
            rendered.append((await gateway.stats()).description)

            let secrets = [secret, original, issued.accessToken, issued.idToken, refreshed.accessToken, refreshed.refreshToken, refreshed.idToken]
                .compactMap { $0 }
            let lines = capture.capturedLines
            #expect(lines.contains { $0.contains("oauth.outcome=success") })
            #expect(lines.contains { $0.contains("oauth.outcome=invalid_grant") })
            #expect(lines.contains { $0.contains("gateway.outcome=invalid_client") })
            for text in lines + rendered {
                for value in secrets {
                    #expect(!text.contains(value), "a secret leaked into: \(text)")
                }
            }
        }
    }
}
