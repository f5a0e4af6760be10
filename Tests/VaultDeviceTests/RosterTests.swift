import DevGateway
import Foundation
import Testing
@_spi(RawWrites) import VaultStore
import VaultSync
import VaultTestSupport

@testable import VaultSession

/// The roster a server sends is stored whole or not at all; a device it stops listing is
/// marked, not deleted.
@Suite("Device roster sync")
struct RosterTests {
    /// The real API, with the roster edited on its way in.
    struct EditedRoster: DeviceNotificationAPI {
        let base: HTTPDeviceNotificationAPI
        let edit: @Sendable ([RemoteDevice]) -> [RemoteDevice]

        func register(_ device: DeviceDescriptor, account: AccountID) async throws -> DeviceEnrollment { try await base.register(device, account: account) }
        func device(_ deviceID: String, account: AccountID) async throws -> RemoteDevice { try await base.device(deviceID, account: account) }
        func startVerification(_ deviceID: String, account: AccountID) async throws -> ApprovalRequest {
            try await base.startVerification(deviceID, account: account)
        }
        func startFallback(_ deviceID: String, account: AccountID) async throws -> FallbackChallenge {
            try await base.startFallback(deviceID, account: account)
        }
        func activate(_ deviceID: String, code: ActivationCode, account: AccountID) async throws -> RemoteDevice {
            try await base.activate(deviceID, code: code, account: account)
        }
        func cancelActivation(_ deviceID: String, reason: ActivationCancelReason, account: AccountID) async throws -> RemoteDevice {
            try await base.cancelActivation(deviceID, reason: reason, account: account)
        }
        func devices(account: AccountID) async throws -> [RemoteDevice] { edit(try await base.devices(account: account)) }
        func rename(_ deviceID: String, to name: String, account: AccountID) async throws -> RemoteDevice {
            try await base.rename(deviceID, to: name, account: account)
        }
        func revoke(_ deviceID: String, account: AccountID) async throws -> RemoteDevice { try await base.revoke(deviceID, account: account) }
        func notifications(_ page: NotificationPageRequest, account: AccountID) async throws -> RemoteNotificationPage {
            try await base.notifications(page, account: account)
        }
        func answer(_ uuid: String, action: String, account: AccountID) async throws -> RemoteNotification {
            try await base.answer(uuid, action: action, account: account)
        }
    }

    @Test("a roster naming a device twice is refused whole; a device the server stops listing is kept, marked revoked")
    func rosterEdits() async throws {
        try await DeviceWorld.run { world in
            let a = try await world.device("Desk")
            let b = try await world.device("Laptop")
            _ = try await a.register()
            _ = try await b.register()
            _ = try await b.activation.startFallback(account: b.account)
            let code = try #require(await world.gateway.activationCode(subject: "alice", deviceID: b.vault.deviceID))
            _ = try await b.activation.activate(with: ActivationCode(code), account: b.account)
            #expect(try await a.roster.refresh(account: a.account).count == 2)
            let before = try a.vault.devices.all(for: a.account)

            let doubled = DeviceRoster(session: a.service, api: EditedRoster(base: a.api) { $0 + $0.prefix(1) })
            await #expect(throws: DeviceAPIError.self) { try await doubled.refresh(account: a.account) }
            #expect(try a.vault.devices.all(for: a.account) == before, "nothing of the refused roster was stored")

            // A roster whose new device would take a registration id another account of this vault
            // has: the write fails part-way, and nothing of it stays (one transaction).
            let bob = try a.vault.accounts.insert(Samples.account("bob"))
            let bobsDevice = DeviceRegistration(
                id: "reg-bob", account: bob.id, deviceID: "bobs-phone", name: "Phone", platform: "linux",
                status: .active, createdAt: Date(), updatedAt: Date())
            try a.vault.devices.save(bobsDevice)
            let clashing = DeviceRoster(
                session: a.service,
                api: EditedRoster(base: a.api) { devices in
                    devices.filter { $0.deviceID != b.vault.deviceID }
                        + [
                            RemoteDevice(
                                registrationID: "reg-bob", deviceID: "intruder", name: "X", platform: "linux", status: .active,
                                createdAt: Date(), updatedAt: Date())
                        ]
                })
            await #expect(throws: (any Error).self) { try await clashing.refresh(account: a.account) }
            #expect(try a.vault.devices.all(for: a.account) == before, "B was not marked gone, nothing was added")

            let withoutB = DeviceRoster(
                session: a.service,
                api: EditedRoster(base: a.api) { devices in
                    devices.filter { $0.deviceID != b.vault.deviceID }
                })
            let after = try await withoutB.refresh(account: a.account)
            #expect(after.count == 2, "the device the server dropped is kept")
            let gone = try #require(after.first { $0.deviceID == b.vault.deviceID })
            #expect(gone.status == .revoked && gone.statusReason == DeviceRoster.goneReason)
            #expect(after.first { $0.deviceID == a.vault.deviceID }?.status == .active)
        }
    }
}
