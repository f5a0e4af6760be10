import DevGateway
import Foundation
import GRDB
import Testing
import VaultTestSupport

/// Issue 31's findings, tried the way someone with the vault file (and no key) would: delete a
/// row, or put back rows from a copy taken earlier. Each is refused where it is used (exit 65
/// naming table and row), nothing reaches the server, and `vault verify` names it.
@Suite("vault token on a vault with rows deleted or put back")
struct RollbackTests {
    /// Saves `tables` into `old.db` beside the vault, as a copy taken now.
    static func saveAside(_ cli: VaultCLI, _ tables: [String]) throws -> URL {
        let old = cli.file("old.db")
        var sql = "ATTACH DATABASE ? AS old;"
        for table in tables { sql += "CREATE TABLE old.\(table) AS SELECT * FROM main.\(table);" }
        try RawDatabase.execute(cli.vault, sql + "DETACH DATABASE old;", [old.path])
        return old
    }

    /// Replaces `table`'s rows with the saved ones (`filter` picks which, on both sides).
    static func putBack(_ cli: VaultCLI, _ old: URL, _ table: String, where filter: String = "1", _ arguments: [String] = []) throws {
        try RawDatabase.execute(
            cli.vault,
            """
            ATTACH DATABASE ? AS old;
            DELETE FROM main.\(table) WHERE \(filter);
            INSERT INTO main.\(table) SELECT * FROM old.\(table) WHERE \(filter);
            DETACH DATABASE old;
            """, StatementArguments([old.path] + arguments + arguments))
    }

    func twoAccounts(_ gateway: DevGateway) async throws -> AccountsAndTokenTests.Fixture {
        let fixture = try await AccountsAndTokenTests.Fixture()
        for subject in ["alice", "bob"] {
            let added = try await fixture.add(await gateway.issueGrant(subject: subject, clientID: "vault-cli"), gateway: gateway, subject: subject)
            try #require(added.status == 0, "\(added)")
        }
        return fixture
    }

    @Test("a deleted policy row: vault token refuses that account (exit 65, naming the row); the other account's token is served")
    func deletedPolicy() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await twoAccounts(gateway)
        try #require(try await fixture.run(["accounts", "set-policy", "alice", "--idle-timeout", "1m"]).status == 0)
        try RawDatabase.execute(
            fixture.cli.vault, "DELETE FROM session_policies WHERE account_id = (SELECT account_id FROM accounts WHERE subject = 'alice')")

        let token = try await fixture.run(["token", "--account", "alice"])
        #expect(token.status == Exit.damaged, "\(token)")
        #expect(token.stdout.isEmpty)
        #expect(token.stderr.contains("session_policies row") && token.stderr.contains("was deleted"), "\(token.stderr)")
        #expect(try await fixture.run(["token", "--account", "bob"]).status == 0, "bob's rows are as the vault wrote them")
        let verify = try await fixture.run(["verify"])
        #expect(verify.status == Exit.damaged && verify.stdout.contains("session_policies"), "\(verify)")
        await gateway.stop()
    }

    @Test("after `sessions end`, the tokens and session of before put back: vault token exits 65 and sends nothing")
    func endedSessionPutBack() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await twoAccounts(gateway)
        let old = try Self.saveAside(fixture.cli, ["tokens", "sessions"])
        let end = try await fixture.run(["sessions", "end", "--account", "alice"])
        #expect(end.status == 0, "\(end)")
        let before = await gateway.stats().tokenRequests
        let alice = "(SELECT account_id FROM accounts WHERE subject = 'alice')"
        try Self.putBack(fixture.cli, old, "tokens", where: "account_id = \(alice)")
        try Self.putBack(fixture.cli, old, "sessions", where: "account_id = \(alice)")
        try RawDatabase.execute(fixture.cli.vault, "UPDATE tokens SET access_expires_at = 0 WHERE account_id = \(alice)")

        let token = try await fixture.run(["token", "--account", "alice"])
        #expect(token.status == Exit.damaged, "\(token)")
        #expect(token.stdout.isEmpty)
        #expect(await gateway.stats().tokenRequests == before, "no refresh was sent for the ended session")
        await gateway.stop()
    }

    @Test("a deleted event: verify names table and account; repair --accept-current keeps the file as it is, recorded as an event")
    func repairAcceptsCurrent() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await twoAccounts(gateway)
        let accounts = try await fixture.run(["accounts", "list", "--json"]).jsonArray()
        let alice = try #require(accounts.first { $0["subject"] as? String == "alice" }?["id"] as? String)
        // Two events of alice's (her sign-in's) and one deleted: the collection no longer matches.
        try RawDatabase.execute(
            fixture.cli.vault, "DELETE FROM events WHERE seq = (SELECT min(seq) FROM events WHERE account_id = ?)", [alice])
        let verify = try await fixture.run(["verify", "--json"])
        #expect(verify.status == Exit.damaged, "\(verify)")
        let damaged = try #require(try verify.jsonObject()["damaged"] as? [[String: Any]])
        #expect(damaged.contains { $0["table"] as? String == "events" && $0["row"] as? String == alice }, "\(damaged)")
        #expect(verify.stderr.contains("vault repair --accept-current"), "\(verify.stderr)")

        #expect(try await fixture.run(["repair"]).status == Exit.usage, "repair says what it would do only when asked")
        let repair = try await fixture.run(["repair", "--accept-current", "--json"])
        #expect(repair.status == 0, "\(repair)")
        let accepted = try #require(try repair.jsonObject()["accepted"] as? [[String: Any]])
        #expect(accepted.contains { $0["table"] as? String == "events" }, "\(accepted)")
        #expect(try await fixture.run(["verify"]).status == 0, "the vault commits to its rows as they are")
        let events = try await fixture.run(["events", "--json"])
        #expect(events.stdout.contains("repair_accepted"), "\(events.stdout)")

        // A row changed without the key is never accepted.
        try RawDatabase.execute(fixture.cli.vault, "UPDATE accounts SET scopes = 'admin' WHERE account_id = ?", [alice])
        let refused = try await fixture.run(["repair", "--accept-current"])
        #expect(refused.status == Exit.damaged, "\(refused)")
        #expect(refused.stderr.contains("accounts.scopes"), "\(refused.stderr)")
        await gateway.stop()
    }

    @Test("the header of before an account switch put back: vault token (no --account) refuses instead of serving the other account")
    func headerPutBackAfterSwitch() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await twoAccounts(gateway)  // bob is active (added last)
        let old = try Self.saveAside(fixture.cli, ["vault_meta"])
        #expect(try await fixture.run(["accounts", "switch", "alice"]).status == 0)
        let served = try await fixture.run(["token"])
        try #require(served.status == 0, "\(served)")
        try Self.putBack(fixture.cli, old, "vault_meta")

        let token = try await fixture.run(["token"])
        #expect(token.status == Exit.damaged, "\(token)")
        #expect(token.stdout.isEmpty, "bob's token is not handed out for alice's")
        #expect(token.stderr.contains("vault header") && token.stderr.contains("older than the vault's record"), "\(token.stderr)")
        let verify = try await fixture.run(["verify"])
        #expect(verify.status == Exit.damaged, "\(verify)")
        await gateway.stop()
    }
}
