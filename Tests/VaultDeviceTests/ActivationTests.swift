import DevGateway
import Foundation
import GRDB
import Testing
import VaultStore
import VaultTestSupport

@testable import VaultSession

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
            #expect(try b.vault.devices.thisDevice(for: b.account)?.status == .active)
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
            #expect(try b.vault.devices.thisDevice(for: b.account)?.status == .rejected)
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

    /// The first run waits 20 s of its 60, then its process goes away (the wait is cancelled
    /// without telling the server). Returns what the first run announced and stored.
    private func interruptedWait(_ world: DeviceWorld, _ b: Device) async throws -> (notification: String, deadline: Date) {
        let first = Task { try await b.activation.verify(account: b.account) }
        let request = try #require(await b.waitForActivationEvent { $0.approvalRequest != nil }?.approvalRequest)
        for _ in 0..<4 { #expect(await world.time.advanceWhenSleeping(by: .seconds(5), timeout: TestTimeScale.scaled(.seconds(5)))) }
        first.cancel()
        _ = try? await first.value
        let stored = try #require(try b.vault.devices.thisDevice(for: b.account)?.pendingApproval, "the request is stored while waiting")
        #expect(stored.notification == request.notification)
        #expect(stored.deadline.millisecondsSince1970 == request.deadline.millisecondsSince1970)
        return request
    }

    private func restarted(_ world: DeviceWorld, _ b: Device) -> DeviceActivation {
        DeviceActivation(
            session: b.service, api: b.api, clock: world.time.clock, wallClock: world.time.wallClock,
            configuration: ActivationConfiguration(approvalTimeout: .seconds(60), pollInterval: .seconds(5)),
            logger: b.store.logs.logger(label: "devices.restarted"))
    }

    @Test func aRestartedActivationWaitsOnTheSameRequestUntilTheSameDeadline() async throws {
        try await DeviceWorld.run { world in
            let (_, b) = try await twoDevices(world)
            let started = world.time.now()
            let request = try await interruptedWait(world, b)
            #expect(request.deadline == started.addingTimeInterval(60))
            let requestsSent = b.transport.count("POST", pathSuffix: "/verify")
            #expect(requestsSent == 1)

            let outcome = try await driveVerification(b, time: world.time, using: restarted(world, b))
            guard case .expired(let registration) = outcome else {
                Issue.record("the resumed wait should expire at the first run's deadline, got \(outcome)")
                return
            }
            #expect(world.time.now().timeIntervalSince(started) == 60, "the deadline is the first run's, not a new 60 s")
            #expect(b.transport.count("POST", pathSuffix: "/verify") == requestsSent, "no second approval request")
            #expect(registration.pendingApproval == nil)
            #expect(try b.vault.devices.thisDevice(for: b.account)?.pendingApproval == nil, "an ended activation keeps no request")
            #expect(await world.gateway.deviceStatus(subject: "alice", deviceID: b.vault.deviceID) == "expired")
        }
    }

    @Test func anApprovalGivenWhileNoProcessWaitedIsSeenAtOnceOnResume() async throws {
        try await DeviceWorld.run { world in
            let (a, b) = try await twoDevices(world)
            let request = try await interruptedWait(world, b)
            let waited = world.time.now()
            try await a.inbox.syncAll(account: a.account)
            guard case .answered = try await a.inbox.answer(request.notification, action: "approve", account: a.account) else {
                Issue.record("A could not approve the stored request")
                return
            }
            let outcome = try await driveVerification(b, time: world.time, using: restarted(world, b))
            guard case .activated(let registration) = outcome else {
                Issue.record("the resumed wait should find the approval, got \(outcome)")
                return
            }
            #expect(registration.activationMethod == .verify)
            #expect(world.time.now() == waited, "the resumed wait asked the server before sleeping")
            #expect(b.transport.count("POST", pathSuffix: "/verify") == 1)
            #expect(try b.vault.devices.thisDevice(for: b.account)?.pendingApproval == nil)
        }
    }

    @Test func aRosterSyncKeepsThePendingRequestAndAnEditedDeadlineIsRefused() async throws {
        try await DeviceWorld.run { world in
            let (_, b) = try await twoDevices(world)
            _ = try await interruptedWait(world, b)
            // The server's roster lists the device still pending (and knows nothing of the request's deadline).
            var listed = try #require(try b.vault.devices.thisDevice(for: b.account))
            let approval = listed.pendingApproval
            listed.pendingApproval = nil
            _ = try b.vault.devices.sync([listed], for: b.account, goneReason: "gone", at: world.time.now())
            let stored = try #require(try b.vault.devices.thisDevice(for: b.account))
            #expect(stored.pendingApproval == approval, "a roster sync of a still-pending device keeps its request")

            // Someone with the file moves the deadline a day later: the row no longer authenticates.
            try RawDatabase.execute(
                b.store.url,
                """
                UPDATE devices SET approval_request =
                    json_set(approval_request, '$.deadline', json_extract(approval_request, '$.deadline') + 86400000)
                WHERE registration_id = ?
                """, [stored.id])
            #expect(throws: VaultError.self) { try b.vault.devices.thisDevice(for: b.account) }
        }
    }
}
