import Foundation
import GRDB
import Testing
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// The one read behind a token request (``TokenStore/accessSnapshot(for:)``): the rows it
/// returns are the account's newest session, its policy and its tokens, whichever account is
/// asked for, and nothing of another account's.
@Suite struct AccessSnapshotTests {
    @Test("the active account's or the named one's rows; the newest session; defaults without a policy; nil with no account")
    func selectsTheAccountsRows() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        #expect(try vault.tokens.accessSnapshot(for: nil) == nil, "no account is active")

        let policy = SessionPolicy(idleTimeout: .seconds(600))
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: policy).account.id
        let first = try #require(try vault.sessions.current(for: alice))
        // Signing in again ends the first session as replaced: the snapshot has the new one.
        let second = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice2"), policy: policy).session
        #expect(second.id != first.id)
        // An account with tokens and no stored policy (stored below the session layer).
        let bob = try vault.accounts.insert(Samples.account("bob")).id
        try vault.tokens.store(Samples.tokens("bob"), for: bob, replacing: nil)
        try vault.accounts.setActive(bob)

        let active = try #require(try vault.tokens.accessSnapshot(for: nil))
        #expect(active.activeAccount == bob && active.account == bob)
        #expect(active.token?.accessToken.hasPrefix("AT-bob") == true)
        #expect(active.policy == SessionPolicy(), "no stored policy: the defaults")

        let named = try #require(try vault.tokens.accessSnapshot(for: alice))
        #expect(named.activeAccount == bob && named.account == alice, "another account than the active one")
        #expect(named.session?.id == second.id && named.session?.state == .active, "the newest session")
        #expect(named.policy.idleTimeout == .seconds(600))
        #expect(named.token?.accessToken.hasPrefix("AT-alice2") == true)

        let unknown = try #require(try vault.tokens.accessSnapshot(for: AccountID(rawValue: "nobody")))
        #expect(unknown.session == nil && unknown.token == nil && unknown.policy == SessionPolicy())
    }
}
