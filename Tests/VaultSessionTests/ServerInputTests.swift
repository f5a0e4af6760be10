import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// What a device and notification API server sends that the vault must not take as it is:
/// a page or roster served by a real loopback HTTP server, read by the reference HTTP client.
@Suite struct ServerInputTests {
    static let created: Int64 = 1_800_000_000_000

    static func notification(
        _ uuid: String, status: String = "pending", subject: String = "Sign-in request",
        message: String = "Approve?", created: Int64 = created, actions: String? = nil
    ) -> String {
        let actions = actions ?? #"[{"label":"Approve","action":"approve"},{"label":"Reject","action":"reject"}]"#
        return #"{"notification_uuid":"\#(uuid)","subject":"\#(subject)","message":"\#(message)","actions":\#(actions),"#
            + #""created_at":\#(created),"status":"\#(status)"}"#
    }

    static func page(_ items: [String], total: Int? = nil, start: Int = 1) -> String {
        #"{"notifications":[\#(items.joined(separator: ","))],"total_count":\#(total ?? items.count),"start_index":\#(start)}"#
    }

    /// Signs alice in, points the device API at the loopback server, runs `body` with an inbox.
    static func withInbox(
        answering body: String, status: Int = 200,
        _ test: (NotificationInbox, TransportWorld, AccountID, CapturedLogs) async throws -> Void
    ) async throws {
        try await TransportWorld.run(answer: .json(status, body)) { world in
            let account = try await world.signIn()
            let logs = CapturedLogs()
            let api = HTTPDeviceNotificationAPI(
                baseURL: world.server.url("/api"), session: world.service, transport: world.transport,
                logger: logs.logger(label: "devices.http"), clock: world.time.clock)
            let inbox = NotificationInbox(
                session: world.service, api: api, wallClock: world.time.wallClock,
                logger: logs.logger(label: "notifications"))
            try await test(inbox, world, account, logs)
        }
    }

    @Test(
        "a page with an unknown status, an oversize message, a date in 2300, a bad id and two actions alike: those are skipped with a warning, the good ones stored"
    )
    func skippedWithAWarning() async throws {
        let huge = String(repeating: "m", count: ServerInput.maximumMessageLength + 1)
        let items = [
            Self.notification("good-1"),
            Self.notification("newer-status", status: "archived"),
            Self.notification("too-long", message: huge),
            Self.notification("far-future", created: 10_445_000_000_000),
            Self.notification("bad\\u001b[31mid"),
            Self.notification("same-action", actions: #"[{"label":"A","action":"ok"},{"label":"B","action":"ok"}]"#),
            Self.notification("good-2"),
        ]
        try await Self.withInbox(answering: Self.page(items)) { inbox, world, account, logs in
            let result = try await inbox.sync(account: account)
            #expect(result.received == 7)
            #expect(result.inserted == 2)
            #expect(result.skipped.count == 5, "\(result.skipped)")
            #expect(result.skipped.contains { $0.contains("unknown status \"archived\"") })
            #expect(result.skipped.contains { $0.contains("\\u{1b}") }, "an escape in an id is shown escaped")
            #expect(!result.skipped.joined().contains("\u{1B}"))
            #expect(logs.lines.filter { $0.contains("skipped") }.count == 5)
            let stored = try world.vault.notifications.page(NotificationQuery(account: account)).items.map(\.uuid).sorted()
            #expect(stored == ["good-1", "good-2"])
        }
    }

    @Test(
        "a page naming one notification twice, missing a field, or not the page asked for is refused whole: nothing stored",
        arguments: [
            (page([notification("a"), notification("b"), notification("a", status: "answered")]), "twice"),
            (
                #"{"notifications":[{"notification_uuid":"a","message":"m","actions":[],"created_at":1,"status":"pending"}],"total_count":1,"start_index":1}"#,
                "notifications[0].subject missing"
            ),
            (page([notification("a")], total: 100, start: 51), "the one from 51"),
            ("this is not JSON", "not JSON"),
        ])
    func refusedWhole(body: String, reason: String) async throws {
        try await Self.withInbox(answering: body) { inbox, world, account, _ in
            do {
                _ = try await inbox.sync(account: account)
                Issue.record("the page should be refused")
            } catch let error as DeviceAPIError {
                #expect("\(error)".contains(reason), "\(error)")
            }
            #expect(try world.vault.notifications.page(NotificationQuery(account: account)).items.isEmpty)
        }
    }

    @Test("410 Gone on an answer: refused as withdrawn, the stored copy marked dismissed, no retry")
    func goneOnAnswer() async throws {
        try await Self.withInbox(answering: #"{"error":"gone"}"#, status: 410) { inbox, world, account, _ in
            _ = try world.vault.notifications.upsert(
                NotificationRecord(
                    uuid: "n-1", account: account, subject: "Sign-in request", message: "Approve?",
                    actions: [NotificationAction(label: "Approve", action: "approve")], createdAt: world.time.now()))
            let outcome = try await inbox.answer("n-1", action: "approve", account: account)
            #expect(outcome == .refused(.dismissed))
            #expect(try world.vault.notifications.find("n-1", account: account)?.status == .dismissed)
            #expect(world.server.log.value.requests.count == 1)
            #expect(try await inbox.answer("n-1", action: "approve", account: account) == .refused(.dismissed))
            #expect(world.server.log.value.requests.count == 1, "the second answer is refused locally")
        }
    }

    static func device(_ id: String, status: String = "active", name: String = "Desk") -> String {
        #"{"registration_id":"r-\#(id)","device_id":"\#(id)","name":"\#(name)","platform":"linux","status":"\#(status)","#
            + #""created_at":\#(created),"updated_at":\#(created)}"#
    }

    @Test(
        "a roster with an unknown status or an oversize name is refused whole: no stored device is marked gone",
        arguments: [
            (device("d-2", status: "quarantined"), "unknown device status"),
            (device("d-2", name: String(repeating: "n", count: ServerInput.maximumNameLength + 1)), "at most 256"),
        ])
    func rosterRefusedWhole(bad: String, reason: String) async throws {
        try await TransportWorld.run(answer: .json(200, #"{"devices":[\#(Self.device("d-1")),\#(bad)]}"#)) { world in
            let account = try await world.signIn()
            let known = DeviceRegistration(
                account: account, deviceID: "d-3", name: "Old phone", platform: "ios", status: .active,
                createdAt: world.time.now(), updatedAt: world.time.now())
            try world.vault.devices.save(known)
            let api = HTTPDeviceNotificationAPI(
                baseURL: world.server.url("/api"), session: world.service, transport: world.transport,
                clock: world.time.clock)
            do {
                _ = try await DeviceRoster(session: world.service, api: api).refresh(account: account)
                Issue.record("the roster should be refused")
            } catch let error as DeviceAPIError {
                #expect("\(error)".contains(reason), "\(error)")
            }
            #expect(try world.vault.devices.all(for: account) == [known], "nothing stored, nothing marked gone")
        }
    }
}
