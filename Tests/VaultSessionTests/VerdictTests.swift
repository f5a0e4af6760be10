import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 13, part 5: refusals whose meaning is unknown end in a verdict instead of backing off
/// forever, and a token without `expires_in` is never fresh forever.
@Suite("Verdicts that come", .timeLimit(.minutes(1)))
struct VerdictTests {
    enum Refusal: String, CaseIterable, CustomTestStringConvertible {
        case unknownCode, nonJSON401
        var fault: TokenFault {
            switch self {
            case .unknownCode: TokenFault(status: 400, error: "interaction_required")
            case .nonJSON401: TokenFault(status: 401, body: "unauthorized")
            }
        }
        var testDescription: String { rawValue }
    }

    @Test("refused three times in a row: expired(refused), tokens wiped, nothing more sent", arguments: Refusal.allCases)
    func refusalsEndInAVerdict(_ refusal: Refusal) async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            await h.gateway.failNextTokenRequests(3, with: refusal.fault)
            let mark = h.events.mark
            for attempt in 1...2 {
                // Still valid for 30 s: served while the refusals are counted and backed off.
                _ = try await h.service.validAccessToken()
                await h.expectTokenRequests(attempt)
                #expect(try h.vault.refreshState(for: alice).refusals == attempt)
                let retryAt = try #require(try h.vault.refreshState(for: alice).nextAttemptAt)
                await h.time.advance(to: retryAt.addingTimeInterval(0.001))
            }
            let error = await sessionError { try await h.service.validAccessToken() }
            guard case .refused(let account, _)? = error else {
                Issue.record("expected refused, got \(String(describing: error))")
                return
            }
            #expect(account == alice)
            #expect(try await h.service.status() == .expired(.refused))
            #expect(try h.vault.tokens(for: alice) == nil)
            #expect(await sessionError { try await h.service.validAccessToken() } == error)
            await h.expectTokenRequests(3)

            // Subscribers heard each refusal, then the verdict; the message says what to do.
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .expired(.refused)) } != nil)
            #expect(h.events.events(after: mark) { $0.refreshFailure?.account == alice }.count == 2)
            let message = try #require(error).description
            #expect(message.contains("kept refusing") && message.contains("sign in again"), "message: \(message)")
            // Another instance on the same file reads the same verdict, without a request.
            let other = h.makeService(on: try h.openAnotherVault())
            guard case .refused(alice, _)? = await sessionError({ try await other.validAccessToken() }) else {
                Issue.record("another instance did not read the refused verdict")
                return
            }
            await h.expectTokenRequests(3)
            h.expectNoTokenInLogs()
        }
    }

    @Test("a 404 page without JSON is no refusal: the session outlives more of them than maximumRefusals")
    func pageFromInFrontIsNoRefusal() async throws {
        try await SessionHarness.run { h in
            // Valid for 30 s, less than the leeway: every call wants a refresh; four back-offs
            // (1 + 2 + 4 + 8 s at most) pass while it is still served.
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            await h.gateway.failNextTokenRequests(4, with: TokenFault(status: 404, body: "<html>Not Found</html>"))
            for attempt in 1...4 {
                _ = try await h.service.validAccessToken()
                await h.expectTokenRequests(attempt)
                #expect(try h.vault.refreshState(for: alice).refusals == 0)
                let retryAt = try #require(try h.vault.refreshState(for: alice).nextAttemptAt)
                await h.time.advance(to: retryAt.addingTimeInterval(0.001))
            }
            #expect(try await h.service.status() == .active)
            let refreshed = try await h.service.validAccessToken()
            #expect(refreshed.value != (try h.firstTokens(of: "alice").accessToken))
        }
    }

    @Test("a 503 between refusals is transient: the count starts again")
    func transientResetsTheCount() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            for fault in [Refusal.unknownCode.fault, TokenFault(status: 503), Refusal.unknownCode.fault, Refusal.unknownCode.fault] {
                await h.gateway.failNextTokenRequests(1, with: fault)
                _ = try await h.service.validAccessToken()
                let retryAt = try #require(try h.vault.refreshState(for: alice).nextAttemptAt)
                await h.time.advance(to: retryAt.addingTimeInterval(0.001))
            }
            #expect(try h.vault.refreshState(for: alice).refusals == 2)
            let refreshed = try await h.service.validAccessToken()
            #expect(refreshed.value != (try h.firstTokens(of: "alice").accessToken))
            #expect(try await h.service.status() == .active)
        }
    }

    @Test("no expires_in: a JWT's exp, else the configured default lifetime")
    func missingExpiresIn() async throws {
        var configuration = SessionConfiguration.testing
        configuration.defaultTokenLifetime = .seconds(1800)
        try await SessionHarness.run(configuration: configuration) { h in
            let exp = Int64(h.time.now().timeIntervalSince1970) + 600
            func part(_ json: String) -> String {
                Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            }
            let jwt = part(#"{"alg":"none"}"#) + "." + part(#"{"sub":"alice","exp":\#(exp)}"#) + ".sig"
            let withJWT = try await h.service.signIn(h.newAccount("alice"), tokens: TokenResponse(accessToken: jwt, tokenType: "Bearer"))
            #expect(try h.vault.tokens(for: withJWT.id)?.tokens.accessTokenExpiresAt == Date(timeIntervalSince1970: TimeInterval(exp)))

            let opaque = try await h.service.signIn(h.newAccount("bob"), tokens: TokenResponse(accessToken: "opaque-token", tokenType: "Bearer"))
            #expect(try h.vault.tokens(for: opaque.id)?.tokens.accessTokenExpiresAt == h.time.now().addingTimeInterval(1800))
        }
    }
}
