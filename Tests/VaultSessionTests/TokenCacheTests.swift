import DevGateway
import Foundation
import Testing
import VaultSession
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// The warm-process token cache behind `validAccessToken()`: a fresh token is served without
/// re-reading the vault while nothing has committed, and never once anything changed.
@Suite("Warm-process token cache", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct TokenCacheTests {
    /// New tokens for `account`, stored directly in `vault` (as a sign-in or refresh elsewhere would).
    private func replaceTokens(of account: AccountID, in vault: Vault, with value: String, h: SessionHarness) throws {
        let current = try #require(try vault.tokens.current(for: account))
        var tokens = current.tokens
        tokens.accessToken = value
        tokens.accessTokenExpiresAt = h.time.now().addingTimeInterval(3600)
        try vault.tokens.store(tokens, for: account, replacing: current.generation)
    }

    @Test("tokens stored by another connection (another process) are served on the next call")
    func anotherConnectionInvalidates() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let first = try await h.service.validAccessToken()
            #expect(try await h.service.validAccessToken() == first, "a warm call serves the same token")

            try replaceTokens(of: alice, in: try h.openAnotherVault(), with: "from-another-process", h: h)
            #expect(try await h.service.validAccessToken().value == "from-another-process")
            await h.expectTokenRequests(0)
        }
    }

    @Test("tokens stored through the same vault value (data_version unchanged) are served on the next call")
    func sameConnectionInvalidates() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            _ = try await h.service.validAccessToken()
            try replaceTokens(of: alice, in: h.vault, with: "from-this-process", h: h)
            #expect(try await h.service.validAccessToken().value == "from-this-process")
        }
    }

    @Test("after a switch of the active account, the new account's token is served, never the cached one")
    func neverAnotherAccountsToken() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let bob = try await h.signIn("bob", policy: .tokensOnly)
            #expect(try await h.service.validAccessToken().account == bob)
            #expect(try await h.service.validAccessToken(for: alice).account == alice)
            #expect(try await h.service.validAccessToken().account == bob)

            let other = h.makeService(on: try h.openAnotherVault())
            try await other.switchAccount(to: alice)
            let served = try await h.service.validAccessToken()
            #expect(served.account == alice)
            #expect(served.value == (try h.storedAccessToken(alice)))
        }
    }

    @Test("a token that enters the leeway is refreshed, not served from the cache")
    func timeIsJudgedOnEveryCall() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice", expiresIn: .seconds(3600), policy: .tokensOnly)
            let first = try await h.service.validAccessToken()
            await h.time.advance(by: .seconds(3570))
            let next = try await h.service.validAccessToken()
            #expect(next.value != first.value)
            await h.expectTokenRequests(1)
        }
    }

    /// What another process writes while this one holds a cached token for alice (the active
    /// account), and what this one must serve next.
    enum OtherWrite: String, CaseIterable, CustomTestStringConvertible {
        case bobsPolicy, notification, alicesTokens, alicesPolicy, alicesSessionEnded, activeAccountSwitched
        var testDescription: String { rawValue }
    }

    @Test("after another process's commit, alice's cached token is served only while nothing it was read from changed", arguments: OtherWrite.allCases)
    func commitsElsewhere(_ write: OtherWrite) async throws {
        try await SessionHarness.run { h in
            let bob = try await h.signIn("bob", policy: .tokensOnly)
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            let first = try await h.service.validAccessToken()
            #expect(first.account == alice)
            let other = try h.openAnotherVault()
            let service = h.makeService(on: other)
            switch write {
            case .bobsPolicy:
                try other.sessions.setPolicy(SessionPolicy(idleTimeout: .seconds(600)), for: bob)
            case .notification:
                _ = try other.notifications.upsert(
                    NotificationRecord(uuid: "n-1", account: alice, subject: "s", message: "m", actions: [], createdAt: h.time.now()))
            case .alicesTokens:
                try replaceTokens(of: alice, in: other, with: "from-another-process", h: h)
            case .alicesPolicy:
                // `vault set-policy` elsewhere; idle for two minutes under a one-minute policy: the
                // session is over at the next call.
                try other.sessions.changePolicy(SessionPolicy(idleTimeout: .seconds(60), warningBefore: .seconds(10), idleAction: .expire), for: alice)
            case .alicesSessionEnded:
                _ = try await service.endSession(for: alice, revoke: false)
            case .activeAccountSwitched:
                try await service.switchAccount(to: bob)
            }
            await h.time.advance(by: .seconds(120))
            switch write {
            case .bobsPolicy, .notification:
                #expect(try await h.service.validAccessToken() == first, "nothing alice's token depends on changed")
            case .alicesTokens:
                let refreshed = try await h.service.validAccessToken()
                #expect(refreshed.value == "from-another-process")
                // Read beside the state row: the entry now stands for the new token's write.
                _ = try other.notifications.upsert(
                    NotificationRecord(uuid: "n-2", account: alice, subject: "s", message: "m", actions: [], createdAt: h.time.now()))
                #expect(try await h.service.validAccessToken() == refreshed)
            case .alicesPolicy, .alicesSessionEnded:
                await #expect(throws: SessionError.self) { try await h.service.validAccessToken() }
            case .activeAccountSwitched:
                let served = try await h.service.validAccessToken()
                let stored = try h.storedAccessToken(bob)
                #expect(served.account == bob && served.value == stored)
            }
            await h.expectTokenRequests(0)
        }
    }

    @Test("a token another process stored that is already within the leeway is refreshed, not served")
    func anotherProcessesStaleToken() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly)
            _ = try await h.service.validAccessToken()
            let other = try h.openAnotherVault()
            let current = try #require(try other.tokens.current(for: alice))
            var tokens = current.tokens
            tokens.accessToken = "nearly-expired"
            tokens.accessTokenExpiresAt = h.time.now().addingTimeInterval(5)
            try other.tokens.store(tokens, for: alice, replacing: current.generation)
            let served = try await h.service.validAccessToken()
            let stored = try h.storedAccessToken(alice)
            #expect(served.value != "nearly-expired" && served.value == stored)
            await h.expectTokenRequests(1)
        }
    }

    @Test("a locked or closed vault serves nothing from the cache")
    func lockAndCloseWipe() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice")
            _ = try await h.service.validAccessToken()
            try await h.service.lock()
            await #expect(throws: SessionError.self) { try await h.service.validAccessToken() }
            try await h.service.unlock(with: h.store.credential)
            _ = try await h.service.validAccessToken()
            h.vault.close()
            await #expect(throws: SessionError.self) { try await h.service.validAccessToken() }
        }
    }
}

