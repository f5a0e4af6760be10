import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-13 fixture vault, `Tests/Fixtures/vault-v13.db`: everything in
/// ``FixtureV12`` plus an account with tokens for other targets, which schema 13 stores: kate's
/// token for the files API was stored and then replaced (generation 2), her token for the mail
/// and calendar APIs with a narrower scope stored once, so the commitment to her rows is one a
/// row was both added to and replaced in; and her credential host hands the files token.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV13 {
    public static let fileName = "vault-v13.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v13"
    public static let own = TokenSet(
        accessToken: "fixture-v13-access", refreshToken: "fixture-v13-refresh", idToken: nil, tokenType: "Bearer",
        accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_003_600), scopes: ["openid", "files.read", "mail.read"])
    public static let filesToken = TokenSet(
        accessToken: "fixture-v13-files-2", tokenType: "Bearer", accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_007_200),
        scopes: ["files.read"])
    public static let mailToken = TokenSet(
        accessToken: "fixture-v13-mail-1", tokenType: "DPoP", accessTokenExpiresAt: nil, scopes: [])

    public static func files() throws -> TokenTarget { try TokenTarget(resources: ["https://files.fixture.test/"]) }
    public static func mail() throws -> TokenTarget {
        try TokenTarget(resources: ["https://mail.fixture.test/", "https://calendar.fixture.test/"], scopes: ["mail.read"])
    }

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-13 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV12.populate(vault)
        let kate = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "kate", label: "Kate",
                client: OAuthClientSettings(
                    tokenEndpoint: URL(string: "https://id.fixture.test/token")!, clientID: "fixture-cli", scopes: ["openid"]),
                subjectSource: .verified))
        try vault.tokens.store(own, for: kate.id, replacing: nil)
        var first = filesToken
        first.accessToken = "fixture-v13-files-1"
        try vault.tokens.store(first, for: kate.id, target: try files())
        try vault.tokens.store(mailToken, for: kate.id, target: try mail())
        try vault.tokens.store(filesToken, for: kate.id, target: try files())
        try vault.accounts.setCredentialHosts(["files.fixture.test"], username: "kate", target: try files(), for: kate.id)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        // FixtureV11 knew two accounts with hosts; kate is the third, checked here instead.
        var problems = try FixtureV12.differences(in: vault, laterAccounts: 1 + laterAccounts).filter { $0 != "hosts on another account" }
        let accounts = try vault.accounts.all()
        guard let kate = accounts.first(where: { $0.subject == "kate" }) else { return problems + ["kate missing"] }
        if accounts.contains(where: { !["erin", "ivan", "kate"].contains($0.subject) && !$0.credentialHosts.isEmpty }) {
            problems.append("hosts on another account")
        }
        if kate.label != "Kate" || kate.credentialHosts != ["files.fixture.test"] || kate.credentialUsername != "kate" {
            problems.append("kate: account differs")
        }
        if kate.credentialTarget != (try files()) { problems.append("kate: credential target differs: \(kate.credentialTarget)") }
        if try vault.tokens.current(for: kate.id)?.tokens != own { problems.append("kate: own tokens differ") }
        // Read through the commitment check: a row that did not survive as written is refused.
        let files = try vault.tokens.token(for: kate.id, target: try files())
        if files?.accessToken != filesToken.accessToken || files?.generation != 2 || files?.expiresAt != filesToken.accessTokenExpiresAt
            || files?.scopes != ["files.read"] || files?.tokenType != "Bearer"
        {
            problems.append("kate: files token differs")
        }
        let mail = try vault.tokens.token(for: kate.id, target: try mail())
        if mail?.accessToken != mailToken.accessToken || mail?.generation != 1 || mail?.expiresAt != nil || mail?.scopes != ["mail.read"]
            || mail?.tokenType != "DPoP"
        {
            problems.append("kate: mail token differs")
        }
        if try vault.tokens.targetTokens(for: kate.id).count != 2 { problems.append("kate: not exactly two targets") }
        return problems
    }
}
