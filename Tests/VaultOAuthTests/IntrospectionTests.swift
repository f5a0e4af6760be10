import DevGateway
import Foundation
import Logging
import Testing

@testable import VaultOAuth

/// RFC 7662: what an introspection answer means, and the gateway's endpoint end to end.
@Suite("Token introspection (RFC 7662)")
struct IntrospectionTests {
    static func answer(_ body: String, status: Int = 200) -> Result<TokenIntrospection, IntrospectionError> {
        OAuthClient.classifyIntrospection(HTTPResponse(status: status, body: Data(body.utf8)), secrets: ["RT-SECRET-1"], now: Date())
    }

    @Test("active with exp, inactive, and answers RFC 7662 does not describe")
    func classification() throws {
        #expect(
            try Self.answer(#"{"active": true, "exp": 1900000000, "sub": "alice"}"#).get()
                == TokenIntrospection(active: true, expiresAt: Date(timeIntervalSince1970: 1_900_000_000)))
        #expect(try Self.answer(#"{"active": false}"#).get() == TokenIntrospection(active: false))
        #expect(try Self.answer(#"{"active": false, "exp": 1900000000}"#).get().expiresAt == nil, "an inactive token has no expiry worth keeping")
        for body in [#"{"active": 1}"#, #"{"active": "true"}"#, #"{"sub": "alice"}"#, "[true]", "active=true"] {
            guard case .failure(.malformedResponse) = Self.answer(body) else {
                Issue.record("\(body) was read as an answer")
                continue
            }
        }
        #expect(throws: IntrospectionError.notPermitted(status: 401, code: "invalid_client")) {
            try Self.answer(#"{"error": "invalid_client"}"#, status: 401).get()
        }
        #expect(throws: IntrospectionError.notPermitted(status: 403, code: nil)) { try Self.answer("", status: 403).get() }
        #expect(throws: IntrospectionError.transient(.server(status: 503, retryAfter: nil))) { try Self.answer("", status: 503).get() }
        // A server echoing the token in its error code: kept redacted.
        guard case .failure(.notPermitted(_, let code?)) = Self.answer(#"{"error": "bad RT-SECRET-1"}"#, status: 400) else {
            Issue.record("no error code kept")
            return
        }
        #expect(!code.contains("RT-SECRET-1"), "\(code)")
    }

    @Test("the gateway: a live refresh token is active with its subject, a revoked one and another client's are not; a public client can be refused")
    func gatewayEndToEnd() async throws {
        let gateway = try await DevGateway.start()
        let client = OAuthClient(logger: Logger(label: "test"))
        let tokens = await gateway.issueGrant(subject: "alice", clientID: "cli")
        let refreshToken = try #require(tokens.refreshToken)
        _ = await gateway.issueGrant(subject: "bob", clientID: "other-client")  // registers the other client
        func ask(_ clientID: String = "cli") async throws -> TokenIntrospection {
            try await client.introspect(
                token: refreshToken, hint: TokenTypeHint.refreshToken, endpoint: gateway.introspectionEndpoint, client: ClientCredentials(clientID: clientID))
        }
        #expect(try await ask().active)
        #expect(try await ask("other-client").active == false, "another client's token is not active to it")
        await gateway.setIntrospection(.confidentialClients)
        await #expect(throws: IntrospectionError.notPermitted(status: 401, code: "invalid_client")) { try await ask() }
        await gateway.setIntrospection(.anyClient)
        _ = await gateway.revokeGrants(subject: "alice")
        #expect(try await ask().active == false)
        await gateway.stop()
    }
}
