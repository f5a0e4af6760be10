import Clocks
import DevGateway
import Foundation
import Testing
import VaultStore
import VaultTestSupport

@testable import VaultSession

/// Notification history against the DevGateway on loopback: sync with the codelab's paging,
/// listing from the vault, answering once, and pruning.
@Suite struct NotificationTests {
    /// An active device (the account's first) and `count` notifications, one a minute, oldest first.
    private func activeDeviceWithNotifications(
        _ world: DeviceWorld, count: Int, every interval: Duration = .seconds(60),
        expiresIn: Duration? = nil
    ) async throws -> (Device, [String]) {
        let a = try await world.device("Desk workstation")
        _ = try await a.register()
        var uuids: [String] = []
        for index in 1...count {
            uuids.append(
                await world.gateway.postNotification(
                    subject: "alice", title: "Sign-in request \(index)", message: "Sign in to the web console?",
                    actions: [("Allow", "allow"), ("Deny", "deny")], expiresIn: expiresIn))
            await world.time.testClock.advance(by: interval)
        }
        return (a, uuids)
    }

    @Test func syncIsIdempotentAcrossRepeatedAndOverlappingPages() async throws {
        try await DeviceWorld.run { world in
            let (a, uuids) = try await activeDeviceWithNotifications(world, count: 7)
            let newestFirst = Array(uuids.reversed())

            let first = try await a.inbox.sync(account: a.account, page: NotificationPageRequest(recordCount: 3, startIndex: 1))
            #expect((first.received, first.inserted, first.totalCount, first.nextStartIndex) == (3, 3, 7, 4))
            let again = try await a.inbox.sync(account: a.account, page: NotificationPageRequest(recordCount: 3, startIndex: 1))
            #expect((again.received, again.inserted) == (3, 0))
            let overlapping = try await a.inbox.sync(account: a.account, page: NotificationPageRequest(recordCount: 3, startIndex: 2))
            #expect((overlapping.received, overlapping.inserted) == (3, 1))
            let rest = try await a.inbox.sync(account: a.account, page: NotificationPageRequest(recordCount: 0, startIndex: 3))
            #expect((rest.received, rest.inserted, rest.nextStartIndex) == (5, 3, nil))
            #expect(try a.vault.notifications.count(account: a.account) == 7)
            let all = try await a.inbox.list(NotificationQuery(account: a.account, limit: 100)).items
            #expect(all.map(\.uuid) == newestFirst)

            // Another device answers one: a re-sync updates its status, and adds nothing.
            let b = try await world.device("Laptop")
            _ = try await b.register()
            _ = try await b.activation.startFallback(account: b.account)
            let code = try #require(await world.gateway.activationCode(subject: "alice", deviceID: b.vault.deviceID))
            _ = try await b.activation.activate(with: ActivationCode(code), account: b.account)
            try await b.inbox.syncAll(account: b.account, pageSize: 2)
            guard case .answered = try await b.inbox.answer(uuids[0], action: "deny", account: b.account) else {
                Issue.record("B's answer should be accepted")
                return
            }
            let full = try await a.inbox.syncAll(account: a.account, pageSize: 4)
            #expect((full.received, full.inserted) == (7, 0))
            #expect(try a.vault.notifications.count(account: a.account) == 7)
            let updated = try #require(try a.vault.notifications.find(uuids[0], account: a.account))
            #expect(updated.status == .answered)
            #expect(updated.actionTaken == "deny")
            #expect(updated.answeredByDevice == b.vault.deviceID)

            // The date range is the server's filter: the 2nd to 4th notifications only.
            let from = TestTime.defaultOrigin.addingTimeInterval(60)
            let until = TestTime.defaultOrigin.addingTimeInterval(240)
            let ranged = try await b.inbox.sync(account: b.account, page: NotificationPageRequest(startDate: from, endDate: until))
            #expect((ranged.received, ranged.totalCount, ranged.inserted) == (3, 3, 0))
        }
    }

