import Foundation
@_spi(RawWrites) import VaultStore

/// The records of the schema-1 fixture vault, `Tests/Fixtures/vault-v1.db`.
///
/// Frozen: this file describes a file that has landed. A later schema adds its own
/// `FixtureVN` next to it; the tests open every fixture with the newest code and check
/// each record below survived and still opens.
public enum FixtureV1 {
    public static let fileName = "vault-v1.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v1"
    public static let created = Date(timeIntervalSince1970: 1_790_000_000)

    public struct AccountContent: Sendable {
        public var subject: String
        public var label: String
        public var email: String
        public var clientSecret: String?
        public var tokens: TokenSet
        public var deviceName: String
        public var notifications: [(uuid: String, subject: String, message: String, minutesAfter: Int, answered: String?)]
    }

    public static let accounts: [AccountContent] = [
        AccountContent(
            subject: "alice", label: "Alice at Work", email: "alice@example.test", clientSecret: nil,
            tokens: TokenSet(
                accessToken: "fixture-access-alice", refreshToken: "fixture-refresh-alice",
                idToken: "fixture-id-alice", tokenType: "Bearer",
                accessTokenExpiresAt: created.addingTimeInterval(3600), scopes: ["openid", "profile"]),
            deviceName: "alice's laptop",
            notifications: [
                ("00000000-0000-4000-8000-000000000001", "Sign-in request", "Approve sign-in from Berlin?", 1, nil),
                ("00000000-0000-4000-8000-000000000002", "New device", "Activate 'build box'?", 2, "approve"),
            ]),
        AccountContent(
            subject: "bob", label: "Bob (ops)", email: "bob@example.test", clientSecret: "fixture-client-secret-bob",
            tokens: TokenSet(
                accessToken: "fixture-access-bob", refreshToken: nil, idToken: nil, tokenType: "Bearer",
                accessTokenExpiresAt: nil, scopes: []),
            deviceName: "bob's desktop",
            notifications: [
                ("00000000-0000-4000-8000-000000000003", "Password changed", "Your password was changed.", 3, nil)
            ]),
    ]

    public static func clientSettings(confidential: Bool) -> OAuthClientSettings {
        OAuthClientSettings(
            tokenEndpoint: URL(string: "https://id.fixture.test/oauth/token") ?? URL(fileURLWithPath: "/token"),
            revocationEndpoint: URL(string: "https://id.fixture.test/oauth/revoke"),
            clientID: confidential ? "fixture-confidential" : "fixture-public",
            authentication: confidential ? .clientSecretBasic : .none,
            scopes: ["openid", "profile"])
    }

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-1 code).
    public static func populate(_ vault: Vault) throws {
        for content in accounts {
            let account = try vault.accounts.insert(
                NewAccount(
                    issuer: "https://id.fixture.test", subject: content.subject, label: content.label, email: content.email,
                    client: clientSettings(confidential: content.clientSecret != nil), clientSecret: content.clientSecret))
            try vault.tokens.store(content.tokens, for: account.id, replacing: nil)
            var session = try vault.sessions.start(
                for: account.id, idleDeadline: created.addingTimeInterval(900),
                absoluteDeadline: created.addingTimeInterval(43_200))
            session.extensionsUsed = 1
            try vault.sessions.update(session)
            try vault.devices.save(
                DeviceRegistration(
                    id: "device-\(content.subject)", account: account.id, deviceID: vault.deviceID, name: content.deviceName,
                    platform: "linux", status: .active, activationMethod: .primary, createdAt: created, updatedAt: created))
            for n in content.notifications {
                try vault.notifications.upsert(
                    NotificationRecord(
                        uuid: n.uuid, account: account.id, subject: n.subject, message: n.message,
                        actions: [NotificationAction(label: "Approve", action: "approve"), NotificationAction(label: "Reject", action: "reject")],
                        createdAt: created.addingTimeInterval(TimeInterval(n.minutesAfter * 60)),
                        expiresAt: created.addingTimeInterval(TimeInterval(n.minutesAfter * 60 + 300))))
                if let answer = n.answered {
                    _ = try vault.notifications.recordAnswer(
                        to: n.uuid, account: account.id, action: answer, byDevice: vault.deviceID,
                        at: created.addingTimeInterval(TimeInterval(n.minutesAfter * 60 + 30)))
                }
            }
        }
        try vault.accounts.setActive(try vault.accounts.all().first { $0.subject == "alice" }?.id)
    }

    /// Describes every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: how many accounts a later fixture added on top of these.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems: [String] = []
        let stored = try vault.accounts.all()
        let expected = accounts.count + laterAccounts
        if stored.count != expected { problems.append("expected \(expected) accounts, found \(stored.count)") }
        for content in accounts {
            guard let account = stored.first(where: { $0.subject == content.subject }) else {
                problems.append("account \(content.subject) is missing")
                continue
            }
            if account.label != content.label { problems.append("\(content.subject): label differs") }
            if account.email != content.email { problems.append("\(content.subject): email differs") }
            if try vault.accounts.clientSecret(for: account.id) != content.clientSecret { problems.append("\(content.subject): client secret differs") }
            let tokens = try vault.tokens.current(for: account.id)
            if tokens?.tokens != content.tokens { problems.append("\(content.subject): tokens differ") }
            let sessions = try vault.sessions.all(for: account.id)
            if sessions.count != 1 || sessions.first?.extensionsUsed != 1 || sessions.first?.state != .active {
                problems.append("\(content.subject): session differs")
            }
            let devices = try vault.devices.all(for: account.id)
            if devices.map(\.name) != [content.deviceName] || devices.first?.status != .active {
                problems.append("\(content.subject): device differs")
            }
            for n in content.notifications {
                guard let record = try vault.notifications.find(n.uuid, account: account.id) else {
                    problems.append("notification \(n.uuid) is missing")
                    continue
                }
                if record.subject != n.subject || record.message != n.message || record.actions.count != 2 {
                    problems.append("notification \(n.uuid): content differs")
                }
                if record.actionTaken != n.answered || (n.answered != nil) != (record.status == .answered) {
                    problems.append("notification \(n.uuid): answer differs")
                }
            }
        }
        if try vault.accounts.activeID() != stored.first(where: { $0.subject == "alice" })?.id {
            problems.append("active account differs")
        }
        return problems
    }
}
