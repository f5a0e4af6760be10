import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// Several processes on one vault file share one refresh through the lease in the vault.
@Suite("Refresh shared across processes", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct MultiProcessRefreshTests {
    @Test("4 processes × 50 callers: one request reaches the server and every caller gets the token the vault holds")
    func fourProcessesShareOneRefresh() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            let first = try h.firstTokens(of: "alice")
            let probes = try (0..<4).map { _ in try h.probe("tokens", "50") }
            for probe in probes {
                let ready = await probe.waitUntilReady()
                try #require(ready, "a probe did not start: \(probe.output.value)")
            }
            probes.forEach { $0.go() }
            var lines: [String] = []
            for probe in probes {
                let results = try await probe.results()
                #expect(results.count == 50)
                lines += results
            }

            await h.expectTokenRequests(1)
            let stored = try #require(try h.storedAccessToken(alice))
            #expect(stored != first.accessToken)
            #expect(Set(lines) == ["token \(digest(stored))"], "every caller in every process gets the token the vault holds")
            #expect(await h.gateway.reuseDetections() == 0)
        }
    }
}

/// Issue 34: refreshes for other targets take the account's lease like its own refresh, so
/// processes asking for both at once present one refresh token at a time.
@Suite("Tokens for targets shared across processes", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct MultiProcessTargetTests {
    @Test("3 processes × 20 callers, half for another API: one request for each token, no refresh token presented twice")
    func processesShareTargetRefreshes() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly, rotatesRefreshTokens: true)
            let files = h.gateway.resourceServer(named: "files")
            let probes = try (0..<3).map { _ in try h.probe("target", "20:\(files)") }
            for probe in probes {
                let ready = await probe.waitUntilReady()
                try #require(ready, "a probe did not start: \(probe.output.value)")
            }
            probes.forEach { $0.go() }
            var lines: [String] = []
            for probe in probes { lines += try await probe.results() }

            await h.expectTokenRequests(2)
            #expect(await h.gateway.reuseDetections() == 0)
            let own = try #require(try h.storedAccessToken(alice))
            let target = try #require(try h.vault.tokens.token(for: alice, target: try TokenTarget(resources: [files]))?.accessToken)
            #expect(Set(lines) == ["own \(digest(own))", "target \(digest(target))"], "\(Set(lines))")
        }
    }
}