    @Test("a sync whose third page times out keeps the two pages it stored, consistent; the next sync completes it without duplicates")
    func timeoutMidSyncResumes() async throws {
        try await DeviceWorld.run { world in
            let (a, uuids) = try await activeDeviceWithNotifications(world, count: 12)
            a.transport.timeOut(request: 3, pathSuffix: "/notifications")
            await #expect(throws: DeviceAPIError.self) { try await a.inbox.syncAll(account: a.account, pageSize: 5) }
            #expect(try a.vault.notifications.count(account: a.account) == 10, "the two pages before the timeout stay stored")
            #expect(try a.vault.maintenance.verify().passed)
            let resumed = try await a.inbox.syncAll(account: a.account, pageSize: 5)
            #expect((resumed.received, resumed.inserted) == (12, 2))
            let all = try await a.inbox.list(NotificationQuery(account: a.account, limit: 100)).items
            #expect(all.map(\.uuid) == Array(uuids.reversed()))
        }
    }

    @Test func listingReadsTheVaultWithoutTheServer() async throws {
        try await DeviceWorld.run { world in
            let (a, uuids) = try await activeDeviceWithNotifications(world, count: 5)
            try await a.inbox.syncAll(account: a.account)
            guard case .answered = try await a.inbox.answer(uuids[4], action: "allow", account: a.account) else {
                Issue.record("the answer should be accepted")
                return
            }
            let sent = a.transport.requests.count

            var query = NotificationQuery(account: a.account, limit: 2)
            var seen: [String] = []
            while true {
                let page = try await a.inbox.list(query)
                seen += page.items.map(\.uuid)
                guard let next = page.next else { break }
                query.after = next
            }
            #expect(seen == Array(uuids.reversed()))
            let pending = try await a.inbox.list(NotificationQuery(account: a.account, pendingOnly: true, limit: 10)).items
            #expect(pending.map(\.uuid) == Array(uuids[0..<4].reversed()))
            let ranged = try await a.inbox.list(
                NotificationQuery(
                    account: a.account, since: TestTime.defaultOrigin.addingTimeInterval(60),
                    until: TestTime.defaultOrigin.addingTimeInterval(180), limit: 10)
            ).items
            #expect(ranged.map(\.uuid) == [uuids[2], uuids[1]])
            #expect(try await a.inbox.list(NotificationQuery(account: AccountID(rawValue: "someone-else"))).items.isEmpty)
            #expect(a.transport.requests.count == sent, "listing must not call the server")
        }
    }

    @Test func answersAreRefusedLocallyWithoutARequest() async throws {
        try await DeviceWorld.run { world in
            let (a, uuids) = try await activeDeviceWithNotifications(world, count: 2, every: .seconds(1), expiresIn: .seconds(600))
            try await a.inbox.syncAll(account: a.account)
            let answers = { a.transport.count("POST", pathSuffix: "/answer") }

            // An action the notification does not offer.
            #expect(
                try await a.inbox.answer(uuids[0], action: "approve", account: a.account)
                    == .refused(.actionNotOffered("approve", offered: ["allow", "deny"])))
            // A notification the vault does not know.
            #expect(
                try await a.inbox.answer("no-such-uuid", action: "allow", account: a.account)
                    == .refused(.unknownNotification("no-such-uuid")))
            #expect(answers() == 0)

            // Answered once (confirmed by the server), then refused locally.
            guard case .answered(let record) = try await a.inbox.answer(uuids[0], action: "allow", account: a.account) else {
                Issue.record("the first answer should be accepted")
                return
            }
            #expect(record.answeredByDevice == a.vault.deviceID)
            #expect(record.answeredAt == world.time.now())
            #expect(answers() == 1)
            guard
                case .refused(.alreadyAnswered(let action, let device, _)) =
                    try await a.inbox.answer(uuids[0], action: "deny", account: a.account)
            else {
                Issue.record("a second answer should be refused")
                return
            }
            #expect(action == "allow")
            #expect(device == a.vault.deviceID)
            #expect(answers() == 1)

