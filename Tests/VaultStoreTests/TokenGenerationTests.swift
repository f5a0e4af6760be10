import Foundation
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Token stores are a compare-and-swap on the generation: a stale writer never wins.
@Suite struct TokenGenerationTests {
    @Test("storing with a stale generation is refused and the newer tokens stay", arguments: TestVault.Kind.allCases)
    func staleGenerationIsRefused(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        let first = try vault.tokens.store(Samples.fixedTokens("g1"), for: account.id, replacing: nil)
        let second = try vault.tokens.store(Samples.fixedTokens("g2"), for: account.id, replacing: first)
        #expect(second == first + 1)

        let error = expectVaultError(.staleGeneration) {
            try vault.tokens.store(Samples.fixedTokens("stale"), for: account.id, replacing: first)
        }
        #expect(error.map { !String(describing: $0).contains(Samples.fixedTokens("stale").accessToken) } == true)
        expectVaultError(.staleGeneration) { try vault.tokens.store(Samples.fixedTokens("fresh"), for: account.id, replacing: nil) }
        expectVaultError(.staleGeneration) { try vault.tokens.store(Samples.fixedTokens("ahead"), for: account.id, replacing: second + 1) }

        let stored = try #require(try vault.tokens.current(for: account.id))
        #expect(stored.tokens == Samples.fixedTokens("g2"))
        #expect(stored.generation == second)
    }

    @Test("of two vault handles refreshing the same generation, exactly one store wins")
    func twoHandlesRace() throws {
        let test = try TestVault()
        let first = try test.create()
        defer { first.close() }
        let account = try first.insertAccount(Samples.account())
        let generation = try first.writeTokens(Samples.fixedTokens("start"), for: account.id, replacing: nil)
        let second = try test.open()
        defer { second.close() }

        // Both read generation 1, both refresh; the second writer must lose.
        #expect(try second.tokens(for: account.id)?.generation == generation)
        let winner = try first.writeTokens(Samples.fixedTokens("winner"), for: account.id, replacing: generation)
        expectVaultError(.staleGeneration) { try second.writeTokens(Samples.fixedTokens("loser"), for: account.id, replacing: generation) }
        #expect(try second.tokens(for: account.id)?.tokens == Samples.fixedTokens("winner"))
        #expect(try second.tokens(for: account.id)?.generation == winner)
    }

    @Test("storing tokens for an account the vault does not hold is refused")
    func unknownAccount() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        expectVaultError(.recordNotFound) {
            try vault.tokens.store(Samples.fixedTokens("orphan"), for: AccountID(rawValue: "no-such-account"), replacing: nil)
        }
    }

    @Test("wiping tokens keeps the account and lets a fresh store start over")
    func wipeTokens() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("w1"), for: account.id, replacing: nil)
        #expect(try vault.tokens.delete(for: account.id))
        #expect(try vault.tokens.current(for: account.id) == nil)
        #expect(try vault.tokens.metadata(for: account.id) == nil)
        #expect(try vault.accounts.find(account.id) != nil)
        #expect(try vault.tokens.store(Samples.fixedTokens("w2"), for: account.id, replacing: nil) == 1)
    }
}
