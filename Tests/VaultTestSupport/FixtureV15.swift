import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-15 fixture vault, `Tests/Fixtures/vault-v15.db`: everything in
/// ``FixtureV14`` plus mona's account, whose tokens are bound to a DPoP key (RFC 9449) the vault
/// keeps sealed, which schema 15 stores; her tokens are of type `DPoP`.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV15 {
    public static let fileName = "vault-v15.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v15"
    /// A published test key (P-256, PKCS#8), protecting nothing.
    public static let monaKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgz/w95n2kMqkRau4N
        LD6RgoKwVulasMqiFovBh+b/p62hRANCAAT7q0oA7Wo1KhxekytWrb3B+vrG2Eck
        YFQjTAudQXwGf/xpLElq9zuCaKPHTakaW9Ksp1s+813vkvQli6ptw3BA
        -----END PRIVATE KEY-----
        """
    public static let monaTokens = TokenSet(
        accessToken: "fixture-v15-mona-access", refreshToken: "fixture-v15-mona-refresh", idToken: nil, tokenType: "DPoP",
        accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_020_000), scopes: ["openid", "files.read"])

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-15 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV14.populate(vault)
        let mona = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "mona", label: "Mona",
                client: OAuthClientSettings(
                    tokenEndpoint: URL(string: "https://id.fixture.test/token")!, clientID: "fixture-cli", scopes: ["openid", "files.read"]),
                subjectSource: .verified, dpopKey: monaKey))
        try vault.tokens.store(monaTokens, for: mona.id, replacing: nil)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV14.differences(in: vault, laterAccounts: 1 + laterAccounts)
        guard let mona = try vault.accounts.all().first(where: { $0.subject == "mona" }) else { return problems + ["mona missing"] }
        if !mona.hasDPoPKey || mona.label != "Mona" || mona.grant != .delegated { problems.append("mona: account differs") }
        if try vault.accounts.dpopKey(for: mona.id) != monaKey { problems.append("mona: DPoP key differs") }
        if try vault.tokens.current(for: mona.id)?.tokens != monaTokens { problems.append("mona: tokens differ") }
        for other in try vault.accounts.all() where other.id != mona.id && other.hasDPoPKey {
            problems.append("\(other.subject) has a DPoP key")
        }
        return problems
    }
}
