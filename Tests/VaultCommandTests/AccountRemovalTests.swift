import DevGateway
import Foundation
import Testing
import VaultTestSupport

@Suite("vault accounts remove never stops half-way")
struct AccountRemovalTests {
    @Test("removal under another process's long read: revoked at the gateway, removed, the other account active, a warning; compact finishes later")
    func removeUnderLongReader() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        let bobTokens = await gateway.issueGrant(subject: "bob", clientID: "vault-cli")
        let aliceTokens = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
        #expect(try await fixture.add(bobTokens, gateway: gateway, subject: "bob").status == 0)
        #expect(try await fixture.add(aliceTokens, gateway: gateway, subject: "alice").status == 0)

        let reader = try LongReader(fixture.cli.vault)
        let removed = try await fixture.run(["accounts", "remove", "alice", "--yes"])
        #expect(removed.status == 0, "\(removed)")
        #expect(removed.stdout.contains("Removed account \"alice at work\" (alice, "), "accounts are named by label and subject: \(removed.stdout)")
        #expect(removed.stdout.contains("Active now: account \"bob at work\" (bob, "), "\(removed.stdout)")
        #expect(removed.stderr.contains("warning") && removed.stderr.contains("vault compact"), "\(removed.stderr)")
        #expect(await gateway.stats().revocationRequests == 1, "the revocation reached the gateway")

        let listed = try await fixture.run(["accounts", "list", "--json"]).jsonArray()
        #expect(listed.map { $0["subject"] as? String } == ["bob"])
        #expect(listed.first?["active"] as? Bool == true)

        try reader.finish()
        let compacted = try await fixture.run(["compact"])
        #expect(compacted.status == 0, "\(compacted)")
        #expect(compacted.stdout.contains("write-ahead log is empty"))
        #expect(FileProbe.bytes(URL(fileURLWithPath: fixture.cli.vault.path + "-wal")).isEmpty)

        // Without revocation, the last account: nothing is sent, nothing stays active.
        let last = try await fixture.run(["accounts", "remove", "bob", "--yes", "--no-revoke"])
        #expect(last.status == 0, "\(last)")
        #expect(last.stdout.contains("No account is active now."))
        #expect(last.stderr.isEmpty, "\(last.stderr)")
        #expect(await gateway.stats().revocationRequests == 1)
        await gateway.stop()
    }

    @Test("a refused revocation is a warning; the account is removed anyway")
    func refusedRevocationIsAWarning() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        let tokens = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
        #expect(try await fixture.add(tokens, gateway: gateway, subject: "alice").status == 0)
        await gateway.failNextRevocationRequests(1, with: TokenFault(status: 503))
        let removed = try await fixture.run(["accounts", "remove", "alice", "--yes"])
        #expect(removed.status == 0, "\(removed)")
        #expect(removed.stderr.contains("did not revoke"), "\(removed.stderr)")
        #expect(await gateway.stats().revocationRequests == 1)
        #expect(try await fixture.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
        await gateway.stop()
    }

    @Test("sessions end revokes the grant at the provider first, then wipes the tokens; --json says revoked")
    func sessionEndRevokes() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        let tokens = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
        #expect(try await fixture.add(tokens, gateway: gateway, subject: "alice").status == 0)
        let ended = try await fixture.run(["sessions", "end", "--json"])
        #expect(ended.status == 0, "\(ended)")
        #expect(try ended.jsonObject()["revoked"] as? Bool == true, "\(ended.stdout)")
        #expect(ended.stderr.isEmpty, "\(ended.stderr)")
        #expect(await gateway.stats().revocationRequests == 1)
        #expect(await gateway.revokeGrants(subject: "alice") == 0, "the grant had ended at the provider: none left live")
        #expect(try await fixture.run(["token"]).status == Exit.sessionEnded)
        await gateway.stop()
    }

    @Test("without a revocation endpoint, or when the provider refuses, every sign-out says the grant was not revoked")
    func unrevokedSignOutsSaySo() async throws {
        let gateway = try await DevGateway.start()
        let fixture = try await AccountsAndTokenTests.Fixture()
        for subject in ["alice", "bob"] {
            let tokens = await gateway.issueGrant(subject: subject, clientID: "vault-cli")
            let added = try await fixture.run(
                ["accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli", "--subject", subject],
                stdin: AccountsAndTokenTests.tokenResponse(tokens))
            #expect(added.status == 0, "\(added)")
        }
        let ended = try await fixture.run(["sessions", "end", "--account", "alice", "--json"])
        #expect(ended.status == 0, "\(ended)")
        let endedJSON = try ended.jsonObject()
        #expect(endedJSON["revoked"] as? Bool == false)
        #expect((endedJSON["reason"] as? String)?.contains("no revocation endpoint") == true, "\(endedJSON)")
        #expect(ended.stderr.contains("was not revoked"), "\(ended.stderr)")
        let removed = try await fixture.run(["accounts", "remove", "bob", "--yes", "--json"])
        #expect(removed.status == 0, "\(removed)")
        #expect(try removed.jsonObject()["revoked"] as? Bool == false)
        #expect(removed.stderr.contains("was not revoked"), "\(removed.stderr)")
        #expect(!removed.stdout.contains("Removed"), "--json prints JSON only: \(removed.stdout)")
        #expect(await gateway.stats().revocationRequests == 0)

        let carol = await gateway.issueGrant(subject: "carol", clientID: "vault-cli")
        #expect(try await fixture.add(carol, gateway: gateway, subject: "carol").status == 0)
        await gateway.failNextRevocationRequests(1, with: TokenFault(status: 400, error: "unauthorized_client"))
        let refused = try await fixture.run(["sessions", "end", "--account", "carol", "--json"])
        #expect(refused.status == 0, "the session ends here all the same: \(refused)")
        let refusedJSON = try refused.jsonObject()
        #expect(refusedJSON["revoked"] as? Bool == false)
        #expect((refusedJSON["reason"] as? String)?.contains("did not revoke") == true, "\(refusedJSON)")
        #expect(refused.stderr.contains("did not revoke"), "\(refused.stderr)")
        await gateway.stop()
    }
}
