import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultURLSession

@Suite("The gateway's admin HTTP API")
struct AdminAPITests {
    /// Sends an admin request over real HTTP, as another process would.
    private func admin(_ method: HTTPRequest.Method, _ path: String, json: String? = nil, on gateway: DevGateway) async throws -> HTTPResponse {
        let url = gateway.baseURL.appendingPathComponent(path)
        var headers: HTTPHeaderFields = [:]
        if json != nil { headers["Content-Type"] = "application/json" }
        let request = HTTPRequest(method: method, url: url, headers: headers, body: Data((json ?? "").utf8))
        return try await URLSessionTransport(timeout: scaled(.seconds(10))).send(request)
    }

    @Test("grants, faults, sign-out and stats can be driven over HTTP")
    func adminOverHTTP() async throws {
        try await withGateway { gateway in
            let created = try await admin(
                .post, "admin/grants", json: #"{"subject":"alice","client_id":"ext","client_secret":"pw","scope":"openid","access_token_lifetime":60}"#,
                on: gateway)
            #expect(created.status == 201)
            #expect(created.headers["cache-control"] == "no-store")
            let issued = try TokenResponse.parse(created.body)
            #expect(issued.expiresIn == 60)
            #expect(issued.scope == "openid")
            let token = try #require(issued.refreshToken)

            let fault = try await admin(.post, "admin/faults/token-failures", json: #"{"status":503,"count":1}"#, on: gateway)
            #expect(fault.status == 204)
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "ext", authentication: .clientSecretBasic(ClientSecret("pw")))
            let failure = await refreshFailure(client, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(failure == .transient(.server(status: 503)))

            let signOut = try await admin(.post, "admin/grants/alice/revoke", on: gateway)
            #expect(String(decoding: signOut.body, as: UTF8.self) == #"{"revoked_grants":1}"#)
            let afterSignOut = await refreshFailure(client, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(afterSignOut?.isInvalidGrant == true)

            let stats = try await admin(.get, "admin/stats", on: gateway)
            let decoded = try JSONDecoder().decode(GatewayStats.self, from: stats.body)
            #expect(decoded.tokenRequests == 2)
            #expect(decoded.presentedRefreshTokens == [token, token])

            let malformed = try await admin(.post, "admin/grants", json: #"{"subject":"bob"}"#, on: gateway)
            #expect(malformed.status == 400)
        }
    }
}
