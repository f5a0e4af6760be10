import Foundation
import VaultStore

/// The records of the schema-2 fixture vault, `Tests/Fixtures/vault-v2.db`: everything in
/// ``FixtureV1`` plus what schema 2 added (a stored session policy and shared refresh state).
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV2 {
    public static let fileName = "vault-v2.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v2"

    public static let alicePolicy = SessionPolicy(
        idleTimeout: .seconds(600), warningBefore: .seconds(30), maxExtensions: 2,
        absoluteLifetime: .seconds(8 * 3600), backgroundTimeout: nil, idleAction: .expire)
    public static let bobFailure = "server error (HTTP 503)"
    public static let bobRetryAt = FixtureV1.created.addingTimeInterval(120)

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-2 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV1.populate(vault)
        let accounts = try vault.accounts.all()
        guard let alice = accounts.first(where: { $0.subject == "alice" }),
            let bob = accounts.first(where: { $0.subject == "bob" }),
            let bobTokens = try vault.tokens.current(for: bob.id)
        else {
            throw VaultError(.recordNotFound, "fixture v1 records missing")
        }
        try vault.sessions.setPolicy(alicePolicy, for: alice.id)
        _ = try vault.leases.begin(for: bob.id, holder: "fixture", seenGeneration: bobTokens.generation, leaseDuration: .seconds(30))
        try vault.leases.fail(for: bob.id, holder: "fixture", failure: bobFailure, nextAttemptAt: bobRetryAt)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: how many accounts a later fixture added on top of these.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV1.differences(in: vault, laterAccounts: laterAccounts)
        let accounts = try vault.accounts.all()
        guard let alice = accounts.first(where: { $0.subject == "alice" }),
            let bob = accounts.first(where: { $0.subject == "bob" })
        else {
            return problems + ["fixture accounts missing"]
        }
        if try vault.sessions.policy(for: alice.id) != alicePolicy { problems.append("alice: session policy differs") }
        if try vault.sessions.policy(for: bob.id) != SessionPolicy() { problems.append("bob: default policy differs") }
        let state = try vault.leases.state(for: bob.id)
        if state.failures != 1 || state.lastFailure != bobFailure || state.nextAttemptAt != bobRetryAt || state.leaseHolder != nil {
            problems.append("bob: refresh state differs")
        }
        return problems
    }
}
