import Foundation
import VaultStore

/// The records of the schema-3 fixture vault, `Tests/Fixtures/vault-v3.db`: everything in
/// ``FixtureV2`` plus what schema 3 added: an account with SPKI pins, the server's words about a
/// failure sealed next to the plain classification, and a MAC on every row.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV3 {
    public static let fileName = "vault-v3.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v3"

    public static let carolPins = [
        "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/Y9mvm0exBk1JoQ57f9Vm28jKo5lFm/woKcVxrYxu80o=",
    ]
    public static let carolTokens = TokenSet(
        accessToken: "fixture-access-carol", refreshToken: "fixture-refresh-carol", idToken: nil, tokenType: "Bearer",
        accessTokenExpiresAt: FixtureV1.created.addingTimeInterval(1800), scopes: ["openid"])
    public static let carolFailure = "the authorization server refused the refresh (HTTP 400)"
    public static let carolFailureDetail = "the server's own words: request rejected"

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-3 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV2.populate(vault)
        let active = try vault.accounts.activeID()
        var client = FixtureV1.clientSettings(confidential: false)
        client.pins = carolPins
        let record = try vault.accounts.signIn(
            NewAccount(issuer: "https://id.fixture.test", subject: "carol", label: "Carol", client: client),
            tokens: carolTokens, policy: SessionPolicy(idleTimeout: nil))
        _ = try vault.leases.begin(
            for: record.account.id, holder: "fixture", seenGeneration: record.generation,
            leaseDuration: .seconds(30))
        try vault.leases.fail(
            for: record.account.id, holder: "fixture", failure: carolFailure, detail: carolFailureDetail,
            nextAttemptAt: FixtureV1.created.addingTimeInterval(60))
        try vault.accounts.setActive(active)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV2.differences(in: vault, laterAccounts: 1 + laterAccounts)
        guard let carol = try vault.accounts.all().first(where: { $0.subject == "carol" }) else {
            return problems + ["carol missing"]
        }
        if carol.client.pins != carolPins { problems.append("carol: pins differ") }
        if try vault.tokens.current(for: carol.id)?.tokens != carolTokens { problems.append("carol: tokens differ") }
        let state = try vault.leases.state(for: carol.id)
        if state.lastFailure != carolFailure || state.lastFailureDetail != carolFailureDetail || state.failures != 1 {
            problems.append("carol: refresh state differs")
        }
        if try vault.sessions.policy(for: carol.id).idleTimeout != nil { problems.append("carol: policy differs") }
        return problems
    }
}
