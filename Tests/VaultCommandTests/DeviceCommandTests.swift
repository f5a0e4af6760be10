import DevGateway
import Foundation
import Testing
import VaultStore
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
        let added = try await cli.run(
            [
                "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                "--subject", "alice",
            ], stdin: AccountsAndTokenTests.tokenResponse(issued))
        try #require(added.status == 0, "\(added)")
        return cli
    }

    @Test(
        "A activates as the first device; B's activation is approved from A with `notifications answer`; A sees B, renames and revokes it; a second answer is refused"
    )
    func approvalFromTheCommandLine() async throws {
        let gateway = try await DevGateway.start()
        let a = try await Self.machine(gateway)
        let b = try await Self.machine(gateway)
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

    /// A is the account's first device; B is registered and waits, in a child that keeps running.
    static func waitingSecondDevice(_ gateway: DevGateway, _ extra: [String] = [])
        async throws -> (a: VaultCLI, b: VaultCLI, child: ChildProgram, api: [String])
    {
        let a = try await Self.machine(gateway)
        let b = try await Self.machine(gateway)
        let api = ["--api", gateway.baseURL.absoluteString]
        let first = try await a.run(["devices", "activate", "--name", "Desk"] + api)
        try #require(first.status == 0, "\(first.stderr)")
        let child = try b.start(["devices", "activate", "--name", "Laptop"] + extra + api)
        return (a, b, child, api)
    }

    /// Waits for the child to end (killing it after a minute) and returns what it printed.
    static func end(_ child: ChildProgram) async -> ChildProgram.Output {
        _ = await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { $0.exitStatus != nil }
        await child.kill()
        return child.output.value
    }

    /// This install's device id, as `vault devices list` shows it.
    static func thisDevice(_ cli: VaultCLI) async throws -> [String: Any] {
        let listed = try await cli.run(["devices", "list", "--json"])
        return try #require(try listed.jsonArray().first { $0["this_device"] as? Bool == true }, "\(listed)")
    }

    @Test("activate --resume after the waiting process was killed: the same request, its deadline, an approval given meanwhile; no second request")
    func resumeAfterACrash() async throws {
        let gateway = try await DevGateway.start()
        let (a, b, child, api) = try await Self.waitingSecondDevice(gateway)
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { $0.standardError.contains("Waiting for an active device") })
        await child.kill()  // SIGKILL: no chance to cancel at the server
        let stored = try await Self.thisDevice(b)
        let request = try #require(stored["approval_request"] as? [String: Any], "the request is stored: \(stored)")
        #expect(stored["status"] as? String == "pending")

        let sync = try await a.run(["notifications", "sync"] + api)
        #expect(sync.status == 0, "\(sync.stderr)")
        let approve = try await a.run(["notifications", "answer", try #require(request["notification"] as? String), "approve"] + api)
        #expect(approve.status == 0, "\(approve.stderr)")

        let resumed = try await b.run(["devices", "activate", "--resume"] + api)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("Continuing the approval request"))
        #expect(resumed.stdout.contains("active") && resumed.stdout.contains("alice"), "\(resumed.stdout)")
        #expect(await gateway.stats().approvalRequests == 1, "the resumed wait sent no second request")
        let after = try await Self.thisDevice(b)
        #expect(after["status"] as? String == "active" && after["approval_request"] == nil)
        let nothing = try await a.run(["devices", "activate", "--resume"] + api)
        #expect(nothing.status == 0 && nothing.stdout.contains("already active"), "\(nothing)")
        await gateway.stop()
    }

    @Test("Ctrl-C while waiting cancels the activation at the server (exit 130); --resume then says it ended")
    func interruptCancels() async throws {
        let gateway = try await DevGateway.start()
        let (a, b, child, api) = try await Self.waitingSecondDevice(gateway)
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { $0.standardError.contains("Waiting for an active device") })
        kill(child.processIdentifier, SIGINT)
        let output = await Self.end(child)
        #expect(output.exitStatus == 130, "\(output.standardError)")
        #expect(output.standardError.contains("cancelled at the server"))
        let deviceID = try #require(try await Self.thisDevice(b)["device_id"] as? String)
        #expect(await gateway.deviceStatus(subject: "alice", deviceID: deviceID) != "pending")
        // The approval request is withdrawn: A has nothing left to approve.
        #expect(try await a.run(["notifications", "sync"] + api).status == 0)
        let pending = try await a.run(["notifications", "list", "--pending", "--json"])
        #expect((try pending.jsonObject()["notifications"] as? [[String: Any]])?.isEmpty == true, "\(pending.stdout)")
        let resumed = try await b.run(["devices", "activate", "--resume"] + api)
        #expect(resumed.status == 67 && resumed.stderr.contains("ended"), "\(resumed)")
        await gateway.stop()
    }

    @Test("--fallback: a wrong code is refused with the attempts left, the right one activates")
    func fallbackCode() async throws {
        let gateway = try await DevGateway.start()
        let (_, b, child, _) = try await Self.waitingSecondDevice(gateway, ["--fallback"])
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(60))) { $0.standardError.contains("Enter the activation code") })
        let deviceID = try #require(try await Self.thisDevice(b)["device_id"] as? String)
        let code = try #require(await gateway.activationCode(subject: "alice", deviceID: deviceID))
        child.write("\(code == "00000000" ? "11111111" : "00000000")\n")
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.standardError.contains("attempt(s) left") })
        child.write("\(code)\n")
        let output = await Self.end(child)
        #expect(output.exitStatus == 0, "\(output.standardError)")
        #expect(output.lines.contains { $0.contains("active") && $0.contains("fallback") }, "\(output.lines)")
        #expect(!output.standardError.contains(code) && !output.lines.joined().contains(code), "the code is not echoed")
        #expect(await gateway.deviceStatus(subject: "alice", deviceID: deviceID) == "active")
        await gateway.stop()
    }

    @Test("revoking this device from the command line ends its session (device_revoked) and wipes its tokens")
    func revokeThisDevice() async throws {
        let gateway = try await DevGateway.start()
        let a = try await Self.machine(gateway)
        let api = ["--api", gateway.baseURL.absoluteString]
        #expect(try await a.run(["devices", "activate", "--name", "Desk"] + api).status == 0)
        let deviceID = try #require(try await Self.thisDevice(a)["device_id"] as? String)
        let revoked = try await a.run(["devices", "revoke", deviceID] + api)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.stdout.contains("it was this device"))
        #expect(await gateway.deviceStatus(subject: "alice", deviceID: deviceID) == "revoked")
        let token = try await a.run(["token"])
        #expect(token.status == 80 && token.stdout.isEmpty, "\(token)")
        #expect(token.stderr.contains("account alice ("), "the library's words name the account as the user knows it: \(token.stderr)")
        let sessions = try await a.run(["sessions", "list", "--json"])
        #expect(sessions.stdout.contains("device_revoked"), "\(sessions.stdout)")
        await gateway.stop()
    }

    @Test("notifications list --follow --json prints the existing ones, then each new one once as it arrives, escaped; Ctrl-C ends it (exit 0)")
    func follow() async throws {
        let gateway = try await DevGateway.start()
        let a = try await Self.machine(gateway)
        let api = ["--api", gateway.baseURL.absoluteString]
        #expect(try await a.run(["devices", "activate", "--name", "Desk"] + api).status == 0)
        await gateway.postNotification(subject: "alice", title: "Before", message: "m", actions: [(label: "OK", action: "ok")])
        #expect(try await a.run(["notifications", "sync"] + api).status == 0)

        let child = try a.start(["notifications", "list", "--follow", "--interval", "1s", "--json"] + api)
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.lines.count >= 1 })
        await gateway.postNotification(subject: "alice", title: "Arrived \u{1B}[2J", message: "m", actions: [(label: "OK", action: "ok")])
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.lines.count >= 2 })
        await gateway.postNotification(subject: "alice", title: "Third", message: "m", actions: [(label: "OK", action: "ok")])
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.lines.count >= 3 })
        kill(child.processIdentifier, SIGINT)
        let output = await Self.end(child)
        #expect(output.exitStatus == 0, "\(output.standardError)")
        let subjects = output.lines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["subject"] as? String
        }
        #expect(subjects == ["Before", "Arrived \u{1B}[2J", "Third"], "each once, oldest first: \(output.lines)")
        #expect(!output.lines.joined().contains("\u{1B}"), "JSON escapes the control character")
        await gateway.stop()
    }

    @Test(
        "sessions extend in the warning window: granted by the server, then refused at the policy's limit without asking; a server's no is reported in its words (exit 76)"
    )
    func extendAcceptedRefusedAndAtTheLimit() async throws {
        let gateway = try await DevGateway.start()
        let a = try await VaultCLI.keyFileVault()
        let api = ["--api", gateway.baseURL.absoluteString]
        // alice's last activity was 10 minutes ago (the sign-in, written with a clock that far
        // back); a 60-minute idle timeout warned from 50 minutes before: in the warning window now,
        // for the next 50 minutes, without waiting on the real clock.
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
        let then = Date().addingTimeInterval(-600)
        let vault = try Vault.open(
            at: a.vault, credential: .keyFile(a.file("vault.key")),
            options: VaultOptions(clock: WallClock { then }))
        _ = try vault.accounts.signIn(
            NewAccount(
                issuer: gateway.baseURL.absoluteString, subject: "alice",
                client: OAuthClientSettings(tokenEndpoint: gateway.tokenEndpoint, clientID: "vault-cli")),
            tokens: TokenSet(accessToken: issued.accessToken, refreshToken: issued.refreshToken, accessTokenExpiresAt: Date().addingTimeInterval(3000)),
            policy: SessionPolicy(idleTimeout: .seconds(3600), warningBefore: .seconds(3000), maxExtensions: 1, activity: .interactive))
        vault.close()

        await gateway.setExtensionRefusal(code: "policy_denied", message: "extensions are off for \u{1B}[31mthis tenant")
        let refused = try await a.run(["sessions", "extend"] + api)
        #expect(refused.status == 76, "\(refused)")
        #expect(refused.stderr.contains("policy_denied") && refused.stderr.contains("extensions are off"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("\u{1B}"), "the server's words are escaped")
        #expect(await gateway.stats().extensionRequests == 1)

        await gateway.setExtensionRefusal(code: nil)
        let granted = try await a.run(["sessions", "extend"] + api)
        #expect(granted.status == 0, "\(granted)")
        #expect(granted.stdout.contains("Extended") && granted.stdout.contains("0 extensions left"), "\(granted.stdout)")
        #expect(await gateway.stats().extensionRequests == 2)

        let limit = try await a.run(["sessions", "extend"] + api)
        #expect(limit.status == 1 && limit.stderr.contains("no more extensions"), "\(limit)")
        #expect(await gateway.stats().extensionRequests == 2, "at the limit the server is not asked")
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
