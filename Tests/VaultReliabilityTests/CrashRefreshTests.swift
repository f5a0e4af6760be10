import DevGateway
import Foundation
import Logging
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// Case 2 of issue 7: a process killed after the server rotated the refresh token and before the
/// vault stored the new one (README, "Refresh across processes, and crashes").
///
/// The child (SessionProbe `refresh-and-hang`) refreshes through the real SessionService; its
/// transport prints `received` once the gateway's answer is in and then never returns, so the
/// kill lands exactly between receipt and `completeRefresh`. A second process then takes over
/// the lease once it expired.
@Suite("Crash: SIGKILL between a rotated token's receipt and its commit", .timeLimit(.minutes(TestTimeScale.minutes(10))))
struct CrashRefreshTests {
    enum Server: String, CaseIterable, CustomStringConvertible {
        /// Rotates refresh tokens and revokes the family when a spent one comes back (RFC 9700 §4.14.2).
        case strictRotation
        /// Does not rotate: the old refresh token stays good, as with a server's retry grace.
        case noRotation
        var description: String { rawValue }
    }

    @Test(
        "after the kill the account keeps its old tokens with the interruption recorded, then ends in a defined state without retrying",
        arguments: Server.allCases)
    func killedBetweenReceiptAndCommit(server: Server) async throws {
        let rounds = StressScale.current.count(test: 1, quick: 5, full: 20)
        var passed = 0
        var lost = 0
        var leaked = 0
        for _ in 0..<rounds {
            let outcome = try await oneRound(server)
            if outcome.ok { passed += 1 }
            lost += outcome.lost
            leaked += outcome.leaked
        }
        StressResults.record(
            StressCount(
                case: "2 kill between receipt and commit (\(server))", tried: rounds, passed: passed,
                lost: lost, leaked: leaked))
        #expect(passed == rounds)
    }

    func oneRound(_ server: Server) async throws -> (ok: Bool, lost: Int, leaked: Int) {
        let logs = CapturedLogs()
        let gateway = try await DevGateway.start(logger: CapturedLogs().logger(label: "gateway"))
        let test = try TestVault(.keyFile)
        guard case .keyFile(let keyFile) = test.credential else { return (false, 0, 0) }
        var lost = 0
        var leaked = 0
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli", rotatesRefreshTokens: server == .strictRotation)
        let account: AccountID
        do {
            let vault = try test.create()
            let service = SessionService(
                vault: vault, oauth: OAuthClient(logger: logs.logger(label: "oauth")),
                logger: logs.logger(label: "session"))
            // The access token is inside the leeway: the child's first call refreshes.
            account = try await service.signIn(
                NewAccount(
                    issuer: gateway.baseURL.absoluteString, subject: "alice",
                    client: OAuthClientSettings(tokenEndpoint: gateway.tokenEndpoint, clientID: "vault-cli", scopes: ["openid"])),
                tokens: TokenSet(
                    accessToken: issued.accessToken, refreshToken: issued.refreshToken, tokenType: "Bearer",
                    accessTokenExpiresAt: Date().addingTimeInterval(10), scopes: ["openid"]),
                policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(24 * 3600))
            ).id
            await service.stop()
            vault.close()
        }

        // 1. The child refreshes; the gateway answers (and, strict, spends the old refresh token); kill.
        let child = try stressChild(vault: test.url, keyFile: keyFile, "refresh-and-hang", "500")
        let received = await child.waitForLine { $0.hasPrefix("received") }
        await child.kill()
        try #require(received, "the child never got the gateway's answer: \(child.output.value)")
        #expect(child.output.value.lines.contains("received 200"))
        #expect(await gateway.tokenRequestCount() == 1)

        // 2. Restart: the old tokens are still there, nothing was lost, the lease names the dead process.
        // The new process's clock is past the child's 500 ms lease, so it takes the lease over.
        let later = WallClock { Date().addingTimeInterval(5) }
        let vault = try test.open(clock: later)
        defer { vault.close() }
        let kept = try vault.tokens.current(for: account)
        if kept?.tokens.refreshToken != issued.refreshToken { lost += 1 }
        #expect(kept?.tokens.refreshToken == issued.refreshToken, "the old refresh token must still be stored")
        #expect(try vault.leases.state(for: account).leaseHolder != nil)
        // The killed process's transaction left nothing half-done: every counter, manifest entry
        // and commitment matches the rows (issue 31).
        #expect(try vault.maintenance.verify().passed, "a kill mid-refresh leaves the vault's commitments whole")

        var configuration = SessionConfiguration()
        configuration.leaseDuration = .seconds(5)
        let service = SessionService(
            vault: vault, oauth: OAuthClient(logger: logs.logger(label: "oauth")), wallClock: later,
            configuration: configuration, logger: logs.logger(label: "session"))
        var ok = true
        switch server {
        case .strictRotation:
            // The old refresh token is spent at the server: refused, the session ends as revoked
            // and names the interruption. One request, no retry.
            do {
                _ = try await service.validAccessToken()
                Issue.record("a strict server accepted a spent refresh token")
                ok = false
            } catch let SessionError.revoked(id, description) {
                #expect(id == account)
                #expect(description?.contains("interrupted") == true, "\(description ?? "no description")")
            }
            #expect(try await service.status(of: account) == .expired(.revoked))
            #expect(try vault.tokens.current(for: account) == nil)
            #expect(await gateway.reuseDetections() == 1)
        case .noRotation:
            // The old refresh token still works: the refresh succeeds and the session goes on.
            let token = try await service.validAccessToken()
            #expect(token.account == account)
            #expect(try await service.status(of: account) == .active)
            let stored = try vault.tokens.current(for: account)
            #expect(stored?.tokens.refreshToken == issued.refreshToken && stored?.tokens.accessToken != issued.accessToken)
        }
        let state = try vault.leases.state(for: account)
        #expect(state.interruptedRefreshes == 1, "the takeover must be recorded")
        #expect(state.leaseHolder == nil)
        if state.interruptedRefreshes != 1 { ok = false }

        // 3. Never a silent retry loop: asking again sends nothing more to the server.
        for _ in 0..<3 { _ = try? await service.validAccessToken() }
        let requests = await gateway.tokenRequestCount()
        #expect(requests == 2, "token requests: \(requests)")
        if requests != 2 {
            leaked += 1
            ok = false
        }
        // And no token value in the logs of the vault, session or OAuth client.
        let secrets = [issued.refreshToken, issued.accessToken].compactMap { $0 }
        #expect(!secrets.contains(where: logs.contains), "a token value appears in the logs")
        await service.stop()
        await gateway.stop()
        return (ok && lost == 0, lost, leaked)
    }
}
