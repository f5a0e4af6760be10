import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// A refresh in flight while the user signs out or switches account never hands out, or
/// keeps, a token it should not.
@Suite("Sign-out, and account changes during a refresh", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct AccountChangeDuringRefreshTests {
    @Test("sign-out revokes the refresh token at the server and leaves nothing of the account")
    func signOutRevokesAndRemoves() async throws {
        try await SessionHarness.run { h in
            let bob = try await h.signIn("bob", policy: .tokensOnly)
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let mark = h.events.mark
            try await h.service.signOut()

            #expect(await h.gateway.stats().revocationRequests == 1)
            #expect(h.transport.exchanges.last?.revokedToken == (try h.firstTokens(of: "alice").refreshToken))
            #expect(try h.vault.accounts.find(alice) == nil)
            #expect(try h.vault.tokens.metadata(for: alice) == nil)
            #expect(try h.vault.sessions.all(for: alice).isEmpty)
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .signedOut) } != nil)
            #expect(
                await h.events.next(after: mark) { $0 == .accountSwitched(from: alice, to: bob) } != nil,
                "the remaining account becomes active")
            #expect(await sessionError { try await h.service.validAccessToken(for: alice) } == .notSignedIn(alice))
            #expect(try await h.service.activeAccount() == bob)
            #expect(
                try await h.service.validAccessToken().value == (try h.firstTokens(of: "bob").accessToken),
                "the other account is untouched")

            // The grant is dead at the server too: its refresh token is refused.
            let aliceRefresh = try #require(try h.firstTokens(of: "alice").refreshToken)
            do throws(RefreshError) {
                _ = try await h.oauth.refresh(
                    refreshToken: aliceRefresh, endpoint: h.gateway.tokenEndpoint,
                    client: ClientCredentials(clientID: SessionHarness.clientID))
                Issue.record("the signed-out grant still refreshes at the server")
            } catch {
                guard case .invalidGrant = error else {
                    Issue.record("expected invalid_grant for the revoked grant, got \(error)")
                    return
                }
            }
        }
    }

    @Test("the revocation is sent while the account is still in the vault, and removal follows it")
    func revocationComesFirst() async throws {
        try await SessionHarness.run { h in
            let bob = try await h.signIn("bob", policy: .tokensOnly)
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            h.transport.holdNextResponse()
            let service = h.service
            let signOut = Task { try await service.signOut(alice) }
            #expect(await h.transport.waitUntilHolding())
            // The server has the revocation request; locally nothing has changed yet.
            #expect(await h.gateway.stats().revocationRequests == 1)
            #expect(try h.vault.accounts.find(alice) != nil)
            #expect(try h.vault.accounts.activeID() == alice)
            h.transport.releaseHeldResponse()
            let report = try await signOut.value
            #expect(report.revocation == .revoked)
            #expect(report.removal.removed && report.removal.active == bob && report.removal.checkpoint == .completed)
            #expect(try h.vault.accounts.find(alice) == nil)
            #expect(try h.vault.accounts.activeID() == bob)
        }
    }

    @Test("sign-out under another connection's long read: revoked, removed, the other account active, the checkpoint reported")
    func signOutUnderLongReader() async throws {
        try await SessionHarness.run { h in
            let bob = try await h.signIn("bob", policy: .tokensOnly)
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let reader = try LongReader(h.store.url)
            let mark = h.events.mark
            let report = try await h.service.signOut()
            #expect(report.account == alice)
            #expect(await h.gateway.stats().revocationRequests == 1, "the revocation reached the server")
            #expect(report.revocation == .revoked)
            #expect(report.removal.removed && report.removal.active == bob)
            guard case .blockedByReader? = report.removal.checkpoint else {
                Issue.record("the blocked checkpoint was not reported: \(String(describing: report.removal.checkpoint))")
                return
            }
            #expect(try h.vault.accounts.find(alice) == nil)
            #expect(try await h.service.activeAccount() == bob)
            #expect(await h.events.next(after: mark) { $0 == .accountSwitched(from: alice, to: bob) } != nil)
            try reader.finish()
            #expect(try h.vault.maintenance.attemptCheckpoint() == .completed)
        }
    }

    @Test("a failing revocation endpoint does not keep local data alive")
    func signOutWithServerDown() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            await h.gateway.failNextRevocationRequests(1, with: TokenFault(status: 503))
            let report = try await h.service.signOut()
            guard case .failed = report.revocation else {
                Issue.record("the failed revocation was not reported: \(report.revocation)")
                return
            }
            #expect(h.logs.lines.contains { $0.contains("could not revoke the token at the server") })
            #expect(await h.gateway.stats().revocationRequests == 1)
            #expect(try h.vault.accounts.find(alice) == nil)
            #expect(try h.vault.tokens.metadata(for: alice) == nil)
            #expect(try await h.service.status(of: alice) == .signedOut)
        }
    }

    @Test("a refresh that completes after sign-out is discarded", arguments: [true, false])
    func refreshAfterSignOutIsDiscarded(revocationEndpoint: Bool) async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly, revocation: revocationEndpoint)
            // Held until the sign-out is done: the refresh completes after it, however slow the machine.
            await h.gateway.holdTokenResponses()
            let service = h.service
            let request = Task { try await service.validAccessToken() }
            await h.waitForGateway { $0.tokenRequests >= 1 }

            let mark = h.events.mark
            try await h.service.signOut()
            await h.gateway.releaseTokenResponses()
            let error = await sessionError { try await request.value }
            #expect(error == .notSignedIn(alice))

            // Once the server has answered, nothing of the account is back in the vault.
            await h.waitForGateway { $0.tokenResponses >= 1 }
            #expect(try h.vault.tokens.metadata(for: alice) == nil)
            #expect(try h.vault.accounts.find(alice) == nil)
            #expect(try h.vault.accounts.activeID() == nil)
            _ = await h.events.flush()
            let after = h.events.events(after: mark) { event in
                switch event {
                case .tokenRefreshed, .revoked, .refreshFailed: true
                case .stateChanged(_, let status): status != .signedOut
                default: false
                }
            }
            #expect(after.isEmpty, "events about the signed-out account after sign-out: \(after)")
            await #expect(throws: SessionError.noActiveAccount) { try await h.service.validAccessToken() }
        }
    }

    enum LateAnswer: String, CaseIterable, CustomTestStringConvertible {
        case serverError = "503"
        case invalidGrant = "invalid_grant"
        case success
        var testDescription: String { rawValue }
    }

    @Test(
        "an answer the network layer already had when the account was signed out is discarded too",
        arguments: LateAnswer.allCases)
    func answerReceivedDuringSignOutIsDiscarded(_ answer: LateAnswer) async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly, revocation: false)
            switch answer {
            case .serverError: await h.gateway.failNextTokenRequests(1, with: TokenFault(status: 503))
            case .invalidGrant: _ = await h.gateway.revokeGrants(subject: "alice")
            case .success: break
            }
            h.transport.holdNextResponse()
            let service = h.service
            let request = Task { try await service.validAccessToken() }
            #expect(await h.transport.waitUntilHolding())

            let mark = h.events.mark
            try await h.service.signOut()
            h.transport.releaseHeldResponse()
            // Not the old, still-valid token, not a new one: the account is gone.
            #expect(await sessionError { try await request.value } == .notSignedIn(alice))
            #expect(try h.vault.tokens.metadata(for: alice) == nil)
            #expect(await h.events.flush())
            let late = h.events.events(after: mark) { event in
                switch event {
                case .tokenRefreshed, .revoked, .refreshFailed: true
                default: false
                }
            }
            #expect(late.isEmpty, "events about the signed-out account after sign-out: \(late)")
        }
    }

    @Test("a refresh for the active account that completes after a switch never returns the other account's token")
    func refreshAcrossAnAccountSwitch() async throws {
        try await SessionHarness.run { h in
            let bob = try await h.signIn("bob", expiresIn: .seconds(3600), policy: .tokensOnly)
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            #expect(try await h.service.activeAccount() == alice)
            // Held until the switch is done: the refresh completes after it, however slow the machine.
            await h.gateway.holdTokenResponses()
            let service = h.service
            let request = Task { try await service.validAccessToken() }
            await h.waitForGateway { $0.tokenRequests >= 1 }

            try await h.service.switchAccount(to: bob)
            await h.gateway.releaseTokenResponses()
            do {
                let token = try await request.value
                // Acceptable only if it is alice's token, labelled as alice's.
                #expect(token.account == alice)
                #expect(h.owner(ofAccessToken: token.value) == "alice")
            } catch let error as SessionError {
                #expect(error == .accountChanged(from: alice, to: bob))
            }
            // The refresh was not wasted: alice's new token is stored, and bob's is served now.
            let aliceStored = try #require(try h.storedAccessToken(alice))
            #expect(h.owner(ofAccessToken: aliceStored) == "alice")
            #expect(aliceStored != (try h.firstTokens(of: "alice").accessToken))
            let now = try await h.service.validAccessToken()
            #expect(now.account == bob)
            #expect(now.value == (try h.firstTokens(of: "bob").accessToken))
        }
    }

    @Test("switching accounts back and forth never serves one account's token for another")
    func switchingBackAndForth() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            let bob = try await h.signIn("bob", expiresIn: .seconds(30), policy: .tokensOnly)
            let service = h.service

            // One step at a time: the token belongs to the account now active.
            for step in 0..<24 {
                let target = step % 2 == 0 ? alice : bob
                try await service.switchAccount(to: target)
                if step % 4 == 3 { await h.time.advance(by: .seconds(3570)) }  // both tokens go stale
                let token = try await service.validAccessToken()
                #expect(token.account == target)
                #expect(try await service.activeAccount() == target)
                #expect(h.owner(ofAccessToken: token.value) == h.subject(of: target))
                #expect(try h.storedAccessToken(target) == token.value)
            }

            // Interleaved: switches and token requests racing, with tokens going stale meanwhile.
            let results = await withTaskGroup(of: Result<AccessToken, any Error>?.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        switch index % 5 {
                        case 0:
                            try? await service.switchAccount(to: index % 10 == 0 ? alice : bob)
                            return nil
                        case 1 where index % 50 == 1:
                            await h.time.advance(by: .seconds(3570))
                            return nil
                        default:
                            do { return .success(try await service.validAccessToken()) } catch { return .failure(error) }
                        }
                    }
                }
                return await group.reduce(into: [Result<AccessToken, any Error>]()) { if let result = $1 { $0.append(result) } }
            }
            var served = 0
            for result in results {
                switch result {
                case .success(let token):
                    served += 1
                    #expect(
                        h.owner(ofAccessToken: token.value) == h.subject(of: token.account),
                        "a token of \(h.owner(ofAccessToken: token.value) ?? "nobody") was served for \(h.subject(of: token.account) ?? "?")")
                case .failure(let error as SessionError):
                    guard case .accountChanged = error else {
                        Issue.record("unexpected error \(error)")
                        continue
                    }
                case .failure(let error):
                    Issue.record("unexpected error \(error)")
                }
            }
            #expect(served > 0)
            #expect(await h.gateway.reuseDetections() == 0)
        }
    }
}
