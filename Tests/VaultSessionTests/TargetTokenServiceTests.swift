import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Issue 34, item 1: tokens for other APIs (RFC 8707) and narrower scopes (RFC 6749 §6),
/// obtained with the account's one refresh token, against the development gateway over HTTP.
@Suite("Tokens for other targets: obtained, kept, refreshed, refused", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct TargetTokenServiceTests {
    let http = NIOTransport(timeout: TestTimeScale.scaled(.seconds(10)))

    /// The resource server's answer to `token` (200 or 401).
    func whoami(_ h: SessionHarness, _ server: String, _ token: AccessToken) async throws -> Int {
        let url = h.gateway.baseURL.appendingPathComponent("rs/\(server)/whoami")
        var headers = HTTPHeaderFields()
        headers["Authorization"] = token.authorizationHeader
        return try await http.send(HTTPRequest(method: .get, url: url, headers: headers)).status
    }

    func target(_ h: SessionHarness, _ server: String, scopes: [String] = []) throws -> TokenTarget {
        try TokenTarget(resources: [h.gateway.resourceServer(named: server)], scopes: scopes)
    }

    @Test("a token for another API: obtained once, kept beside the account's own, accepted there and refused elsewhere")
    func obtainedAndKept() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let own = try await h.service.validAccessToken()
            let files = try target(h, "files", scopes: ["profile"])
            let token = try await h.service.validAccessToken(target: files)
            #expect(token.account == alice && token.target == files && token.scopes == ["profile"])
            #expect(token.value != own.value)
            #expect(try await whoami(h, "files", token) == 200)
            #expect(try await whoami(h, "mail", token) == 401, "an audience-restricted token is refused by another API")
            #expect(try await whoami(h, "files", own) == 401, "the account's own token is not for that API")

            // Asked again (another order of the same target): the kept token, no request.
            let again = try await h.service.validAccessToken(resources: [h.gateway.resourceServer(named: "files")], scopes: ["profile"])
            #expect(again.value == token.value)
            await h.expectTokenRequests(1)
            #expect(try await h.service.validAccessToken().value == own.value, "the account's own token is untouched")
            // A second service on the same file reads it from the vault.
            let other = h.makeService(on: try h.openAnotherVault())
            #expect(try await other.validAccessToken(target: files).value == token.value)
            await h.expectTokenRequests(1)
            h.expectNoTokenInLogs()
        }
    }

    @Test("after another process's commit, a cached target token is served on only while the account's target tokens are as read")
    func cachedAcrossCommitsElsewhere() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let files = try target(h, "files", scopes: ["profile"])
            let mail = try target(h, "mail")
            let first = try await h.service.validAccessToken(target: files)
            let other = try h.openAnotherVault()
            // A notification and the account's own refresh elsewhere: the cached token stands.
            _ = try other.notifications.upsert(
                NotificationRecord(uuid: "n-1", account: alice, subject: "s", message: "m", actions: [], createdAt: h.time.now()))
            #expect(try await h.service.validAccessToken(target: files) == first)
            // Another process obtains a token for the same target: the next call serves it.
            let elsewhere = h.makeService(on: other)
            _ = try await elsewhere.validAccessToken(target: mail)
            #expect(try await h.service.validAccessToken(target: files) == first, "a token for another target changes nothing of this one")
            var replaced = Samples.tokens("files-elsewhere")
            replaced.accessTokenExpiresAt = h.time.now().addingTimeInterval(3600)
            try other.tokens.store(replaced, for: alice, target: files)
            let served = try await h.service.validAccessToken(target: files)
            #expect(served.value == replaced.accessToken && served.target == files)
            await h.expectTokenRequests(2)
        }
    }

    @Test("the refresh token a target's refresh rotates becomes the account's: the next refresh of either never forks it")
    func rotationIsShared() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly, rotatesRefreshTokens: true)
            let before = try #require(try h.vault.tokens.current(for: alice))
            _ = try await h.service.validAccessToken(target: try target(h, "files"))
            let after = try #require(try h.vault.tokens.current(for: alice))
            #expect(after.tokens.refreshToken != before.tokens.refreshToken, "the rotated refresh token is the account's now")
            #expect(after.tokens.accessToken == before.tokens.accessToken && after.generation == before.generation + 1)
            // The account's own token is due (30 s, leeway 60 s): refreshed with the rotated one.
            _ = try await h.service.validAccessToken()
            _ = try await h.service.validAccessToken(target: try target(h, "mail"))
            await h.expectTokenRequests(3)
            #expect(await h.gateway.reuseDetections() == 0, "no refresh token was presented twice")
        }
    }

    @Test("after a target's refresh rotated only the refresh token, a 401 on the account's own token still refreshes it")
    func ownTokenRefusedAfterRotation() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice", policy: .tokensOnly, rotatesRefreshTokens: true)
            let own = try await h.service.validAccessToken()
            _ = try await h.service.validAccessToken(target: try target(h, "files"))
            let replaced = try await h.service.reportUnauthorized(own)
            #expect(replaced.value != own.value, "the refused token is never handed back as its replacement")
            let longer = try await h.service.validAccessToken(minimumValidity: .seconds(3500))
            #expect(longer.value == replaced.value)
            await h.expectTokenRequests(2)
            #expect(await h.gateway.reuseDetections() == 0)
        }
    }

    @Test("refusals the vault does not know, for a target, never end the grant or back the account off")
    func unknownRefusalsForTarget() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let files = try target(h, "files")
            for _ in 0..<4 {
                await h.gateway.failNextTokenRequests(1, with: TokenFault(status: 400, error: "consent_required"))
                let error = await sessionError { try await h.service.validAccessToken(target: files) }
                guard case .targetRefused(alice, files, "refused", _) = error else {
                    Issue.record("expected a refused target, got \(String(describing: error))")
                    return
                }
            }
            let state = try h.vault.leases.state(for: alice)
            #expect(state.leaseHolder == nil && state.nextAttemptAt == nil && state.refusals == 0)
            #expect(try await h.service.validAccessToken(target: files).target == files, "the next request is served")
            #expect(try h.vault.tokens.current(for: alice) != nil, "the grant stands")
        }
    }

    @Test("concurrent callers for several targets and the account's own: one request per target, none forks the refresh token")
    func concurrentCallers() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly, rotatesRefreshTokens: true)
            let files = try target(h, "files")
            let mail = try target(h, "mail")
            let tokens = try await withThrowingTaskGroup(of: AccessToken.self) { group in
                for index in 0..<30 {
                    let asked = [TokenTarget.account, files, mail][index % 3]
                    group.addTask { try await h.service.validAccessToken(target: asked) }
                }
                return try await group.reduce(into: [AccessToken]()) { $0.append($1) }
            }
            #expect(Dictionary(grouping: tokens, by: \.target).mapValues { Set($0.map(\.value)).count } == [.account: 1, files: 1, mail: 1])
            await h.expectTokenRequests(3)
            #expect(await h.gateway.reuseDetections() == 0)
        }
    }

    @Test("a target's token is refreshed ahead of its expiry, and a 401 reported for it refreshes that target only")
    func refreshedAhead() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let files = try target(h, "files")
            let first = try await h.service.validAccessToken(target: files)
            await h.time.advance(by: .seconds(3600 - 30))  // within the leeway of the gateway's hour
            let second = try await h.service.validAccessToken(target: files)
            #expect(second.value != first.value && second.generation == first.generation + 1)
            let reported = try await h.service.reportUnauthorized(second)
            #expect(reported.value != second.value && reported.target == files)
            #expect(try await whoami(h, "files", reported) == 200)
            #expect(try h.vault.tokens.targetTokens(for: alice).count == 1)
            await h.expectTokenRequests(3)
        }
    }

    @Test("invalid_target and invalid_scope refuse the target only: the grant, its session and its own token stay")
    func targetRefused() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let unknown = try TokenTarget(resources: ["https://elsewhere.example/api"])
            let error = await sessionError { try await h.service.validAccessToken(target: unknown) }
            guard case .targetRefused(alice, unknown, "invalid_target", _) = error else {
                Issue.record("expected invalid_target, got \(String(describing: error))")
                return
            }
            let wider = try target(h, "files", scopes: ["admin"])
            let scopeError = await sessionError { try await h.service.validAccessToken(target: wider) }
            guard case .targetRefused(_, _, "invalid_scope", _) = scopeError else {
                Issue.record("expected invalid_scope, got \(String(describing: scopeError))")
                return
            }
            #expect(try await h.service.validAccessToken().account == alice, "the account's own token is still served")
            let state = try h.vault.leases.state(for: alice)
            #expect(state.leaseHolder == nil && state.failures == 0 && state.nextAttemptAt == nil, "no back-off, the lease let go")
            #expect(try await h.service.validAccessToken(target: try target(h, "files")).target.resources.count == 1)
        }
    }

    @Test("a server that ignores resource: its JWT names another audience, so the token is refused, never handed out")
    func ignoredResource() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly, rotatesRefreshTokens: true)
            await h.gateway.ignoreResourceIndicators(true)
            let files = try target(h, "files")
            let error = await sessionError { try await h.service.validAccessToken(target: files) }
            guard case .targetRefused(alice, files, "audience_mismatch", let description) = error else {
                Issue.record("expected audience_mismatch, got \(String(describing: error))")
                return
            }
            #expect(description?.contains(h.gateway.apiResource) == true)
            #expect(try h.vault.tokens.targetTokens(for: alice).isEmpty, "nothing stored")
            // The refresh token the server rotated meanwhile is kept: the grant goes on.
            await h.gateway.ignoreResourceIndicators(false)
            #expect(try await h.service.validAccessToken(target: files).target == files)
            #expect(await h.gateway.reuseDetections() == 0)
        }
    }

    @Test("an opaque token for a resource cannot be checked: it is kept as sent, and the API accepts it")
    func opaqueToken() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice", policy: .tokensOnly)
            await h.gateway.setResourceTokenFormat(.opaque)
            let token = try await h.service.validAccessToken(target: try target(h, "files"))
            #expect(token.value.split(separator: ".").count != 3)
            #expect(try await whoami(h, "files", token) == 200)
        }
    }

    @Test("a revoked grant found through a target's refresh ends the session and wipes every token of the account")
    func revokedThroughTarget() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let files = try target(h, "files")
            let token = try await h.service.validAccessToken(target: files)
            _ = await h.gateway.revokeGrants(subject: "alice")
            let error = await sessionError { try await h.service.reportUnauthorized(token) }
            guard case .revoked(alice, _) = error else {
                Issue.record("expected revoked, got \(String(describing: error))")
                return
            }
            #expect(try h.vault.tokens.targetTokens(for: alice).isEmpty && h.vault.tokens.current(for: alice) == nil)
            let after = await sessionError { try await h.service.validAccessToken(target: files) }
            #expect(after != nil)
        }
    }

    @Test("locked or ended sessions serve no target's token; a bad target is refused before anything is read")
    func sessionRules() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice", policy: SessionPolicy(idleTimeout: .seconds(600)))
            let files = try target(h, "files")
            _ = try await h.service.validAccessToken(target: files)
            await h.time.advance(by: .seconds(601))
            let error = await sessionError { try await h.service.validAccessToken(target: files) }
            guard case .locked = error else {
                Issue.record("expected locked, got \(String(describing: error))")
                return
            }
            await #expect(throws: TokenTargetError.self) { try await h.service.validAccessToken(resources: ["not a uri"]) }
        }
    }
}
