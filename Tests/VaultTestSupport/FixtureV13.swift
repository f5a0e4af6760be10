import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-13 fixture vault, `Tests/Fixtures/vault-v13.db`: everything in
/// ``FixtureV12`` plus notifications of judy's, added and then pruned to the newest two, so the
/// header's commitment to her notifications is one that rows were both added to and taken from.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV13 {
    public static let fileName = "vault-v13.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v13"
    public static let kept = ["judy-2", "judy-3"]

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-13 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV12.populate(vault)
        guard let judy = try vault.accounts.all().first(where: { $0.subject == "judy" }) else { return }
        for index in 1...3 {
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: "judy-\(index)", account: judy.id, subject: "Sign-in \(index)", message: "Approve sign-in \(index)?",
                    actions: [NotificationAction(label: "Approve", action: "approve")],
                    createdAt: FixtureV1.created.addingTimeInterval(Double(index) * 60)))
        }
        _ = try vault.notifications.prune(keepNewest: 2, account: judy.id)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV12.differences(in: vault, laterAccounts: laterAccounts)
        guard let judy = try vault.accounts.all().first(where: { $0.subject == "judy" }) else { return problems + ["judy missing"] }
        let page = try vault.notifications.page(NotificationQuery(account: judy.id))
        let uuids = page.items.map(\.uuid).sorted()
        if uuids != kept { problems.append("judy: notifications differ: \(uuids)") }
        if page.items.contains(where: { $0.subject.isEmpty || $0.actions.count != 1 }) { problems.append("judy: a notification differs") }
        return problems
    }
}
