import DevGateway
import Foundation
import Testing
@testable import VaultSession
import VaultStore
import VaultTestSupport

/// New-device activation against the DevGateway on loopback: device B (a second install
/// signed in to the same account) is activated by device A approving the notification, by a
/// fallback code, or not at all (rejected, deadline passed, cancelled).
@Suite struct ActivationTests {
    /// A is the account's first device (active, primary); B is pending with verify and fallback offered.
    private func twoDevices(_ world: DeviceWorld) async throws -> (a: Device, b: Device) {
        let a = try await world.device("Desk workstation")
        let b = try await world.device("New laptop")
        guard case .active(let registration) = try await a.register() else {
            Issue.record("the account's first device should be active")
            throw CancellationError()
        }
        #expect(registration.activationMethod == .primary)
        guard case .pending(let pending, let options) = try await b.register() else {
            Issue.record("a second device should wait for activation")
            throw CancellationError()
        }
        #expect(options == [.verify, .fallback])
        #expect(pending.status == .pending)
        #expect(await b.waitForActivationEvent { if case .optionsOffered(_, [.verify, .fallback]) = $0 { true } else { false } } != nil)
        return (a, b)
    }

    @Test func deviceBIsActivatedByDeviceAApprovingTheNotification() async throws {
        try await DeviceWorld.run { world in
            let (a, b) = try await twoDevices(world)
            let outcome = try await driveVerification(b, time: world.time) {
                let pending = try await a.pendingNotifications()
                let request = try #require(pending.first)
                #expect(request.actions.map(\.action) == ["approve", "reject"])
                #expect(request.message.contains("New laptop"))
                let answer = try await a.inbox.answer(request.uuid, action: "approve", account: a.account)
                guard case .answered(let record) = answer else {
                    Issue.record("A's approval was not accepted: \(answer)")
                    return
                }
                #expect(record.answeredByDevice == a.vault.deviceID)
                #expect(record.actionTaken == "approve")
            }
            guard case .activated(let registration) = outcome else {
                Issue.record("B should be activated, got \(outcome)")
                return
            }
            #expect(registration.activationMethod == .verify)
            #expect(try b.vault.thisDevice(for: b.account)?.status == .active)
            #expect(await world.gateway.deviceStatus(subject: "alice", deviceID: b.vault.deviceID) == "active")
            let events = b.activationEvents.value
            #expect(events.contains { if case .waitingForApproval = $0 { true } else { false } })
            #expect(events.contains(.activated(b.account, .verify)))
            // The sign-in continues: B now works as an active device.
            try await b.inbox.syncAll(account: b.account)
            #expect(try await b.service.status(of: b.account) == .active)
        }
    }

    @Test func activationByFallbackCode() async throws {
        try await DeviceWorld.run { world in
            let (_, b) = try await twoDevices(world)
            let challenge = try await b.activation.startFallback(account: b.account)
            #expect(challenge.method == "activation_code")
            #expect(challenge.delivery == "out_of_band")
            let code = try #require(await world.gateway.activationCode(subject: "alice", deviceID: b.vault.deviceID))

            let wrong = String(code.reversed()) == code ? "00000000" : String(code.reversed())
            await #expect(throws: DeviceAPIError.invalidActivationCode(attemptsLeft: 4, status: .pending)) {
                try await b.activation.activate(with: ActivationCode(wrong), account: b.account)
            }
            let outcome = try await b.activation.activate(with: ActivationCode(" \(code) "), account: b.account)
            guard case .activated(let registration) = outcome else {
                Issue.record("B should be activated by the code, got \(outcome)")
                return
            }
            #expect(registration.activationMethod == .fallback)
            #expect(await world.gateway.deviceStatus(subject: "alice", deviceID: b.vault.deviceID) == "active")
            #expect(!b.store.logs.contains(code), "the activation code was logged")
            #expect(!"\(ActivationCode(code))".contains(code))
            for token in world.issuedTokens { #expect(!b.store.logs.contains(token), "a token was logged") }
        }
    }

