import DevGateway
import Foundation
import Logging
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultSync
import VaultTestSupport

/// Case 14 of issue 7: a server that revokes the whole family when a rotated refresh token is
/// replayed (RFC 9700 §4.14.2). The vault never replays one, however many callers and
/// "processes" (vault instances) refresh at once; when the server does revoke, the account ends
/// as revoked and the other accounts are untouched.
@Suite("Refresh-token reuse detection", .timeLimit(.minutes(TestTimeScale.minutes(20))))
struct ReuseDetectionTests {
    /// A wall clock the test moves forward; shared by every vault instance and service.
    final class MovableClock: Sendable {
        private let offset = Locked<TimeInterval>(0)
        var wallClock: WallClock { WallClock { [self] in Date().addingTimeInterval(offset.withLock { $0 }) } }
        func advance(by seconds: TimeInterval) { offset.withLock { $0 += seconds } }
    }

    @Test("concurrent refreshes from several vault instances never replay a token; a replay by someone else revokes only that account")
    func neverReplaysAndRevocationIsContained() async throws {
        let rounds = StressScale.current.count(test: 15, quick: 100, full: 500)
        let instances = 3
        let callersPerInstance = 4
        let logs = CapturedLogs()
        let gateway = try await DevGateway.start(logger: CapturedLogs().logger(label: "gateway"))
        let clock = MovableClock()
        let test = try TestVault(.keyFile)
        var vaults: [Vault] = []
        var services: [SessionService] = []
        let oauth = OAuthClient(logger: logs.logger(label: "oauth"))
        defer { vaults.forEach { $0.close() } }
        for index in 0..<instances {
            let vault = try index == 0 ? test.create(clock: clock.wallClock) : test.open(clock: clock.wallClock)
            vaults.append(vault)
            services.append(
                SessionService(
                    vault: vault, oauth: oauth, wallClock: clock.wallClock,
                    logger: logs.logger(label: "session.\(index)")))
        }
        var accounts: [String: AccountID] = [:]
        var firstRefreshTokens: [String: String] = [:]
        for subject in ["alice", "bob"] {
            let issued = await gateway.issueGrant(subject: subject, clientID: "vault-cli", accessTokenLifetime: .seconds(3600))
            firstRefreshTokens[subject] = issued.refreshToken
            accounts[subject] = try await services[0].signIn(
                NewAccount(
                    issuer: gateway.baseURL.absoluteString, subject: subject,
                    client: OAuthClientSettings(tokenEndpoint: gateway.tokenEndpoint, clientID: "vault-cli", scopes: ["openid"])),
                tokens: TokenSet(
                    accessToken: issued.accessToken, refreshToken: issued.refreshToken, tokenType: "Bearer",
                    accessTokenExpiresAt: clock.wallClock.now().addingTimeInterval(3600), scopes: ["openid"]),
                policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(10 * 365 * 86_400))
            ).id
        }
        let alice = try #require(accounts["alice"])
        let bob = try #require(accounts["bob"])

        // Rounds of "every token is stale, everyone asks at once": one refresh per account per round.
        var failures = 0
        for _ in 0..<rounds {
            clock.advance(by: 7_200)
            let results = await withTaskGroup(of: Bool.self) { group in
                for service in services {
                    for caller in 0..<callersPerInstance {
                        let account = caller % 2 == 0 ? alice : bob
                        group.addTask { (try? await service.validAccessToken(for: account)) != nil }
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            failures += results.filter { !$0 }.count
        }
        let presented = await gateway.presentedRefreshTokens()
        let replays = presented.count - Set(presented).count
        #expect(failures == 0, "\(failures) callers got no token")
        #expect(replays == 0, "the vault presented a spent refresh token \(replays) times")
        #expect(await gateway.reuseDetections() == 0)
        #expect(presented.count == 2 * rounds, "one refresh per account per round, got \(presented.count) for \(rounds) rounds")

        // Someone else replays alice's first (long spent) refresh token: the server revokes her family.
        let aliceFirst = try #require(firstRefreshTokens["alice"])
        do {
            _ = try await oauth.refresh(
                refreshToken: aliceFirst, scope: nil, endpoint: gateway.tokenEndpoint,
                client: ClientCredentials(clientID: "vault-cli"))
            Issue.record("the gateway accepted a replayed refresh token")
        } catch .invalidGrant {
        } catch {
            Issue.record("expected invalid_grant, got \(error)")
        }
        #expect(await gateway.reuseDetections() == 1)
        let bobBefore = try vaults[0].tokens(for: bob)

        // Alice ends as revoked, once, everywhere; bob goes on refreshing.
        clock.advance(by: 7_200)
        let requestsBefore = await gateway.tokenRequestCount()
        for service in services {
            do {
                _ = try await service.validAccessToken(for: alice)
                Issue.record("alice still got a token after her grant was revoked")
            } catch let error as SessionError {
                switch error {
                case .revoked(let id, _), .expired(let id, .revoked): #expect(id == alice)
                default: Issue.record("alice: expected revoked, got \(error)")
                }
            }
            #expect(try await service.status(of: alice) == .expired(.revoked))
        }
        #expect(await gateway.tokenRequestCount() == requestsBefore + 1, "alice's revocation must be learned once, not retried")
        #expect(try vaults[0].tokens(for: alice) == nil)
        #expect(try vaults[0].tokens(for: bob) == bobBefore, "bob's tokens must be untouched by alice's revocation")
        for service in services {
            let token = try await service.validAccessToken(for: bob)
            #expect(token.account == bob)
            #expect(try await service.status(of: bob) == .active)
        }
        let leaked = try await leakedTokens(gateway: gateway, logs: logs)
        #expect(leaked == 0, "token values in the logs")

        StressResults.record(
            StressCount(
                case: "14 reuse detection (\(rounds) rounds)", tried: rounds * instances * callersPerInstance,
                passed: rounds * instances * callersPerInstance - failures,
                lost: failures, leaked: replays + leaked))
        for service in services { await service.stop() }
        await gateway.stop()
    }

    /// How many refresh tokens the gateway saw appear in the vault's, session's or OAuth client's logs.
    func leakedTokens(gateway: DevGateway, logs: CapturedLogs) async throws -> Int {
        let presented = await gateway.presentedRefreshTokens()
        return Set(presented).filter(logs.contains).count
    }
}
