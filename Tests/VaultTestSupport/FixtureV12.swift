import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-12 fixture vault, `Tests/Fixtures/vault-v12.db`: everything in
/// ``FixtureV11`` plus an account written at several write counters, which schema 12 records:
/// judy's tokens were stored and then replaced (generation 2), and her policy was set after
/// them, so her rows carry different counters and the state's manifest names each; and
/// notifications of hers added and then pruned to the newest two, so the commitment to them is
/// one rows were both added to and taken from.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV12 {
    public static let fileName = "vault-v12.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v12"
    public static let refreshed = TokenSet(
        accessToken: "fixture-v12-access-2", refreshToken: "fixture-v12-refresh-2", idToken: nil, tokenType: "Bearer",
        accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_003_600), scopes: ["openid", "profile"])
    public static let policy = SessionPolicy(idleTimeout: .seconds(300), maxExtensions: 2, idleAction: .expire)
    public static let keptNotifications = ["judy-2", "judy-3"]

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-12 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV11.populate(vault)
        let judy = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "judy", label: "Judy",
                client: OAuthClientSettings(
                    tokenEndpoint: URL(string: "https://id.fixture.test/token")!, clientID: "fixture-cli", scopes: ["openid"]),
                subjectSource: .verified))
        var first = refreshed
        first.accessToken = "fixture-v12-access-1"
        first.refreshToken = "fixture-v12-refresh-1"
        let generation = try vault.tokens.store(first, for: judy.id, replacing: nil)
        _ = try vault.tokens.store(refreshed, for: judy.id, replacing: generation)
        try vault.sessions.setPolicy(policy, for: judy.id)
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
        var problems = try FixtureV11.differences(in: vault, laterAccounts: 1 + laterAccounts)
        guard let judy = try vault.accounts.all().first(where: { $0.subject == "judy" }) else { return problems + ["judy missing"] }
        if judy.label != "Judy" || judy.subjectSource != .verified { problems.append("judy: account differs") }
        // Read through the manifest checks: a row that did not survive as written is refused.
        let tokens = try vault.tokens.current(for: judy.id)
        if tokens?.tokens != refreshed || tokens?.generation != 2 { problems.append("judy: tokens differ") }
        if try vault.sessions.policy(for: judy.id) != policy { problems.append("judy: policy differs") }
        if try vault.accounts.activeID() == judy.id { problems.append("judy became the active account") }
        let page = try vault.notifications.page(NotificationQuery(account: judy.id))
        if page.items.map(\.uuid).sorted() != keptNotifications { problems.append("judy: notifications differ: \(page.items.map(\.uuid))") }
        if page.items.contains(where: { $0.subject.isEmpty || $0.actions.count != 1 }) { problems.append("judy: a notification differs") }
        return problems
    }
}
