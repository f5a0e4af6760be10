import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 13, part 5: refusals whose meaning is unknown end in a verdict instead of backing off
/// forever, and a token without `expires_in` is never fresh forever.
@Suite("Verdicts that come", .timeLimit(.minutes(TestTimeScale.minutes(1))))
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
                #expect(try h.vault.leases.state(for: alice).refusals == attempt)
                let retryAt = try #require(try h.vault.leases.state(for: alice).nextAttemptAt)
                await h.time.advance(to: retryAt.addingTimeInterval(0.001))
            }
            let error = await sessionError { try await h.service.validAccessToken() }
            guard case .refused(let account, _)? = error else {
                Issue.record("expected refused, got \(String(describing: error))")
                return
            }
            #expect(account == alice)
            #expect(try await h.service.status() == .expired(.refused))
            #expect(try h.vault.tokens.current(for: alice) == nil)
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
                #expect(try h.vault.leases.state(for: alice).refusals == 0)
                let retryAt = try #require(try h.vault.leases.state(for: alice).nextAttemptAt)
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
                let retryAt = try #require(try h.vault.leases.state(for: alice).nextAttemptAt)
                await h.time.advance(to: retryAt.addingTimeInterval(0.001))
            }
            #expect(try h.vault.leases.state(for: alice).refusals == 2)
            let refreshed = try await h.service.validAccessToken()
            #expect(refreshed.value != (try h.firstTokens(of: "alice").accessToken))
            #expect(try await h.service.status() == .active)
        }
    }

    /// Base64url without padding, as JWTs are written.
    static func part(_ json: String) -> String {
        Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// An unsigned-looking JWT whose payload claims `exp` (seconds since 1970).
    static func jwt(exp: Double) -> String {
        part(#"{"alg":"RS256"}"#) + "." + part(#"{"sub":"alice","exp":\#(exp)}"#) + ".c2ln"
    }

    /// Access tokens imported without `expires_in`, and how long each is trusted from now.
    enum Import: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case jwt, opaque, jwtExpired, jwtYearsAhead, jwtInMilliseconds
        static let defaultLifetime: TimeInterval = 1800

        func accessToken(now: Date) -> String {
            let seconds = now.timeIntervalSince1970
            switch self {
            case .jwt: return VerdictTests.jwt(exp: seconds + 600)
            case .opaque: return "opaque-access-token"
            case .jwtExpired: return VerdictTests.jwt(exp: seconds - 600)
            case .jwtYearsAhead: return VerdictTests.jwt(exp: seconds + 2 * 365 * 86_400)
            case .jwtInMilliseconds: return VerdictTests.jwt(exp: (seconds + 600) * 1000)
            }
        }

        /// The JWT's own exp when it is believable, else the default lifetime.
        var trustedFor: TimeInterval { self == .jwt ? 600 : Self.defaultLifetime }
        var testDescription: String { rawValue }
    }

    @Test("no expires_in at sign-in: a JWT's exp when believable, else the configured default lifetime", arguments: Import.allCases)
    func missingExpiresInAtSignIn(_ kind: Import) async throws {
        var configuration = SessionConfiguration.testing
        configuration.defaultTokenLifetime = .seconds(Import.defaultLifetime)
        try await SessionHarness.run(configuration: configuration) { h in
            let now = h.time.now()
            let account = try await h.service.signIn(
                h.newAccount("alice"),
                tokens: TokenResponse(accessToken: kind.accessToken(now: now), tokenType: "Bearer"))
            #expect(try h.vault.tokens.current(for: account.id)?.tokens.accessTokenExpiresAt == now.addingTimeInterval(kind.trustedFor))
        }
    }

    @Test("no expires_in and an opaque token: served for the default lifetime less the leeway, then refreshed")
    func defaultLifetimeEndsInARefresh() async throws {
        var configuration = SessionConfiguration.testing
        configuration.defaultTokenLifetime = .seconds(1800)
        try await SessionHarness.run(configuration: configuration) { h in
            let issued = await h.gateway.issueGrant(subject: "alice", clientID: SessionHarness.clientID)
            let account = try await h.service.signIn(
                h.newAccount("alice"), tokens: TokenResponse(accessToken: issued.accessToken, tokenType: "Bearer", refreshToken: issued.refreshToken),
                policy: .tokensOnly)
            let refreshAt = h.time.now().addingTimeInterval(1800 - configuration.leeway.timeInterval)

            await h.time.advance(to: refreshAt.addingTimeInterval(-1))
            #expect(try await h.service.validAccessToken().value == issued.accessToken)
            await h.expectTokenRequests(0)

            await h.time.advance(to: refreshAt.addingTimeInterval(0.001))
            let refreshed = try await h.service.validAccessToken()
            #expect(refreshed.value != issued.accessToken)
            await h.expectTokenRequests(1)
            // The gateway's answer has expires_in (3600): that is used again.
            let expiry = try #require(try h.vault.tokens.current(for: account.id)?.tokens.accessTokenExpiresAt)
            #expect(abs(expiry.timeIntervalSince(h.time.now().addingTimeInterval(3600))) < 0.002, "stored to the millisecond")
        }
    }

    @Test("no expires_in in a refresh response: the JWT's exp, then for an opaque token the default lifetime")
    func missingExpiresInOnRefresh() async throws {
        var configuration = SessionConfiguration.testing
        configuration.defaultTokenLifetime = .seconds(1800)
        try await SessionHarness.run(configuration: configuration) { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            func answer(_ accessToken: String) -> TokenFault {
                // A 200 answered in place of the gateway's own: no expires_in, no new refresh token.
                TokenFault(
                    status: 200, body: #"{"access_token":"\#(accessToken)","token_type":"Bearer"}"#,
                    headers: ["Content-Type": "application/json"])
            }
            let exp = h.time.now().addingTimeInterval(900)
            let jwt = Self.jwt(exp: exp.timeIntervalSince1970)
            await h.gateway.failNextTokenRequests(1, with: answer(jwt))
            #expect(try await h.service.validAccessToken().value == jwt)
            #expect(try h.vault.tokens.current(for: alice)?.tokens.accessTokenExpiresAt == exp)

            // Served until its exp less the leeway, then refreshed again.
            await h.time.advance(to: exp.addingTimeInterval(-configuration.leeway.timeInterval - 1))
            #expect(try await h.service.validAccessToken().value == jwt)
            await h.expectTokenRequests(1)
            await h.gateway.failNextTokenRequests(1, with: answer("opaque-access-token"))
            await h.time.advance(by: .seconds(2))
            #expect(try await h.service.validAccessToken().value == "opaque-access-token")
            await h.expectTokenRequests(2)
            #expect(try h.vault.tokens.current(for: alice)?.tokens.accessTokenExpiresAt == h.time.now().addingTimeInterval(1800))
            #expect(try h.vault.tokens.current(for: alice)?.tokens.refreshToken == (try h.firstTokens(of: "alice").refreshToken))
        }
    }

    @Test("a refresh answered 20 s after it was sent: expires_in counts from the request, so the vault never outlives the server's token")
    func expiresInCountsFromTheRequest() async throws {
        var configuration = SessionConfiguration.testing
        configuration.requestDeadline = .seconds(300)  // the held answer outlives a loaded machine
        try await SessionHarness.run(configuration: configuration, transportTimeout: .seconds(300)) { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            await h.gateway.holdTokenResponses()
            let sent = h.time.now()
            let refresh = Task { try await h.service.validAccessToken() }
            #expect(await h.gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(10))) { $0.tokenRequests == 1 })
            await h.time.advance(by: .seconds(20))
            await h.gateway.releaseTokenResponses()
            let token = try await refresh.value
            // The gateway's tokens live an hour (expires_in 3600), issued after `sent`.
            #expect(token.expiresAt == sent.addingTimeInterval(3600), "\(String(describing: token.expiresAt)) vs sent \(sent)")
            #expect(try h.vault.tokens.current(for: alice)?.tokens.accessTokenExpiresAt == sent.addingTimeInterval(3600))
        }
    }
}
