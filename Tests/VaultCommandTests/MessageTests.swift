import DevGateway
import Foundation
import Testing
import VaultTestSupport

/// What the command tells a user to do next is a command that can be pasted as it is, and it
/// names accounts the way `--account` takes them.
@Suite("Messages a user can act on")
struct MessageTests {
    /// The backticked command of `message` that starts with `vault `, split into arguments.
    static func pastedCommand(in message: String) -> [String]? {
        guard let match = message.firstMatch(of: /`(vault [^`]+)`/) else { return nil }
        return match.1.split(separator: " ").dropFirst().map(String.init)
    }

    static func add(_ fixture: AccountsAndTokenTests.Fixture, _ gateway: DevGateway, subject: String, label: String) async throws {
        let issued = await gateway.issueGrant(subject: subject, clientID: "vault-cli")
        let added = try await fixture.run(
            [
                "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--revocation-endpoint",
                gateway.revocationEndpoint.absoluteString, "--client-id", "vault-cli", "--subject", subject, "--label", label,
            ], stdin: AccountsAndTokenTests.tokenResponse(issued))
        try #require(added.status == 0, "\(added)")
    }

    @Test("an empty vault points to vault login; --account takes a label; an ambiguous one lists each account's own --account")
    func accountReferences() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        let empty = try await fixture.run(["token"])
        #expect(empty.status == 80 && empty.stderr.contains("`vault login`") && !empty.stderr.contains("accounts add"), "\(empty)")

        try await Self.add(fixture, gateway, subject: "alice", label: "Work")
        try await Self.add(fixture, gateway, subject: "bob", label: "Home")
        let listed = try await fixture.run(["accounts", "list", "--json"]).jsonArray()
        let ids = Dictionary(uniqueKeysWithValues: listed.compactMap { row in (row["subject"] as? String).map { ($0, row["id"] as? String ?? "") } })
        let alice = try #require(ids["alice"])
        let bob = try #require(ids["bob"])
        let byLabel = try await fixture.run(["token", "--account", "Work", "--json"])
        #expect(try byLabel.jsonObject()["account"] as? String == alice, "the label the sign-in printed names the account: \(byLabel)")

        // bob, signed in again with --label, is renamed: now two accounts are "Work".
        try await Self.add(fixture, gateway, subject: "bob", label: "Work")
        let shown = try await fixture.run(["accounts", "show", bob, "--json"])
        #expect(try shown.jsonObject()["label"] as? String == "Work", "\(shown)")
        let ambiguous = try await fixture.run(["token", "--account", "Work"])
        #expect(ambiguous.status == 64, "\(ambiguous)")
        for id in [alice, bob] {
            #expect(ambiguous.stderr.contains("`--account \(id.prefix(8))`"), "each candidate with an --account that names it: \(ambiguous.stderr)")
        }
        let byPrefix = try await fixture.run(["token", "--account", String(bob.prefix(8)), "--json"])
        #expect(try byPrefix.jsonObject()["account"] as? String == bob)
        await gateway.stop()
    }

    @Test("an ended session says which command signs in again, and that command names the same account")
    func pasteableHint() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        try await Self.add(fixture, gateway, subject: "alice", label: "alice's \"work\" $HOME")
        try #require(try await fixture.run(["sessions", "end", "--no-revoke"]).status == 0)
        let ended = try await fixture.run(["token"])
        #expect(ended.status == 80, "\(ended)")
        let command = try #require(Self.pastedCommand(in: ended.stderr), "a command to paste: \(ended.stderr)")
        #expect(Array(command.prefix(2)) == ["login", "--account"], "\(command)")
        // Its account argument is one `--account` resolves, to this account, with no quoting.
        let reference = try #require(command.dropFirst(2).first)
        let shown = try await fixture.run(["accounts", "show", reference, "--json"])
        #expect(try shown.jsonObject()["subject"] as? String == "alice", "\(shown)")
        #expect(reference.allSatisfy { $0.isHexDigit || $0 == "-" })
        await gateway.stop()
    }

    @Test("sessions list shows the state the next use will find: a deadline that passed is locked or expired, not active")
    func sessionsAtNextUse() async throws {
        let cli = try VaultCLI()
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: "Fixtures").appending(path: FixtureV11.fileName)
        try FileManager.default.copyItem(at: fixture, to: cli.vault)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: cli.vault.path)
        // No key: sessions list reads what it shows without it. dave's idle deadline and frank's
        // absolute one passed long ago; grace's session has neither.
        let rows = try await cli.run(["sessions", "list", "--json"]).jsonArray()
        let text = try await cli.run(["sessions", "list"]).stdout
        #expect(text.contains("dave  locked (idle_timeout, at next use)"), "\(text)")
        #expect(text.contains("frank  expired (absolute_timeout, at next use)"), "\(text)")
        #expect(text.contains("grace  active"), "\(text)")
        let due = rows.map { ($0["state"] as? String, $0["state_at_next_use"] as? String) }
        #expect(due.contains { $0 == ("active", "locked") } && due.contains { $0 == ("active", "expired") } && due.contains { $0 == ("active", "active") })
        // The one vocabulary agrees with the state at next use, row by row.
        let expected = ["active": ["active_signed_in", "active_device_pending"], "locked": ["locked"], "expired": ["expired"], "signed_out": ["inactive"]]
        for row in rows {
            let stateAtNextUse = row["state_at_next_use"] as? String ?? "?"
            #expect(expected[stateAtNextUse]?.contains(row["account_state"] as? String ?? "") == true, "\(row)")
        }
    }
}
