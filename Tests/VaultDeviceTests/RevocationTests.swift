import DevGateway
import Foundation
import Testing
import VaultStore
import VaultTestSupport

@testable import VaultSession

/// A device the server revoked ends its session as expired(device revoked), tokens wiped.
@Suite struct RevokedDeviceTests {
    @Test func aDeviceRevokedByTheAdministratorEndsItsSession() async throws {
        try await DeviceWorld.run { world in
            let a = try await world.device("Desk workstation")
            _ = try await a.register()
            #expect(try a.vault.tokens.current(for: a.account) != nil)

            #expect(await world.gateway.revokeDevice(subject: "alice", deviceID: a.vault.deviceID))
            await #expect(throws: SessionError.expired(a.account, .deviceRevoked)) {
                try await a.inbox.sync(account: a.account)
            }
            #expect(try a.vault.tokens.current(for: a.account) == nil, "the revoked device's tokens must be wiped")
            #expect(try await a.service.status(of: a.account) == .expired(.deviceRevoked))
            await #expect(throws: SessionError.expired(a.account, .deviceRevoked)) {
                try await a.service.validAccessToken(for: a.account)
            }
            #expect(await a.sessionEvents.wait { $0.contains(.stateChanged(a.account, .expired(.deviceRevoked))) })
            let registration = try #require(try a.vault.devices.thisDevice(for: a.account))
            #expect(registration.status == .revoked)
            // No further request is sent for an ended session.
            let sent = a.transport.requests.count
            await #expect(throws: SessionError.self) { try await a.inbox.sync(account: a.account) }
            #expect(a.transport.requests.count == sent)
        }
    }

    @Test func terminatingADeviceFromTheDevicesScreenEndsThatDevicesSession() async throws {
        try await DeviceWorld.run { world in
            let a = try await world.device("Desk workstation")
            let b = try await world.device("Old phone")
            _ = try await a.register()
            _ = try await b.register()
            _ = try await b.activation.startFallback(account: b.account)
            let code = try #require(await world.gateway.activationCode(subject: "alice", deviceID: b.vault.deviceID))
            _ = try await b.activation.activate(with: ActivationCode(code), account: b.account)

            // The devices screen on A: both devices, with platform, status and last activity.
            let listed = try await a.roster.refresh(account: a.account)
            #expect(Set(listed.map(\.deviceID)) == [a.vault.deviceID, b.vault.deviceID])
            #expect(listed.allSatisfy { $0.status == .active && $0.platform == "linux-test" && $0.lastActivityAt != nil })
            let renamed = try await a.roster.rename(deviceID: b.vault.deviceID, to: "Lost phone", account: a.account)
            #expect(renamed.name == "Lost phone")
            let terminated = try await a.roster.revoke(deviceID: b.vault.deviceID, account: a.account)
            #expect(terminated.status == .revoked)
            #expect(try await a.roster.devices(account: a.account).first { $0.deviceID == b.vault.deviceID }?.name == "Lost phone")

            await #expect(throws: SessionError.expired(b.account, .deviceRevoked)) {
                try await b.roster.refresh(account: b.account)
            }
            #expect(try b.vault.tokens.current(for: b.account) == nil)
            #expect(try await b.service.status(of: b.account) == .expired(.deviceRevoked))
            // A carries on.
            #expect(try await a.roster.refresh(account: a.account).count == 2)
        }
    }

    @Test func aRevokedGrantIsReportedAsRevokedNotAsARevokedDevice() async throws {
        try await DeviceWorld.run { world in
            let a = try await world.device("Desk workstation")
            _ = try await a.register()
            #expect(await world.gateway.revokeGrants(subject: "alice") == 1)
            // 401 invalid_token: the token is reported, the refresh is refused, the grant is over.
            do {
                try await a.inbox.sync(account: a.account)
                Issue.record("a revoked grant should end the session")
            } catch SessionError.revoked(let account, _) {
                #expect(account == a.account)
            }
            #expect(try await a.service.status(of: a.account) == .expired(.revoked))
            #expect(try a.vault.devices.thisDevice(for: a.account)?.status == .active, "the device itself was not revoked")
            #expect(a.transport.count("GET", pathSuffix: "/notifications") == 1, "retried only after a refresh, which failed")
        }
    }
}
