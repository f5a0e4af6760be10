import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-11 fixture vault, `Tests/Fixtures/vault-v11.db`: everything in
/// ``FixtureV10`` plus what schema 11 added: ivan shares erin's first credential host under a
/// user name of his own and was made its default (`set-host --default`), so erin stays the
/// default of her second host only.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV11 {
    public static let fileName = "vault-v11.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v11"
    public static let sharedHost = FixtureV6.hosts[0]
    public static let username = "ivan"

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-11 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV10.populate(vault)
        let ivan = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "ivan", label: "Ivan",
                client: OAuthClientSettings(
                    tokenEndpoint: URL(string: "https://id.fixture.test/token")!, clientID: "fixture-cli", scopes: ["openid"]),
                subjectSource: .verified))
        try vault.accounts.setCredentialHosts([sharedHost], username: username, makeDefault: true, for: ivan.id)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        // FixtureV6 knew one account with hosts; ivan is the second, checked here instead.
        var problems = try FixtureV10.differences(in: vault, laterAccounts: 1 + laterAccounts).filter { $0 != "hosts on another account" }
        let accounts = try vault.accounts.all()
        guard let ivan = accounts.first(where: { $0.subject == "ivan" }) else { return problems + ["ivan missing"] }
        guard let erin = accounts.first(where: { $0.subject == "erin" }) else { return problems + ["erin missing"] }
        if ivan.credentialHosts != [sharedHost] || ivan.credentialUsername != username || ivan.credentialDefaultHosts != [sharedHost] {
            problems.append("ivan: credential hosts differ: \(ivan.credentialHosts) \(ivan.credentialDefaultHosts)")
        }
        if erin.credentialDefaultHosts != [FixtureV6.hosts[1]] { problems.append("erin: default hosts differ: \(erin.credentialDefaultHosts)") }
        if accounts.contains(where: { $0.subject != "erin" && $0.subject != "ivan" && !$0.credentialHosts.isEmpty }) {
            problems.append("hosts on another account")
        }
        if ivan.label != "Ivan" || ivan.subjectSource != .verified { problems.append("ivan: account differs") }
        if try vault.accounts.activeID() == ivan.id { problems.append("ivan became the active account") }
        return problems
    }
}
