import Foundation
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Records written with the library, so the command's output can be checked against known
/// secret values.
enum Populate {
    /// Every secret or personal value `fill` writes; none may appear outside `vault token`.
    static let secrets = [
        "AT-cli-0123456789abcdef", "RT-cli-fedcba9876543210", "IDT-cli-aabbccdd", "client-secret-for-cli-test",
    ]
    static let personal = ["carol (work)", "carol@example.test", "carol's build box", "Approve deploy?", "Deploy 42 to prod"]

    /// An account "carol" with tokens, a client secret, a device and `notifications` notifications
    /// (one a day, newest now).
    @discardableResult
    static func fill(_ url: URL, keyFile: URL, notifications: Int = 3) throws -> AccountID {
        let vault = try Vault.open(at: url, credential: .keyFile(keyFile))
        defer { vault.close() }
        var client = Samples.client()
        client.authentication = .clientSecretBasic
        let account = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.example.test", subject: "carol", label: "carol (work)", email: "carol@example.test",
                client: client, clientSecret: "client-secret-for-cli-test"))
        try vault.tokens.store(Samples.tokens("cli"), for: account.id, replacing: nil)
        try vault.sessions.start(for: account.id, idleDeadline: nil, absoluteDeadline: Date(timeIntervalSinceNow: 3600))
        let now = Date()
        try vault.devices.save(
            DeviceRegistration(
                id: "registration-carol", account: account.id, deviceID: vault.deviceID, name: "carol's build box",
                platform: "linux", status: .active, activationMethod: .primary, createdAt: now, updatedAt: now))
        for day in 0..<notifications {
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: "00000000-0000-4000-8000-\(String(format: "%012d", day))", account: account.id,
                    subject: "Approve deploy?", message: "Deploy 42 to prod",
                    actions: [NotificationAction(label: "Approve", action: "approve")],
                    createdAt: now.addingTimeInterval(-Double(day) * 86_400)))
        }
        return account.id
    }
}
