import DevGateway
import Foundation
import Testing
import VaultTestSupport

/// `vault recipient`, `vault sessions export` and `vault sessions import` with the built binary:
/// two vault files, each used by its own processes, against the development gateway.
@Suite("vault sessions export and import")
struct SessionTransferCommandTests {
    @Test("export --move from vault A, import into vault B: B's `vault token` refreshes at the gateway; A's sends no request")
    func moveBetweenProcesses() async throws {
        let gateway = try await DevGateway.start()
        let a = try await VaultCLI.keyFileVault()
        let b = try await VaultCLI.keyFileVault()
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
        let added = try await a.run(
            [
                "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                "--subject", "alice", "--label", "Alice",
            ], stdin: AccountsAndTokenTests.tokenResponse(issued))
        try #require(added.status == 0, "\(added)")

        let recipient = try await b.run(["recipient"])
        #expect(recipient.status == 0)
        #expect(recipient.stdout.hasPrefix("cvr1:"))
        let exported = try await a.run(["sessions", "export", "--to", recipient.stdout.trimmingCharacters(in: .whitespacesAndNewlines)])
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(exported.stdout.hasPrefix("cvsession1:"))
        for secret in [issued.accessToken, issued.refreshToken].compactMap({ $0 }) {
            #expect(!exported.stdout.contains(secret) && !exported.stderr.contains(secret))
        }

        let imported = try await b.run(["sessions", "import"], stdin: exported.stdout)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("Imported the session of \"Alice\""))
        let again = try await b.run(["sessions", "import"], stdin: exported.stdout)
        #expect(again.status == 89, "a replay is refused with the transfer code")
        #expect(again.stderr.contains("already imported"))

        let before = await gateway.tokenRequestCount()
        // Longer than the token has left: B must refresh, with the refresh token A held.
        let token = try await b.run(["token", "--min-ttl", "2h"])
        #expect(token.status == 0, "\(token.stderr)")
        #expect(await gateway.tokenRequestCount() == before + 1)
        #expect(token.stdout.trimmingCharacters(in: .newlines) != issued.accessToken)

        let stale = try await a.run(["token", "--min-ttl", "2h"])
        #expect(stale.status == 80, "\(stale.stderr)")
        #expect(stale.stderr.contains("moved to another vault"))
        #expect(await gateway.tokenRequestCount() == before + 1, "A sent no refresh request")

        let shown = try await b.run(["accounts", "show"])
        #expect(shown.stdout.contains("Origin"))
        #expect(shown.stdout.contains("moved"))
        let events = try await a.run(["events", "--json"])
        #expect(events.stdout.contains("session_exported"))
        await gateway.stop()
    }

    @Test("export --access-only keeps A working; B gets no refresh token; a tampered or wrongly addressed blob is refused")
    func accessOnlyAndRefusals() async throws {
        let gateway = try await DevGateway.start()
        let a = try await VaultCLI.keyFileVault()
        let b = try await VaultCLI.keyFileVault()
        let c = try await VaultCLI.keyFileVault()
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
        try #require(
            try await a.run(
                [
                    "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString, "--client-id", "vault-cli",
                    "--subject", "alice",
                ], stdin: AccountsAndTokenTests.tokenResponse(issued)
            ).status == 0)
        let toB = try await b.run(["recipient"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let toC = try await c.run(["recipient"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let wrong = try await a.run(["sessions", "export", "--access-only", "--to", toC])
        #expect(try await b.run(["sessions", "import"], stdin: wrong.stdout).status == 89)
        let blob = try await a.run(["sessions", "export", "--access-only", "--to", toB]).stdout
        var bytes = Array(blob.utf8)
        bytes[40] = bytes[40] == UInt8(ascii: "Q") ? UInt8(ascii: "R") : UInt8(ascii: "Q")
        let tampered = try await b.run(["sessions", "import"], stdin: String(decoding: bytes, as: UTF8.self))
        #expect(tampered.status == 89)
        #expect(try await b.run(["accounts", "list", "--json"]).jsonArray().isEmpty, "nothing stored")
        // A character in the middle: the text still decodes, and only the checksum tells.
        var mistyped = Array(toB.utf8)
        mistyped[20] = mistyped[20] == UInt8(ascii: "k") ? UInt8(ascii: "m") : UInt8(ascii: "k")
        let typo = try await a.run(["sessions", "export", "--to", String(decoding: mistyped, as: UTF8.self)])
        #expect(typo.status == 64 && typo.stdout.isEmpty, "a mistyped recipient is refused before anything is sealed")
        #expect(typo.stderr.contains("checksum"))

        let imported = try await b.run(["sessions", "import", "--json"], stdin: blob)
        #expect(imported.status == 0, "\(imported.stderr)")
        let refresh = (try imported.jsonObject()["tokens"] as? [String: Any])?["refresh_token"] as? [String: Any]
        #expect(refresh?["present"] as? Bool == false)
        #expect(try await b.run(["token"]).stdout.trimmingCharacters(in: .newlines) == issued.accessToken)
        let kept = try await a.run(["token", "--min-ttl", "2h"])
        #expect(kept.status == 0, "A keeps its grant and refreshes: \(kept.stderr)")
        await gateway.stop()
    }
}
