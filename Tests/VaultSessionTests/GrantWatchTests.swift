import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// ``GrantWatch``: what a long-running process does between requests, driven by the test clock
/// against the gateway: grant checks, refresh ahead of expiry, refresh-token expiry warnings.
@Suite("The grant watch", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct GrantWatchTests {
    static let minute: Duration = .seconds(60)

    static func configuration(_ watch: GrantWatch) -> SessionConfiguration {
        var configuration = SessionConfiguration.testing
        configuration.grantWatch = watch
        return configuration
    }

    @Test(
        "with no request at all, an administrator's revocation is noticed at the next check: revoked, expired(revoked), tokens wiped; the checks never move the idle deadline"
    )
    func revocationNoticedWithinTheInterval() async throws {
        try await SessionHarness.run(configuration: Self.configuration(GrantWatch(checkInterval: Self.minute * 5, refreshExpiryWarning: nil))) { h in
            let alice = try await h.signIn("alice", policy: SessionPolicy(idleTimeout: .seconds(3600), absoluteLifetime: .seconds(86_400)))
            try await h.service.start()
            let idleDeadline = try h.vault.sessions.current(for: alice)?.idleDeadline
            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 5)), "the first check one interval after the start: \(h.time.sleepingUntil)")
            await h.time.advance(by: Self.minute * 5)
            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 10)), "\(h.time.sleepingUntil)")
            await h.expectTokenRequests(1)
            #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == idleDeadline, "a check is not activity")

            _ = await h.gateway.revokeGrants(subject: "alice")
            let mark = h.events.mark
            await h.time.advance(by: Self.minute * 5 - .seconds(1))
            #expect(try await h.service.status(of: alice) == .active, "nothing is asked before the interval")
            await h.time.advance(by: .seconds(1))
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .expired(.revoked)) } != nil)
            #expect(h.events.events(after: mark) { if case .revoked(alice, _) = $0 { true } else { false } }.count == 1)
            await h.expectTokenRequests(2)
            #expect(try h.vault.tokens.current(for: alice) == nil, "the tokens were wiped")
            #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == idleDeadline)
        }
    }

    @Test("the watch's refreshes are not activity: an idle session still locks at its deadline, and a locked one is never refreshed")
    func idleSessionNotKeptAlive() async throws {
        let watch = GrantWatch(refreshAhead: .all, checkInterval: Self.minute * 5, refreshExpiryWarning: nil)
        try await SessionHarness.run(configuration: Self.configuration(watch)) { h in
            let alice = try await h.signIn("alice", expiresIn: Self.minute * 8)  // 15 min idle, lock
            try await h.service.start()
            let mark = h.events.mark
            for minutes in [5, 10, 15] {
                #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * minutes)), "at \(minutes) min: \(h.time.sleepingUntil)")
                await h.time.advance(to: h.time.at(Self.minute * minutes))
            }
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .locked(.idleTimeout)) } != nil, "locked at 15 min all the same")
            let asked = await h.gateway.tokenRequestCount()
            #expect(asked == 2, "checked at 5 and 10 min (the check at 5 also renewed the token that expired at 8), not at 15")
            await h.time.advance(by: Self.minute * 30)
            #expect(await h.events.flush())
            await h.expectTokenRequests(asked)
        }
    }

    @Test("an account chosen for refresh ahead is refreshed a leeway before its token expires, with no request; another is not")
    func refreshAhead() async throws {
        // The accounts exist only once signed in: the watch names them afterwards, on a second service.
        try await SessionHarness.run(configuration: .testing) { h in
            let alice = try await h.signIn("alice", expiresIn: Self.minute * 10, policy: .tokensOnly)
            let bob = try await h.signIn("bob", expiresIn: Self.minute * 10, policy: .tokensOnly)
            let bobToken = try h.storedAccessToken(bob)
            var configuration = SessionConfiguration.testing
            configuration.grantWatch = GrantWatch(refreshAhead: .only([alice]), checkInterval: nil, refreshExpiryWarning: nil)
            let watching = h.makeService(on: h.vault, configuration: configuration)
            let events = EventLog(watching)
            try await watching.start()
            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 9)), "\(h.time.sleepingUntil)")
            await h.time.advance(by: Self.minute * 9)
            #expect(await events.next { if case .tokenRefreshed(alice, _) = $0 { true } else { false } } != nil)
            await h.expectTokenRequests(1)
            #expect(try h.storedAccessToken(bob) == bobToken)
            let stored = try #require(try h.vault.tokens.current(for: alice))
            #expect((stored.tokens.accessTokenExpiresAt ?? .distantPast) > h.time.at(Self.minute * 30))
            // Then not again before the new token comes near its own expiry.
            await h.time.advance(by: Self.minute * 30)
            #expect(await events.flush())
            await h.expectTokenRequests(1)
        }
    }

    @Test(
        "a refresh token that is a JWT: warned once, the warning's time before its exp, in every process's event log and in the inspection `vault status` prints"
    )
    func refreshTokenExpiryWarning() async throws {
        let watch = GrantWatch(checkInterval: nil, refreshExpiryWarning: .seconds(3 * 86_400))
        try await SessionHarness.run(configuration: Self.configuration(watch)) { h in
            // Expires in 3 days and 30 minutes: warned at 30 minutes.
            let expiry = h.time.at(.seconds(3 * 86_400 + 1800))
            let refreshToken = Self.unsignedJWT(["exp": Int(expiry.timeIntervalSince1970), "typ": "Refresh"])
            let account = try await h.service.signIn(
                h.newAccount("alice"),
                tokens: TokenSet(accessToken: "access-1", refreshToken: refreshToken, accessTokenExpiresAt: h.time.at(.seconds(3600))),
                policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(30 * 86_400)))
            try await h.service.start()
            let mark = h.events.mark
            #expect(await h.time.waitForSleeper(until: h.time.at(.seconds(1800))), "\(h.time.sleepingUntil)")
            await h.time.advance(by: .seconds(1799))
            #expect(await h.events.flush())
            #expect(h.events.events(after: mark) { if case .refreshTokenExpiring = $0 { true } else { false } }.isEmpty, "not before")
            await h.time.advance(by: .seconds(1))
            #expect(await h.events.next(after: mark) { $0 == .refreshTokenExpiring(account.id, expiresAt: expiry) } != nil)
            await h.time.advance(by: .seconds(2 * 3600))
            #expect(await h.events.flush())
            #expect(h.events.events(after: mark) { if case .refreshTokenExpiring = $0 { true } else { false } }.count == 1, "once")
            await h.service.stop()
            let logged = try h.vault.events.list(account: account.id).filter { $0.kind == "refresh_token_expiring" }
            #expect(logged.count == 1 && logged.first?.data["expires_at"] == String(Int64(expiry.timeIntervalSince1970 * 1000)), "\(logged)")
            // `vault status` shows it without the key.
            #expect(try Vault.inspect(at: h.store.url).expiringRefreshTokens == [account.id: expiry])
            await h.expectTokenRequests(0)
        }
    }

    @Test("where the provider introspects (RFC 7662), a check rotates nothing; a revocation it finds is confirmed by one refresh and ends the session")
    func introspectionChecks() async throws {
        try await SessionHarness.run(configuration: Self.configuration(GrantWatch(checkInterval: Self.minute * 5, refreshExpiryWarning: nil))) { h in
            let alice = try await h.signIn("alice", policy: .tokensOnly, introspection: true)
            let refreshToken = try h.vault.tokens.current(for: alice)?.tokens.refreshToken
            try await h.service.start()
            for minutes in [5, 10] {
                #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * minutes)), "\(h.time.sleepingUntil)")
                await h.time.advance(to: h.time.at(Self.minute * minutes))
                #expect(await h.waitForGateway { $0.introspectionRequests == minutes / 5 })
            }
            await h.expectTokenRequests(0)
            #expect(try h.vault.tokens.current(for: alice)?.tokens.refreshToken == refreshToken, "nothing rotated")

            _ = await h.gateway.revokeGrants(subject: "alice")
            let mark = h.events.mark
            #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * 15)), "\(h.time.sleepingUntil)")
            await h.time.advance(to: h.time.at(Self.minute * 15))
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .expired(.revoked)) } != nil)
            await h.expectTokenRequests(1)
            #expect(await h.gateway.stats().introspectionRequests == 3)
            #expect(try h.vault.tokens.current(for: alice) == nil)
        }
    }

    @Test("a provider that does not let this client introspect: the check refreshes, and introspection is not asked again")
    func introspectionRefused() async throws {
        try await SessionHarness.run(configuration: Self.configuration(GrantWatch(checkInterval: Self.minute * 5, refreshExpiryWarning: nil))) { h in
            await h.gateway.setIntrospection(.confidentialClients)  // the harness's client is public
            let alice = try await h.signIn("alice", policy: .tokensOnly, introspection: true)
            let refreshToken = try h.vault.tokens.current(for: alice)?.tokens.refreshToken
            try await h.service.start()
            for minutes in [5, 10] {
                #expect(await h.time.waitForSleeper(until: h.time.at(Self.minute * minutes)), "\(h.time.sleepingUntil)")
                await h.time.advance(to: h.time.at(Self.minute * minutes))
                #expect(await h.waitForGateway { $0.tokenRequests == minutes / 5 })
            }
            #expect(await h.gateway.stats().introspectionRequests == 1, "refused once, then not asked")
            #expect(try h.vault.tokens.current(for: alice)?.tokens.refreshToken != refreshToken, "checked by refresh: rotated")
            #expect(try await h.service.status(of: alice) == .active)
        }
    }

    @Test("an opaque refresh token whose expiry only introspection tells: warned of at its time")
    func introspectedExpiryWarning() async throws {
        let watch = GrantWatch(checkInterval: .seconds(86_400), refreshExpiryWarning: .seconds(3 * 86_400))
        try await SessionHarness.run(configuration: Self.configuration(watch)) { h in
            let time = h.time
            await h.gateway.setClock { time.now() }
            await h.gateway.setRefreshTokenLifetime(.seconds(10 * 86_400))
            let alice = try await h.signIn("alice", policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: nil), introspection: true)
            let expiry = h.time.at(.seconds(10 * 86_400))
            try await h.service.start()
            let mark = h.events.mark
            for day in 1...7 {
                #expect(await h.time.waitForSleeper(until: h.time.at(.seconds(day * 86_400))), "day \(day): \(h.time.sleepingUntil)")
                await h.time.advance(to: h.time.at(.seconds(day * 86_400)))
                #expect(await h.waitForGateway { $0.introspectionRequests >= day })
                if day < 7 {
                    #expect(await h.events.flush())
                    #expect(h.events.events(after: mark) { if case .refreshTokenExpiring = $0 { true } else { false } }.isEmpty, "not on day \(day)")
                }
            }
            let warned = await h.events.next(after: mark) { if case .refreshTokenExpiring = $0 { true } else { false } }
            #expect(warned == .refreshTokenExpiring(alice, expiresAt: Date(timeIntervalSince1970: expiry.timeIntervalSince1970.rounded(.down))))
            await h.expectTokenRequests(0)
        }
    }

    @Test("a provider's refresh_expires_in (Keycloak's member) on this process's refreshes: warned of once, at its time")
    func refreshExpiresInWarning() async throws {
        let watch = GrantWatch(checkInterval: .seconds(86_400), introspection: false, refreshExpiryWarning: .seconds(3 * 86_400))
        try await SessionHarness.run(configuration: Self.configuration(watch)) { h in
            let time = h.time
            await h.gateway.setClock { time.now() }
            await h.gateway.setRefreshTokenLifetime(.seconds(10 * 86_400))
            let alice = try await h.signIn(
                "alice", expiresIn: .seconds(30 * 86_400), policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: nil), introspection: true)
            let expiry = h.time.at(.seconds(10 * 86_400))
            try await h.service.start()
            let mark = h.events.mark
            func warnings() -> [SessionEvent] { h.events.events(after: mark) { if case .refreshTokenExpiring = $0 { true } else { false } } }
            for day in 1...7 {
                #expect(await h.time.waitForSleeper(until: h.time.at(.seconds(day * 86_400))), "day \(day): \(h.time.sleepingUntil)")
                await h.time.advance(to: h.time.at(.seconds(day * 86_400)))
                #expect(await h.waitForGateway { $0.tokenRequests == day }, "checked by refresh (introspection off)")
                #expect(await h.events.flush())
                if day < 7 { #expect(warnings().isEmpty, "not on day \(day)") }
            }
            #expect(await h.events.next(after: mark) { if case .refreshTokenExpiring = $0 { true } else { false } } != nil)
            guard case .refreshTokenExpiring(alice, let told)? = warnings().first else {
                Issue.record("no warning for alice: \(warnings())")
                return
            }
            #expect(abs(told.timeIntervalSince(expiry)) <= 1, "\(told) vs \(expiry)")
            #expect(warnings().count == 1)
            #expect(await h.gateway.stats().introspectionRequests == 0)
        }
    }

    /// A JWT with `claims` and no valid signature (the watch only reads `exp`).
    static func unsignedJWT(_ claims: [String: Any]) -> String {
        func encode(_ object: [String: Any]) -> String {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        return encode(["alg": "HS256", "typ": "JWT"]) + "." + encode(claims) + ".c2lnbmF0dXJl"
    }
}