            // Expired: ten minutes later the second one can no longer be answered.
            await world.time.testClock.advance(by: .seconds(601))
            guard case .refused(.expired) = try await a.inbox.answer(uuids[1], action: "allow", account: a.account) else {
                Issue.record("an expired notification should be refused")
                return
            }
            #expect(answers() == 1)
            #expect(try a.vault.notifications.find(uuids[1], account: a.account)?.status == .expired)
            #expect(try await a.inbox.list(NotificationQuery(account: a.account, pendingOnly: true)).items.isEmpty)
        }
    }

    @Test func oneAnswerInFlightPerNotification() async throws {
        try await DeviceWorld.run { world in
            let (a, uuids) = try await activeDeviceWithNotifications(world, count: 1)
            try await a.inbox.syncAll(account: a.account)
            a.transport.hold(pathSuffix: "/answer")
            let first = Task { try await a.inbox.answer(uuids[0], action: "allow", account: a.account) }
            #expect(await a.transport.waitForRequests("POST", pathSuffix: "/answer"))
            #expect(try await a.inbox.answer(uuids[0], action: "deny", account: a.account) == .refused(.answerInFlight))
            a.transport.release()
            guard case .answered(let record) = try await first.value else {
                Issue.record("the answer in flight should be accepted")
                return
            }
            #expect(record.actionTaken == "allow")
            #expect(a.transport.count("POST", pathSuffix: "/answer") == 1)
        }
    }

    @Test func twoDevicesAnsweringTheSameNotificationExactlyOneWins() async throws {
        try await DeviceWorld.run { world in
            let (a, uuids) = try await activeDeviceWithNotifications(world, count: 1)
            let b = try await world.device("Laptop")
            _ = try await b.register()
            _ = try await b.activation.startFallback(account: b.account)
            let code = try #require(await world.gateway.activationCode(subject: "alice", deviceID: b.vault.deviceID))
            _ = try await b.activation.activate(with: ActivationCode(code), account: b.account)
            try await a.inbox.syncAll(account: a.account)
            try await b.inbox.syncAll(account: b.account)

            // Both answers are on the wire before either is let through.
            a.transport.hold(pathSuffix: "/answer")
            b.transport.hold(pathSuffix: "/answer")
            async let fromA = a.inbox.answer(uuids[0], action: "allow", account: a.account)
            async let fromB = b.inbox.answer(uuids[0], action: "deny", account: b.account)
            #expect(await a.transport.waitForRequests("POST", pathSuffix: "/answer"))
            #expect(await b.transport.waitForRequests("POST", pathSuffix: "/answer"))
            a.transport.release()
            b.transport.release()
            let outcomes = try await [(a, fromA), (b, fromB)]

            let winners = outcomes.filter { if case .answered = $0.1 { true } else { false } }
            let losers = outcomes.filter { if case .refused = $0.1 { true } else { false } }
            #expect(winners.count == 1 && losers.count == 1)
            let (winner, _) = try #require(winners.first)
            let (loser, refusal) = try #require(losers.first)
            let winningAction = winner === a ? "allow" : "deny"
            guard case .refused(.alreadyAnswered(let action, let device, let at)) = refusal else {
                Issue.record("the loser should be told the notification was already answered, got \(refusal)")
                return
            }
            #expect(action == winningAction)
            #expect(device == winner.vault.deviceID)
            #expect(at != nil)
            // Both vaults now agree on who answered what.
            for device in [a, b] {
                let record = try #require(try device.vault.notifications.find(uuids[0], account: device.account))
                #expect(record.status == .answered)
                #expect(record.actionTaken == winningAction)
                #expect(record.answeredByDevice == winner.vault.deviceID)
            }
            // The loser asks no more: a retry is refused locally.
            let sent = loser.transport.count("POST", pathSuffix: "/answer")
            guard case .refused(.alreadyAnswered) = try await loser.inbox.answer(uuids[0], action: winningAction, account: loser.account) else {
                Issue.record("a retry should be refused locally")
                return
            }
            #expect(loser.transport.count("POST", pathSuffix: "/answer") == sent)
        }
    }

    @Test func pruningRemovesOldAndExcessHistoryAndReportsHowMuch() async throws {
        try await DeviceWorld.run { world in
            // Ten notifications, one a day; "now" is a day after the newest.
            let (a, uuids) = try await activeDeviceWithNotifications(world, count: 10, every: .seconds(86_400))
            try await a.inbox.syncAll(account: a.account, pageSize: 3)
            #expect(try a.vault.notifications.count(account: a.account) == 10)

            // Older than 5 days: the first five (created 10 to 6 days ago).
            #expect(try await a.inbox.prune(olderThanDays: 5, account: a.account) == 5)
            #expect(try await a.inbox.list(NotificationQuery(account: a.account)).items.map(\.uuid) == Array(uuids[5...].reversed()))
            // Beyond the newest 2.
            #expect(try await a.inbox.prune(keepNewest: 2) == 3)
            #expect(try await a.inbox.list(NotificationQuery(account: a.account)).items.map(\.uuid) == [uuids[9], uuids[8]])
            #expect(try await a.inbox.prune(olderThanDays: 5, keepNewest: 2) == 0)
        }
    }

    @Test("an action with an authentication level needs a recent sign-in (step-up); one without does not")
    func stepUpForSensitiveActions() async throws {
        try await DeviceWorld.run { world in
            let a = try await world.device("Desk")
            _ = try await a.register()
            let sensitive = await world.gateway.postNotification(
                subject: "alice", title: "Sign in on the web?", message: "Firefox on Linux",
                actions: [(label: "Allow", action: "allow", authLevel: "high"), (label: "Deny", action: "deny", authLevel: nil)])
            let plain = await world.gateway.postNotification(
                subject: "alice", title: "New login", message: "Seen",
                actions: [
                    (label: "Allow", action: "allow", authLevel: "high"),
                    (label: "OK", action: "ok", authLevel: nil),
                ])
            _ = try await a.inbox.syncAll(account: a.account)
            await world.time.advance(by: .seconds(301))
            await #expect {
                _ = try await a.inbox.answer(sensitive, action: "allow", account: a.account)
            } throws: { error in
                guard case .authenticationTooOld? = error as? SessionError else { return false }
                return true
            }
            #expect(try a.vault.notifications.find(sensitive, account: a.account)?.status == .pending, "nothing was sent or recorded")
            guard case .answered = try await a.inbox.answer(plain, action: "ok", account: a.account) else {
                Issue.record("an action without an authentication level was not answered")
                return
            }
        }
    }

    @Test("an account's retention is stored and applied on every sync: the newest N stay, the rest go")
    func retentionOnSync() async throws {
        try await DeviceWorld.run { world in
            let a = try await world.device("Desk")
            _ = try await a.register()
            var posted: [String] = []
            for i in 0..<5 {
                posted.append(await world.gateway.postNotification(subject: "alice", title: "n\(i)", message: "m", actions: [(label: "OK", action: "ok")]))
                await world.time.advance(by: .seconds(60))
            }
            try a.vault.accounts.setNotificationRetention(NotificationRetention(count: 2), for: a.account)
            _ = try await a.inbox.syncAll(account: a.account)
            let kept = try await a.inbox.list(NotificationQuery(account: a.account)).items.map(\.uuid)
            #expect(kept == [posted[4], posted[3]], "the newest two, newest first")
            #expect(try a.vault.accounts.find(a.account)?.notificationRetention == NotificationRetention(count: 2))
            try a.vault.accounts.setNotificationRetention(nil, for: a.account)
            _ = try await a.inbox.syncAll(account: a.account)
            #expect(try await a.inbox.list(NotificationQuery(account: a.account)).items.count == 5, "no policy: everything syncs back")
            #expect(throws: VaultError.self) { try a.vault.accounts.setNotificationRetention(NotificationRetention(days: 0), for: a.account) }
        }
    }
}
