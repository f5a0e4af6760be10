import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-14 fixture vault, `Tests/Fixtures/vault-v14.db`: everything in
/// ``FixtureV13`` plus two accounts that are clients, not people (the client credentials
/// grant, which schema 14 stores): `backup-daemon` authenticates with a secret in the form body
/// (`client_secret_post`) and holds a token of its own and one for another API; `report-job`
/// authenticates with a signing key (`private_key_jwt`) sealed in the vault. Neither holds a
/// refresh token. Lena's account (a person's) signs in with `client_secret_post` too.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV14 {
    public static let fileName = "vault-v14.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v14"
    public static let backupSecret = "fixture-v14-backup-secret"
    public static let lenaSecret = "fixture-v14-lena-secret"
    /// A published test key (P-256, PKCS#8), protecting nothing.
    public static let reportKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgbFV6dx42LoB6rPE3
        x3xTk7TAdJYHB3zspat/JsCTLNahRANCAAQf2k/rhyV/Ik5aA/7XYmptamXdqeh6
        LdBEVNBmTM1sO4dAvoSNzkZ6SkAb63B11feWsm0Agi4YSLPn9y0t+PCx
        -----END PRIVATE KEY-----
        """
    public static let backupToken = TokenSet(
        accessToken: "fixture-v14-backup-access", tokenType: "Bearer", accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_010_800),
        scopes: ["backup:write"])
    public static let backupFilesToken = TokenSet(
        accessToken: "fixture-v14-backup-files", tokenType: "Bearer", accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_010_900),
        scopes: [])
    public static let reportToken = TokenSet(
        accessToken: "fixture-v14-report-access", tokenType: "Bearer", accessTokenExpiresAt: Date(timeIntervalSince1970: 1_790_011_000),
        scopes: ["reports"])

    public static func files() throws -> TokenTarget { try TokenTarget(resources: ["https://files.fixture.test/"]) }

    static let endpoint = URL(string: "https://id.fixture.test/token")!

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-14 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV13.populate(vault)
        let backup = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "backup-daemon", label: "backup-daemon",
                client: OAuthClientSettings(
                    tokenEndpoint: endpoint, clientID: "backup-daemon", authentication: .clientSecretPost, scopes: ["backup:write"]),
                clientSecret: backupSecret, subjectSource: .given, grant: .clientCredentials))
        try vault.tokens.store(backupToken, for: backup.id, replacing: nil)
        try vault.tokens.store(backupFilesToken, for: backup.id, target: try files())
        let report = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "report-job", label: "report-job",
                client: OAuthClientSettings(tokenEndpoint: endpoint, clientID: "report-job", authentication: .privateKeyJWT, scopes: ["reports"]),
                clientSigningKey: reportKey, subjectSource: .given, grant: .clientCredentials))
        try vault.tokens.store(reportToken, for: report.id, replacing: nil)
        _ = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "lena", label: "Lena",
                client: OAuthClientSettings(tokenEndpoint: endpoint, clientID: "fixture-web", authentication: .clientSecretPost),
                clientSecret: lenaSecret, subjectSource: .verified))
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV13.differences(in: vault, laterAccounts: 3 + laterAccounts)
        let accounts = try vault.accounts.all()
        guard let backup = accounts.first(where: { $0.subject == "backup-daemon" }),
            let report = accounts.first(where: { $0.subject == "report-job" }),
            let lena = accounts.first(where: { $0.subject == "lena" })
        else { return problems + ["a schema-14 account is missing"] }
        if backup.grant != .clientCredentials || backup.client.authentication != .clientSecretPost || !backup.hasClientSecret
            || backup.hasClientSigningKey || backup.client.scopes != ["backup:write"] || backup.client.clientID != "backup-daemon"
        {
            problems.append("backup-daemon: account differs")
        }
        if try vault.accounts.clientSecret(for: backup.id) != backupSecret { problems.append("backup-daemon: secret differs") }
        if try vault.tokens.current(for: backup.id)?.tokens != backupToken { problems.append("backup-daemon: tokens differ") }
        let files = try vault.tokens.token(for: backup.id, target: try files())
        if files?.accessToken != backupFilesToken.accessToken || files?.generation != 1 { problems.append("backup-daemon: files token differs") }
        if report.grant != .clientCredentials || report.client.authentication != .privateKeyJWT || report.hasClientSecret
            || !report.hasClientSigningKey
        {
            problems.append("report-job: account differs")
        }
        if try vault.accounts.clientSigningKey(for: report.id) != reportKey { problems.append("report-job: signing key differs") }
        if try vault.tokens.current(for: report.id)?.tokens != reportToken { problems.append("report-job: tokens differ") }
        if lena.grant != .delegated || lena.client.authentication != .clientSecretPost || lena.label != "Lena" {
            problems.append("lena: account differs")
        }
        if try vault.accounts.clientSecret(for: lena.id) != lenaSecret { problems.append("lena: secret differs") }
        if try vault.tokens.current(for: lena.id) != nil { problems.append("lena: tokens appeared") }
        return problems
    }
}
