import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// ``AccountState``: the seeds' states in one vocabulary, from what the vault holds.
@Suite("Account states in the seeds' words")
struct AccountStateTests {
    @Test("signed in, a device pending, locked at the idle deadline, ended by revocation, signed out, never signed in")
    func everyState() async throws {
        try await SessionHarness.run { h in
            #expect(try await h.service.accountState() == .inactive, "no account yet")
            let alice = try await h.signIn("alice", policy: SessionPolicy(idleTimeout: .seconds(600), absoluteLifetime: .seconds(3600)))
            #expect(try await h.service.accountState(of: alice) == .activeSignedIn)
            let session = try #require(try h.vault.sessions.current(for: alice))
            let policy = try h.vault.sessions.policy(for: alice)
            #expect(AccountState(session: session, policy: policy, thisDevice: .pending, now: h.time.now()) == .activeDevicePending)
            #expect(AccountState(session: session, policy: policy, thisDevice: .active, now: h.time.now()) == .activeSignedIn)
            #expect(AccountState(session: session, policy: policy, thisDevice: nil, now: h.time.at(.seconds(601))) == .locked(.idleTimeout))
            #expect(AccountState(session: nil, policy: policy, thisDevice: nil, now: h.time.now()) == .inactive)
            _ = await h.gateway.revokeGrants(subject: "alice")
            _ = await sessionError { try await h.service.reportCurrentTokenUnauthorized(for: alice) }
            let state = try await h.service.accountState(of: alice)
            #expect(state == .expired(.revoked) && state.name == "expired" && state.description == "expired (revoked)")
        }
    }
}
