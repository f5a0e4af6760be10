import DevGateway
import Foundation
import GRDB
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// A row edited without the key is the damage of one account: that account reports it, the
/// others keep working, and nothing is sent for the damaged one.
@Suite("One account's edited rows leave the others working", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct DamagedAccountTests {
    @Test("bob's session and token endpoint edited: alice is served, bob's token request fails as damaged and sends nothing")
    func damageStaysWithItsAccount() async throws {
        try await SessionHarness.run { h in
            let bob = try await h.signIn("bob", expiresIn: .seconds(30), policy: .tokensOnly)
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            try RawDatabase.execute(h.vault.url, "UPDATE sessions SET absolute_deadline = 4102444800000 WHERE account_id = ?", [bob.rawValue])
            try RawDatabase.execute(
                h.vault.url, "UPDATE accounts SET token_endpoint = 'http://127.0.0.1:9/token' WHERE account_id = ?",
                [bob.rawValue])

            let other = try h.openAnotherVault()
            let service = h.makeService(on: other)
            try await service.start()
            let token = try await service.validAccessToken(for: alice)
            #expect(token.account == alice)
            let error = await sessionError { try await service.validAccessToken(for: bob) }
            guard case .vault(let vaultError)? = error else {
                Issue.record("expected a vault error, got \(String(describing: error))")
                return
            }
            let message = vaultError.message
            #expect(vaultError.code == .damaged)
            #expect(message.contains("sessions.absolute_deadline") || message.contains("accounts.token_endpoint"), "\(message)")
            await h.expectTokenRequests(0)
        }
    }
}

/// The endpoint rule holds at import and again at every request, whatever put the account there.
@Suite("Look-alike loopback hosts, at sign-in and at request time", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct EndpointAtRequestTests {
    @Test("a sign-in naming a look-alike host is refused and stores nothing; one stored anyway is never sent a token")
    func lookAlikeHostsNeverGetAToken() async throws {
        try await SessionHarness.run { h in
            var account = h.newAccount("mallory")
            account.client.tokenEndpoint = try #require(URL(string: "http://127.0.0.1.nip.io/oauth/token"))
            let tokens = TokenSet(
                accessToken: "access-lookalike", refreshToken: "refresh-lookalike", idToken: nil,
                tokenType: "Bearer", accessTokenExpiresAt: h.time.now().addingTimeInterval(5), scopes: [])
            await #expect(throws: EndpointError.self) { try await h.service.signIn(account, tokens: tokens) }
            #expect(try h.vault.accounts.ids().isEmpty, "nothing stored")

            // Stored through the store alone (a tool of its own, or an older build): the request is refused.
            let stored = try h.vault.accounts.signIn(account, tokens: tokens, policy: .tokensOnly)
            let error = await sessionError { try await h.service.validAccessToken(for: stored.account.id) }
            guard case .clientMisconfigured(_, let code, _)? = error else {
                Issue.record("expected the endpoint to be refused, got \(String(describing: error))")
                return
            }
            #expect(code == "insecure_endpoint")
            await h.expectTokenRequests(0)
        }
    }
}
