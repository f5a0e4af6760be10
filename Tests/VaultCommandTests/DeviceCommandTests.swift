import DevGateway
import Foundation
import Testing
import VaultTestSupport

/// `vault devices` and `vault notifications` against the development gateway with the built
/// binary: two machines (two vault files, two grants of one user), the codelab's flow from the
/// command line.
@Suite("vault devices and notifications at the identity service")
struct DeviceCommandTests {
    /// A key-file vault with alice's account from its own grant; the device API found by `--api`.
    static func machine(_ gateway: DevGateway) async throws -> VaultCLI {
        let cli = try await VaultCLI.keyFileVault()
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
        let added = try await cli.run(["accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                                       "--subject", "alice"], stdin: AccountsAndTokenTests.tokenResponse(issued))
        try #require(added.status == 0, "\(added)")
        return cli
    }

    @Test("A activates as the first device; B's activation is approved from A with `notifications answer`; A sees B, renames and revokes it; a second answer is refused")
    func approvalFromTheCommandLine() async throws {
        let gateway = try await DevGateway.start()
        let a = try await Self.machine(gateway), b = try await Self.machine(gateway)
        let api = ["--api", gateway.baseURL.absoluteString]

        let first = try await a.run(["devices", "activate", "--name", "Desk"] + api)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("primary"))
        let noAPI = try await a.run(["devices", "sync"])
        #expect(noAPI.status == 64 && noAPI.stderr.contains("--api"), "an account without metadata needs --api")

        // B waits for an approval while A answers it.
        #expect(try await b.run(["devices", "activate", "--name", "Laptop\u{1B}[31m"] + api).status == 64, "control characters in a name are refused")
        async let waiting = b.run(["devices", "activate", "--name", "Laptop"] + api)
        let posted = await gateway.waitForStats(upTo: TestTimeScale.scaled(.seconds(30))) { $0.approvalRequests >= 1 }
        try #require(posted, "B's approval request never reached the gateway")
        let sync = try await a.run(["notifications", "sync"] + api)
        #expect(sync.status == 0 && sync.stdout.contains("1 new"), "\(sync)")
        let listed = try await a.run(["notifications", "list", "--pending", "--json"])
        let approval = try #require((try listed.jsonObject()["notifications"] as? [[String: Any]])?.first?["uuid"] as? String)
        let answered = try await a.run(["notifications", "answer", approval, "approve"] + api)
        #expect(answered.status == 0, "\(answered.stderr)")
        let activated = try await waiting
        #expect(activated.status == 0, "\(activated.stderr)")
        #expect(activated.stdout.contains("active"))
        let again = try await a.run(["notifications", "answer", approval, "approve"] + api)
        #expect(again.status == 76 && again.stderr.contains("already answered"), "\(again.stderr)")

        // A retention set on the command line is stored and applied: the approval request was the
        // only notification; one more arrives, and only the newest is kept.
        await gateway.postNotification(subject: "alice", title: "Newer", message: "m", actions: [(label: "OK", action: "ok")])
        let kept = try await a.run(["notifications", "sync", "--keep", "30d", "--keep-count", "1"] + api)
        #expect(kept.status == 0, "\(kept.stderr)")
        let history = try await a.run(["notifications", "list", "--json"])
        #expect((try history.jsonObject()["notifications"] as? [[String: Any]])?.map { $0["subject"] as? String } == ["Newer"])
        let shown = try await a.run(["accounts", "show", "--json"])
        #expect((try shown.jsonObject()["notification_retention"] as? [String: Any])?["count"] as? Int == 1)

        let synced = try await a.run(["devices", "sync", "--json"] + api)
        #expect(synced.status == 0, "\(synced.stderr)")
        let devices = try synced.jsonArray()
        #expect(devices.count == 2)
        let other = try #require(devices.first { ($0["this_device"] as? Bool) == false })
        let otherID = try #require(other["device_id"] as? String)
        let renamed = try await a.run(["devices", "rename", otherID, "Old laptop"] + api)
        #expect(renamed.status == 0, "\(renamed.stderr)")
        let revoked = try await a.run(["devices", "revoke", otherID] + api)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(await gateway.deviceStatus(subject: "alice", deviceID: otherID) == "revoked")
        // B's grant went with its device: its next call learns it.
        let stale = try await b.run(["devices", "sync"] + api)
        #expect(stale.status == 80, "\(stale.stderr)")
        await gateway.stop()
    }

    @Test("sessions extend before the idle warning is refused with its reason, and the server is not asked")
    func extendOutsideTheWindow() async throws {
        let gateway = try await DevGateway.start()
        let a = try await Self.machine(gateway)
        let policy = try await a.run(["accounts", "set-policy", "--idle-timeout", "10m", "--warning", "1m", "--activity", "interactive"])
        #expect(policy.status == 0, "\(policy.stderr)")
        let early = try await a.run(["sessions", "extend", "--api", gateway.baseURL.absoluteString])
        #expect(early.status == 1 && early.stderr.contains("not in the idle warning"), "\(early.stderr)")
        #expect(await gateway.stats().extensionRequests == 0)
        await gateway.stop()
    }
}
