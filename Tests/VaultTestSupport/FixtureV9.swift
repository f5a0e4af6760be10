import Foundation
import VaultStore

/// The records of the schema-9 fixture vault, `Tests/Fixtures/vault-v9.db`: everything in
/// ``FixtureV8`` plus what schema 9 added: this install waits, as a device of grace's account,
/// on an approval request until a stored deadline.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV9 {
    public static let fileName = "vault-v9.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v9"
    public static let registration = "device-grace-pending"
    public static let deviceName = "Grace's new laptop"
    public static let approval = PendingApproval(
        notification: "9a9a9a9a-0000-4000-8000-000000000009", requestedAt: FixtureV1.created,
        deadline: Date(timeIntervalSince1970: 4_100_000_000))

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-9 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV8.populate(vault)
        guard let grace = try vault.accounts.all().first(where: { $0.subject == "grace" }) else { return }
        try vault.devices.save(
            DeviceRegistration(
                id: registration, account: grace.id, deviceID: vault.deviceID, name: deviceName, platform: "linux", status: .pending,
                createdAt: FixtureV1.created, updatedAt: FixtureV1.created, pendingApproval: approval))
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV8.differences(in: vault, laterAccounts: laterAccounts)
        guard let device = try vault.devices.find(registration) else { return problems + ["grace's pending device missing"] }
        if device.name != deviceName || device.status != .pending || device.deviceID != vault.deviceID {
            problems.append("grace's device differs")
        }
        if device.pendingApproval != approval { problems.append("the pending approval differs: \(String(describing: device.pendingApproval))") }
        if try vault.devices.all().contains(where: { $0.id != registration && $0.pendingApproval != nil }) {
            problems.append("an approval request on another device")
        }
        return problems
    }
}
