import Foundation
import VaultStore

/// The records of the schema-7 fixture vault, `Tests/Fixtures/vault-v7.db`: everything in
/// ``FixtureV6`` plus what schema 7 added: grace's session came from another vault by a
/// sealed session export (moved), so her account has an origin, her session keeps the
/// original start and absolute deadline, and the transfer is remembered.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV7 {
    public static let fileName = "vault-v7.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v7"
    public static let transfer = "7a11f00d7a11f00d7a11f00d7a11f00d"
    public static let sender = "0123456789abcdef"
    public static let host = "laptop.fixture.test"
    public static let startedAt = Date(timeIntervalSince1970: 1_790_000_000)
    /// Far ahead, so the fixture's session is still open whenever the tests run.
    public static let absoluteDeadline = Date(timeIntervalSince1970: 4_100_000_000)
    public static let accessToken = "fixture-v7-access-grace"
    public static let refreshToken = "fixture-v7-refresh-grace"

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-7 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV6.populate(vault)
        let now = FixtureV1.created
        let account = NewAccount(
            issuer: "https://id.fixture.test", subject: "grace", label: "Grace (moved)", email: "grace@fixture.test",
            client: OAuthClientSettings(
                tokenEndpoint: URL(string: "https://id.fixture.test/token")!, clientID: "fixture-cli",
                scopes: ["openid"]),
            subjectSource: .verified)
        _ = try vault.transfers.importSession(
            SessionImport(
                account: account, credentialHosts: [], credentialUsername: nil,
                tokens: TokenSet(accessToken: accessToken, refreshToken: refreshToken, accessTokenExpiresAt: absoluteDeadline, scopes: ["openid"]),
                policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(3600)), startedAt: startedAt, authTime: startedAt,
                absoluteDeadline: absoluteDeadline,
                transfer: SessionTransferRecord(
                    id: transfer, direction: .import, mode: .move, account: AccountID(rawValue: ""), at: now,
                    expiresAt: absoluteDeadline, peer: sender),
                origin: AccountOrigin(transfer: transfer, importedAt: now, mode: .move, host: host, vault: sender)),
            eventOrigin: "fixture-maker")
        // The earlier fixtures' active account stays active (an import makes its account active).
        if let alice = try vault.accounts.all().first(where: { $0.subject == "alice" }) { try vault.accounts.setActive(alice.id) }
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV6.differences(in: vault, laterAccounts: 1 + laterAccounts, laterEventKinds: ["session_imported"])
        guard let grace = try vault.accounts.all().first(where: { $0.subject == "grace" }) else { return problems + ["grace missing"] }
        if grace.origin?.transfer != transfer || grace.origin?.vault != sender || grace.origin?.host != host || grace.origin?.mode != .move {
            problems.append("grace: origin differs")
        }
        let tokens = try vault.tokens.current(for: grace.id)?.tokens
        if tokens?.accessToken != accessToken || tokens?.refreshToken != refreshToken { problems.append("grace: tokens differ") }
        let session = try vault.sessions.current(for: grace.id)
        if session?.startedAt != startedAt || session?.absoluteDeadline != absoluteDeadline || session?.state != .active {
            problems.append("grace: session differs")
        }
        let transfers = try vault.transfers.all()
        if !transfers.contains(where: { $0.id == transfer && $0.direction == .import && $0.account == grace.id && $0.peer == sender }) {
            problems.append("the transfer is not remembered")
        }
        if !(try vault.events.latest(account: grace.id, limit: 10)).contains(where: { $0.kind == "session_imported" && $0.data["transfer"] == transfer }) {
            problems.append("the import event is missing")
        }
        return problems
    }
}
