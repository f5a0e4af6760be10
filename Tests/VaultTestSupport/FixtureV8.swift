import Foundation
import VaultStore

/// The records of the schema-8 fixture vault, `Tests/Fixtures/vault-v8.db`: everything in
/// ``FixtureV7`` plus what schema 8 added: alice keeps 90 days and at most 1000 notifications.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV8 {
    public static let fileName = "vault-v8.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v8"
    public static let retention = NotificationRetention(days: 90, count: 1000)

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-8 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV7.populate(vault)
        guard let alice = try vault.accounts.all().first(where: { $0.subject == "alice" }) else { return }
        try vault.accounts.setNotificationRetention(retention, for: alice.id)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV7.differences(in: vault, laterAccounts: laterAccounts)
        let accounts = try vault.accounts.all()
        if accounts.first(where: { $0.subject == "alice" })?.notificationRetention != retention { problems.append("alice: retention differs") }
        if accounts.contains(where: { $0.subject != "alice" && $0.notificationRetention != nil }) { problems.append("retention on another account") }
        return problems
    }
}
