import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-10 fixture vault, `Tests/Fixtures/vault-v10.db`: everything in
/// ``FixtureV9`` plus what schema 10 added: heidi's provider registered its own loopback
/// redirect URI (a `localhost` one with a fixed port) and chains to a private CA; both are kept
/// with her account.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV10 {
    public static let fileName = "vault-v10.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v10"
    public static let redirectURI = "http://localhost:8400/oauth/callback"
    public static let caFile = "/etc/credentialvault-fixture/heidi-ca.pem"

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-10 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV9.populate(vault)
        try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "heidi", label: "Heidi",
                client: OAuthClientSettings(
                    tokenEndpoint: URL(string: "https://id.fixture.test/token")!, clientID: "fixture-cli",
                    scopes: ["openid"], redirectURI: redirectURI, caFile: caFile),
                subjectSource: .verified))
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV9.differences(in: vault, laterAccounts: 1 + laterAccounts)
        let accounts = try vault.accounts.all()
        guard let heidi = accounts.first(where: { $0.subject == "heidi" }) else { return problems + ["heidi missing"] }
        if heidi.client.redirectURI != redirectURI { problems.append("heidi: redirect URI differs: \(String(describing: heidi.client.redirectURI))") }
        if heidi.client.caFile != caFile { problems.append("heidi: CA file differs: \(String(describing: heidi.client.caFile))") }
        if heidi.label != "Heidi" || heidi.subjectSource != .verified { problems.append("heidi: account differs") }
        if accounts.contains(where: { $0.subject != "heidi" && ($0.client.redirectURI != nil || $0.client.caFile != nil) }) {
            problems.append("a redirect URI or CA file on another account")
        }
        if try vault.accounts.activeID() == heidi.id { problems.append("heidi became the active account") }
        return problems
    }
}