    @Test func fallbackWhileWaitingForApprovalEndsTheWait() async throws {
        try await DeviceWorld.run { world in
            let (a, b) = try await twoDevices(world)
            let outcome = try await driveVerification(b, time: world.time) {
                _ = try await b.activation.startFallback(account: b.account)
                let code = try #require(await world.gateway.activationCode(subject: "alice", deviceID: b.vault.deviceID))
                _ = try await b.activation.activate(with: ActivationCode(code), account: b.account)
            }
            guard case .activated(let registration) = outcome else {
                Issue.record("the wait should end activated by the fallback, got \(outcome)")
                return
            }
            #expect(registration.activationMethod == .fallback)
            // The approval request was withdrawn: A can no longer approve it.
            try await a.inbox.syncAll(account: a.account)
            let request = try #require(try await a.inbox.list(NotificationQuery(account: a.account)).items.first)
            #expect(request.status == .dismissed)
            #expect(try await a.inbox.answer(request.uuid, action: "approve", account: a.account) == .refused(.dismissed))
        }
    }

    @Test func rejectionMarksTheRegistrationRejectedWithTheReason() async throws {
        try await DeviceWorld.run { world in
            let (a, b) = try await twoDevices(world)
            let outcome = try await driveVerification(b, time: world.time) {
                let request = try #require(try await a.pendingNotifications().first)
                #expect(try await a.inbox.answer(request.uuid, action: "reject", account: a.account) != .refused(.answerInFlight))
            }
            guard case .rejected(let registration) = outcome else {
                Issue.record("B should be rejected, got \(outcome)")
                return
            }
            #expect(registration.status == .rejected)
            #expect(registration.statusReason == "rejected from device \(a.vault.deviceID)")
            #expect(try b.vault.thisDevice(for: b.account)?.status == .rejected)
            #expect(b.activationEvents.value.contains(.rejected(b.account, reason: "rejected from device \(a.vault.deviceID)")))
            // A rejected device is not trusted by the server.
            await #expect(throws: DeviceAPIError.notActive(.rejected)) { try await b.inbox.sync(account: b.account) }
        }
    }

    @Test func approvalDeadlinePassesAndTheRequestExpires() async throws {
        try await DeviceWorld.run { world in
            let (a, b) = try await twoDevices(world)
            let started = world.time.now()
            let outcome = try await driveVerification(b, time: world.time)
            guard case .expired(let registration) = outcome else {
                Issue.record("B should expire, got \(outcome)")
                return
            }
            #expect(world.time.now().timeIntervalSince(started) == 60)
            #expect(registration.status == .expired)
            #expect(registration.statusReason == "no approval within 60 s")
            let deadline = try #require(b.activationEvents.value.compactMap(\.approvalRequest).first?.deadline)
            #expect(deadline == started.addingTimeInterval(60))
            #expect(b.activationEvents.value.contains { if case .waitingForApproval(_, 5) = $0 { true } else { false } })
            #expect(await world.gateway.deviceStatus(subject: "alice", deviceID: b.vault.deviceID) == "expired")
            // A can no longer approve it: the request expired at the server too.
            try await a.inbox.syncAll(account: a.account)
            let request = try #require(try await a.inbox.list(NotificationQuery(account: a.account)).items.first)
            #expect(request.status == .expired)
            let answers = a.transport.count("POST", pathSuffix: "/answer")
            guard case .refused(.expired) = try await a.inbox.answer(request.uuid, action: "approve", account: a.account) else {
                Issue.record("answering an expired request should be refused")
                return
            }
            #expect(a.transport.count("POST", pathSuffix: "/answer") == answers)
        }
    }

    @Test func cancellingResetsTheFlow() async throws {
        try await DeviceWorld.run { world in
            let (a, b) = try await twoDevices(world)
            let outcome = try await driveVerification(b, time: world.time) {
                try await b.activation.cancel(account: b.account)
            }
            guard case .cancelled(let registration) = outcome else {
                Issue.record("the wait should end cancelled, got \(outcome)")
                return
            }
            #expect(registration.statusReason == "activation cancelled on the device")
            #expect(b.activationEvents.value.contains(.cancelled(b.account)))
            try await a.inbox.syncAll(account: a.account)
            #expect(try await a.inbox.list(NotificationQuery(account: a.account, pendingOnly: true)).items.isEmpty)
            // Starting over: registering again offers the methods again, and the fallback works.
            guard case .pending(_, let options) = try await b.register() else {
                Issue.record("registering again should start a new activation")
                return
            }
            #expect(options == [.verify, .fallback])
            _ = try await b.activation.startFallback(account: b.account)
            let code = try #require(await world.gateway.activationCode(subject: "alice", deviceID: b.vault.deviceID))
            guard case .activated = try await b.activation.activate(with: ActivationCode(code), account: b.account) else {
                Issue.record("the restarted activation should succeed")
                return
            }
        }
    }
}
