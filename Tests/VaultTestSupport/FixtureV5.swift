import Foundation
import VaultStore

/// The records of the schema-5 fixture vault, `Tests/Fixtures/vault-v5.db`: everything in
/// ``FixtureV4`` plus what schema 5 added: an account signed in with discovered provider
/// metadata, a verified subject and an `auth_time` before the sign-in (erin), and a guest
/// upgraded into a registered account (frank), whose device and notification moved over,
/// re-sealed, and whose session ended `upgraded`.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV5 {
    public static let fileName = "vault-v5.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v5"

    public static let metadata = """
        {"authorization_endpoint":"https://id.fixture.test/oauth/authorize","device_authorization_endpoint":"https://id.fixture.test/oauth/device","issuer":"https://id.fixture.test","jwks_uri":"https://id.fixture.test/oauth/jwks","token_endpoint":"https://id.fixture.test/oauth/token","x_credentialvault_source":"openid-configuration"}
        """
    public static let erinAuthTime = FixtureV1.created.addingTimeInterval(-300)
    public static let erinTokens = TokenSet(
        accessToken: "fixture-access-erin", refreshToken: "fixture-refresh-erin", idToken: "fixture-id-erin", tokenType: "Bearer",
        accessTokenExpiresAt: FixtureV1.created.addingTimeInterval(3600), scopes: ["openid", "offline_access"])
    public static let guestTokens = TokenSet(
        accessToken: "fixture-access-guest", refreshToken: "fixture-refresh-guest", idToken: nil, tokenType: "Bearer",
        accessTokenExpiresAt: FixtureV1.created.addingTimeInterval(3600), scopes: ["openid"])
    public static let frankTokens = TokenSet(
        accessToken: "fixture-access-frank", refreshToken: "fixture-refresh-frank", idToken: nil, tokenType: "Bearer",
        accessTokenExpiresAt: FixtureV1.created.addingTimeInterval(3600), scopes: ["openid"])
    public static let guestDeviceName = "Guest's laptop"
    public static let guestNotification = "fixture-guest-notification"
    public static let guestMessage = "A guest's sealed message"

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-5 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV4.populate(vault)
        let active = try vault.accounts.activeID()
        let settings = FixtureV1.clientSettings(confidential: false)
        _ = try vault.accounts.signIn(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "erin", label: "Erin", email: "erin@fixture.test",
                client: settings, providerMetadata: metadata, subjectSource: .verified),
            tokens: erinTokens, policy: SessionPolicy(), authTime: erinAuthTime)
        let guest = try vault.accounts.signIn(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "guest-fixture", client: settings, providerMetadata: metadata,
                subjectSource: .verified, kind: .guest),
            tokens: guestTokens, policy: SessionPolicy()
        ).account.id
        try vault.devices.save(
            DeviceRegistration(
                id: "device-guest", account: guest, deviceID: vault.deviceID, name: guestDeviceName,
                platform: "linux", status: .active, activationMethod: .primary, createdAt: FixtureV1.created, updatedAt: FixtureV1.created))
        try vault.notifications.upsert(
            NotificationRecord(
                uuid: guestNotification, account: guest, subject: "Guest", message: guestMessage,
                actions: [NotificationAction(label: "OK", action: "ok")], createdAt: FixtureV1.created, expiresAt: nil))
        let frank = try vault.accounts.signIn(
            NewAccount(
                issuer: "https://id.fixture.test", subject: "frank", label: "Frank", client: settings,
                providerMetadata: metadata, subjectSource: .verified),
            tokens: frankTokens, policy: SessionPolicy()
        ).account.id
        _ = try vault.accounts.upgradeGuest(guest, to: frank)
        try vault.accounts.setActive(active)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0, laterEventKinds: [String] = []) throws -> [String] {
        var problems = try FixtureV4.differences(in: vault, laterAccounts: 3 + laterAccounts, laterEventKinds: laterEventKinds)
        let accounts = try vault.accounts.all()
        guard let erin = accounts.first(where: { $0.subject == "erin" }),
            let guest = accounts.first(where: { $0.subject == "guest-fixture" }),
            let frank = accounts.first(where: { $0.subject == "frank" })
        else {
            return problems + ["erin, the guest or frank missing"]
        }
        if erin.providerMetadata != metadata { problems.append("erin: provider metadata differs") }
        if erin.subjectSource != .verified || erin.kind != .registered { problems.append("erin: subject source or kind differs") }
        if erin.email != "erin@fixture.test" { problems.append("erin: e-mail differs") }
        if try vault.tokens.current(for: erin.id)?.tokens != erinTokens { problems.append("erin: tokens differ") }
        if try vault.sessions.current(for: erin.id)?.authTime != erinAuthTime { problems.append("erin: auth_time differs") }
        if guest.kind != .guest || guest.upgradedTo != frank.id { problems.append("guest: kind or upgrade link differs") }
        if try vault.tokens.current(for: guest.id) != nil { problems.append("guest: tokens left behind") }
        if try vault.sessions.current(for: guest.id)?.endReason != "upgraded" { problems.append("guest: session not ended upgraded") }
        if try vault.tokens.current(for: frank.id)?.tokens != frankTokens { problems.append("frank: tokens differ") }
        let devices = try vault.devices.all(for: frank.id)
        if devices.map(\.name) != [guestDeviceName] { problems.append("frank: devices \(devices.map(\.name))") }
        if try !vault.devices.all(for: guest.id).isEmpty { problems.append("guest: devices left behind") }
        let notification = try vault.notifications.find(guestNotification, account: frank.id)
        if notification?.message != guestMessage { problems.append("frank: the guest's notification did not move or does not open") }
        return problems
    }
}
