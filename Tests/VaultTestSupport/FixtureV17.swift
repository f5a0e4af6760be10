import Foundation
import VaultCrypto
@_spi(RawWrites) import VaultStore

/// The records of the schema-17 fixture vault, `Tests/Fixtures/vault-v17.db`: everything in
/// ``FixtureV16`` plus nora's account, signed in under a policy schema 17 stores: a sensitive
/// action extends her 2-hour session up to 30 days after sign-in, and her provider's refresh
/// tokens live 90 days.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV17 {
    public static let fileName = "vault-v17.db"
    /// The fixture's passphrase (slot 0): a published test value, protecting nothing.
    public static let passphrase = FixtureV16.passphrase
    public static let noraPolicy = SessionPolicy(
        idleTimeout: .seconds(900), warningBefore: .seconds(60), maxExtensions: 3, absoluteLifetime: .seconds(2 * 3600),
        backgroundTimeout: nil, idleAction: .lock, activity: .any, sensitiveActionCap: .seconds(30 * 86_400),
        refreshTokenLifetime: .seconds(90 * 86_400))
    public static let noraTokens = TokenSet(
        accessToken: "fixture-v17-nora-access", refreshToken: "fixture-v17-nora-refresh", idToken: nil, tokenType: "Bearer",
        accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_030_000), scopes: ["openid"])

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-17 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV16.populate(vault)
        let active = try vault.accounts.activeID()
        _ = try vault.accounts.signIn(
            NewAccount(issuer: "https://id.fixture.test", subject: "nora", label: "Nora", client: FixtureV1.clientSettings(confidential: false)),
            tokens: noraTokens, policy: noraPolicy)
        try vault.accounts.setActive(active)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV16.differences(in: vault, laterAccounts: 1 + laterAccounts)
        guard let nora = try vault.accounts.all().first(where: { $0.subject == "nora" }) else { return problems + ["nora missing"] }
        if nora.label != "Nora" { problems.append("nora: account differs") }
        if try vault.sessions.policy(for: nora.id) != noraPolicy { problems.append("nora: policy differs") }
        if try vault.tokens.current(for: nora.id)?.tokens != noraTokens { problems.append("nora: tokens differ") }
        guard let session = try vault.sessions.current(for: nora.id) else { return problems + ["nora: no session"] }
        if session.state != .active || session.absoluteDeadline != session.startedAt.addingTimeInterval(2 * 3600) {
            problems.append("nora: session differs: \(session)")
        }
        for other in try vault.accounts.all() where other.id != nora.id {
            let policy = try vault.sessions.policy(for: other.id)
            if policy.sensitiveActionCap != nil || policy.refreshTokenLifetime != nil { problems.append("\(other.subject): a schema-17 policy") }
        }
        return problems
    }
}
