import Foundation
import GRDB
import Testing
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Case 8 of issue 7. TamperingTests (VaultStoreTests) proves that a value copied to another
/// row, column or account, or an older token replayed into its row, does not open on read.
/// This adds: values exchanged in both directions are found by `verify` naming both rows;
/// the replay is found by `verify`; and the one replay that is not detected — a whole row
/// rolled back, generation included — is the README's documented known limit.
@Suite struct TamperSwapTests {
    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appending(path: "README.md")

    @Test("sealed values exchanged between accounts, rows and columns: verify names every moved value")
    func exchangesAreNamed() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try vault.accounts.insert(Samples.account("alice")).id
        let bob = try vault.accounts.insert(Samples.account("bob")).id
        let aliceTokens = Samples.steadyTokens("swap-alice")
        let bobTokens = Samples.steadyTokens("swap-bob")
        try vault.tokens.store(aliceTokens, for: alice, replacing: nil)
        try vault.tokens.store(bobTokens, for: bob, replacing: nil)
        for (uuid, account) in [("n-a", alice), ("n-b", alice)] {
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: uuid, account: account, subject: "subject \(uuid)",
                    message: "message \(uuid)", actions: [], createdAt: Date()))
        }
        #expect(try vault.maintenance.verify().passed)
        let url = test.url
        func exchange(
            _ table: String, _ first: (column: String, key: String, value: String),
            _ second: (column: String, key: String, value: String)
        ) throws {
            let a = try #require(try RawDatabase.blob(url, "SELECT \(first.column) FROM \(table) WHERE \(first.key) = ?", [first.value]))
            let b = try #require(try RawDatabase.blob(url, "SELECT \(second.column) FROM \(table) WHERE \(second.key) = ?", [second.value]))
            try RawDatabase.execute(url, "UPDATE \(table) SET \(first.column) = ? WHERE \(first.key) = ?", [Data(b), first.value])
            try RawDatabase.execute(url, "UPDATE \(table) SET \(second.column) = ? WHERE \(second.key) = ?", [Data(a), second.value])
        }
        // Between accounts (same column), between rows of one account, between columns of one row.
        try exchange("tokens", ("refresh_token", "account_id", alice.rawValue), ("refresh_token", "account_id", bob.rawValue))
        try exchange("notifications", ("subject", "uuid", "n-a"), ("subject", "uuid", "n-b"))
        try exchange("tokens", ("access_token", "account_id", bob.rawValue), ("id_token", "account_id", bob.rawValue))

        let report = try vault.maintenance.verify()
        let named = Set(report.damaged.map { "\($0.table) \($0.row) \($0.column)" })
        let moved: Set<String> = [
            "tokens \(alice.rawValue) refresh_token", "tokens \(bob.rawValue) refresh_token",
            "notifications n-a subject", "notifications n-b subject",
            "tokens \(bob.rawValue) access_token", "tokens \(bob.rawValue) id_token",
        ]
        #expect(named == moved, "\(report.damaged)")
        StressResults.record(
            StressCount(
                case: "8 sealed values exchanged between accounts, rows, columns", tried: moved.count,
                passed: moved.intersection(named).count, lost: 0, leaked: moved.subtracting(named).count))
        expectRefusal(.damaged) { try vault.tokens.current(for: alice) }
        expectRefusal(.damaged) { try vault.tokens.current(for: bob) }
        LogHygiene.check(
            test.logs, texts: report.damaged.map(\.description),
            secrets: [aliceTokens.refreshToken ?? "", bobTokens.refreshToken ?? "", bobTokens.accessToken]
                + LogHygiene.secrets(of: test))
    }

    @Test("an older token replayed into its own row is named by verify; a whole row rolled back is refused at use and named by verify")
    func replay() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account()).id
        let old = Samples.steadyTokens("replay-old")
        let new = Samples.steadyTokens("replay-new")
        let first = try vault.tokens.store(old, for: account, replacing: nil)
        let url = test.url
        let oldRow = try RawDatabase.blobs(
            url, "SELECT access_token FROM tokens UNION ALL SELECT refresh_token FROM tokens UNION ALL SELECT id_token FROM tokens")
        // The whole older row, kept aside in the file as someone with a copy of it would.
        try RawDatabase.execute(url, "CREATE TABLE saved_tokens AS SELECT * FROM tokens")
        try vault.tokens.store(new, for: account, replacing: first)

        // One sealed value replayed: its generation no longer matches.
        let current = try #require(try RawDatabase.blob(url, "SELECT refresh_token FROM tokens"))
        try RawDatabase.execute(url, "UPDATE tokens SET refresh_token = ?", [Data(oldRow[1])])
        let report = try vault.maintenance.verify()
        #expect(report.damaged.map { "\($0.table) \($0.row) \($0.column)" } == ["tokens \(account.rawValue) refresh_token"])
        try RawDatabase.execute(url, "UPDATE tokens SET refresh_token = ?", [Data(current)])

        // Every column but the MAC rolled back: the row MAC names what changed.
        try RawDatabase.execute(
            url,
            """
            UPDATE tokens SET (generation, access_token, refresh_token, id_token, updated_at) =
                (SELECT generation, access_token, refresh_token, id_token, updated_at FROM saved_tokens)
            """)
        #expect(first == 1)
        let partial = expectRefusal(.damaged) { try vault.tokens.current(for: account) }
        #expect(partial?.message.contains("tokens.generation") == true, "\(partial.map(String.init(describing:)) ?? "no error")")

        // The whole row, its MAC included, rolled back to its older copy: its MAC is its own,
        // but the write counter under it is older than the one the header records for it.
        try RawDatabase.execute(url, "DELETE FROM tokens; INSERT INTO tokens SELECT * FROM saved_tokens; DROP TABLE saved_tokens")
        let rolledBack = expectRefusal(.damaged) { try vault.tokens.current(for: account) }
        #expect(rolledBack?.message.contains("tokens row \(account.rawValue)") == true)
        #expect(rolledBack?.message.contains("older than the vault's record of it") == true)
        let afterRollback = try vault.maintenance.verify()
        #expect(afterRollback.damaged.map { "\($0.table) \($0.row) \($0.column)" } == ["tokens \(account.rawValue) row_mac"])
        let readme = try String(contentsOf: Self.readme, encoding: .utf8)
        #expect(
            readme.contains("Restoring the whole file from an older copy of itself is not detected"),
            "the README lists the whole-file rollback as the known limit, with its reason")
        LogHygiene.check(test.logs, secrets: [old.refreshToken ?? "", new.refreshToken ?? "", new.accessToken] + LogHygiene.secrets(of: test))
    }
}