@Suite("A token valid for at least a given time")
struct MinimumValidityTests {
    @Test("refreshes when the token falls short; once a refresh shows the server's tokens cannot last that long, stops refreshing for that ask")
    func minimumValidity() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: .tokensOnly)
            // An hour asked for from a token with ten seconds less: one refresh shows the server's
            // tokens live an hour, and the calls after it do not refresh again.
            await h.time.advance(by: .seconds(10))
            for _ in 0..<3 {
                _ = try await h.service.validAccessToken(for: alice, minimumValidity: .seconds(3600))
                await h.time.advance(by: .seconds(10))  // every later token falls short of the hour too
            }
            await h.expectTokenRequests(1)
            // Half an hour later: 1000 s is covered without a refresh; 2000 s is not, and tokens
            // that live an hour can give it, so one refresh, then none.
            await h.time.advance(by: .seconds(1800))
            _ = try await h.service.validAccessToken(for: alice, minimumValidity: .seconds(1000))
            await h.expectTokenRequests(1)
            let longer = try await h.service.validAccessToken(for: alice, minimumValidity: .seconds(2000))
            await h.expectTokenRequests(2)
            _ = try await h.service.validAccessToken(for: alice, minimumValidity: .seconds(2000))
            await h.expectTokenRequests(2)
            #expect(longer.value != (try h.firstTokens(of: "alice")).accessToken)
        }
    }
}
