import Foundation
import VaultStore

/// The records of the schema-6 fixture vault, `Tests/Fixtures/vault-v6.db`: everything in
/// ``FixtureV5`` plus what schema 6 added: erin's token is handed to two credential hosts
/// (one with a path prefix) under a user name of her own.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV6 {
    public static let fileName = "vault-v6.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v6"
    public static let hosts = ["git.fixture.test/team", "registry.fixture.test:5000"]
    public static let username = "erin-bot"

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-6 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV5.populate(vault)
        guard let erin = try vault.accounts.all().first(where: { $0.subject == "erin" }) else { return }
        try vault.accounts.setCredentialHosts(hosts, username: username, for: erin.id)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0, laterEventKinds: [String] = []) throws -> [String] {
        var problems = try FixtureV5.differences(in: vault, laterAccounts: laterAccounts, laterEventKinds: laterEventKinds)
        let accounts = try vault.accounts.all()
        guard let erin = accounts.first(where: { $0.subject == "erin" }) else { return problems + ["erin missing"] }
        if erin.credentialHosts != hosts || erin.credentialUsername != username { problems.append("erin: credential hosts differ") }
        if accounts.contains(where: { $0.subject != "erin" && !$0.credentialHosts.isEmpty }) { problems.append("hosts on another account") }
        return problems
    }
}
