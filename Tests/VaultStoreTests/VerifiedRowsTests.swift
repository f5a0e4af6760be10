import Foundation
import GRDB
import Testing
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// The token path remembers the rows it checked (``VerifiedRows``): a row is taken as checked
/// again only when it is the same, byte for byte. Anything changed without the key is still
/// reported, however recently the row was read.
@Suite struct VerifiedRowsTests {
    /// A plain column of each row the token path reads, and a value to put in it.
    static let edits: [(table: String, sql: String, argument: DatabaseValue)] = [
        ("tokens", "UPDATE tokens SET scopes = ?", "openid admin".databaseValue),
        ("sessions", "UPDATE sessions SET absolute_deadline = ?", Int64(4_102_444_800_000).databaseValue),
        ("session_policies", "UPDATE session_policies SET max_extensions = ?", Int64(99).databaseValue),
        ("vault_meta", "UPDATE vault_meta SET active_account_id = NULL WHERE ? IS NOT NULL", Int64(1).databaseValue),
    ]

    @Test("a row read and checked before is still checked again when it changes", arguments: edits.indices)
    func changedRememberedRowIsRejected(edit index: Int) throws {
        let edit = Self.edits[index]
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let record = try vault.accounts.signIn(Samples.account(), tokens: Samples.tokens("memo"), policy: SessionPolicy())
        // Read twice: checked, then remembered and served from the memo.
        for _ in 0..<2 { #expect(try vault.tokens.accessSnapshot(for: nil)?.token?.accessToken == "AT-memo-0123456789abcdef") }

        let original = try RawDatabase.queue(test.url).read { db in try Row.fetchAll(db, sql: "SELECT * FROM \(edit.table)") }
        try RawDatabase.execute(test.url, edit.sql, [edit.argument])
        let error = expectVaultError(.damaged) { try vault.tokens.accessSnapshot(for: record.account.id) }
        #expect(error?.message.contains(edit.table) == true, "\(error.map(String.init(describing:)) ?? "no error")")

        // Put back as it was, the row is authentic again.
        try RawDatabase.queue(test.url).write { db in
            try db.execute(sql: "DELETE FROM \(edit.table)")
            for row in original {
                let columns = Array(row.columnNames)
                try db.execute(
                    sql: "INSERT INTO \(edit.table) (\(columns.joined(separator: ", "))) VALUES (\(databaseQuestionMarks(count: columns.count)))",
                    arguments: StatementArguments(columns.map { row[$0] as DatabaseValue }))
            }
        }
        #expect(try vault.tokens.accessSnapshot(for: nil)?.token?.accessToken == "AT-memo-0123456789abcdef")
    }

    @Test("a MAC that keeps a remembered row's column tags is byte for byte the one made from nothing")
    func keptColumnTagsAreThoseMadeAgain() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let record = try vault.accounts.signIn(Samples.account(), tokens: Samples.tokens("first"), policy: SessionPolicy())
        let account = record.account.id
        // Each store changes some columns (the sealed tokens, the generation, the times) and keeps
        // others (account, token type, scopes): the kept ones take the remembered row's tags.
        var generation = try vault.tokens.current(for: account)?.generation
        for round in 0..<3 {
            var tokens = Samples.tokens("round\(round)")
            if round == 1 { tokens.idToken = nil }
            generation = try vault.tokens.store(tokens, for: account, replacing: generation)
        }
        // Nothing remembered: every column tag hashed again.
        let remade = try remadeMACs(test.url, tables: [.tokens, .vaultState], integrity: vault.maintenance.integrity, forgetting: true)
        for row in remade { #expect(row.made == row.stored, "\(row.row)") }
        #expect(remade.count == 2)
        // And the vault, opened again (nothing remembered), finds every row authentic.
        vault.close()
        let reopened = try test.open()
        defer { reopened.close() }
        #expect(try reopened.maintenance.verify().passed)
    }

    @Test("values are the same only with the same type and bytes")
    func sameMeansSameBytes() {
        let precomposed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(precomposed == decomposed, "Swift's == takes them as equal")
        #expect(!VerifiedRows.identical([precomposed.databaseValue], [decomposed.databaseValue]))
        #expect(!VerifiedRows.identical([Int64(1).databaseValue], [Double(1).databaseValue]))
        #expect(!VerifiedRows.identical([Data("abc".utf8).databaseValue], ["abc".databaseValue]))
        #expect(!VerifiedRows.identical([DatabaseValue.null], [Int64(0).databaseValue]))
        #expect(!VerifiedRows.identical([Int64(1).databaseValue], [Int64(1).databaseValue, .null]))
        let row: [DatabaseValue] = [precomposed.databaseValue, Int64(7).databaseValue, .null]
        #expect(VerifiedRows.identical(row, row))
    }
}
