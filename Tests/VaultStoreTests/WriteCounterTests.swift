import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// Issue 31, items 1 and 2: every row's MAC carries the write counter it was written at, the
/// header holds the counter and, per account, the counter of each row the session layer reads.
/// Rows deleted or put back from an older copy are refused where they are used, for their
/// account only, and named by verify.
@Suite("Write counter and manifest: rows deleted or put back are refused")
struct WriteCounterTests {
    /// The error a read throws, as `.damaged`, or a failed expectation.
    func refusal(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        do {
            try body()
            Issue.record("expected a refusal", sourceLocation: sourceLocation)
            return ""
        } catch let error as VaultError {
            #expect(error.code == .damaged, "\(error)", sourceLocation: sourceLocation)
            return error.message
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
            return ""
        }
    }

    func counter(_ url: URL) throws -> Int? { try RawDatabase.int(url, "SELECT write_counter FROM vault_state") }

    /// Two signed-in accounts; alice's rows saved aside (an older copy of them) in a second file.
    func twoAccounts() throws -> (TestVault, Vault, alice: AccountID, bob: AccountID) {
        let test = try TestVault()
        let vault = try test.create()
        let policy = SessionPolicy(idleTimeout: .seconds(600))
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: policy).account.id
        let bob = try vault.accounts.signIn(Samples.account("bob"), tokens: Samples.tokens("bob"), policy: policy).account.id
        return (test, vault, alice, bob)
    }

    /// Copies `tables` of the vault into `old.db` next to it, as someone keeping a copy would.
    func saveAside(_ test: TestVault, _ tables: [String], as name: String = "old.db") throws -> URL {
        let old = test.directory.file(name)
        try? FileManager.default.removeItem(at: old)
        var sql = "ATTACH DATABASE ? AS old;"
        for table in tables { sql += "CREATE TABLE old.\(table) AS SELECT * FROM main.\(table);" }
        sql += "DETACH DATABASE old;"
        try RawDatabase.execute(test.url, sql, [old.path])
        return old
    }

    /// Puts `table`'s rows of `account` back from the copy.
    func putBack(_ test: TestVault, _ old: URL, _ table: String, account: AccountID) throws {
        try RawDatabase.execute(
            test.url,
            """
            ATTACH DATABASE ? AS old;
            DELETE FROM main.\(table) WHERE account_id = ?;
            INSERT INTO main.\(table) SELECT * FROM old.\(table) WHERE account_id = ?;
            DETACH DATABASE old;
            """, [old.path, account.rawValue, account.rawValue])
    }

    @Test("each write transaction raises the state's counter once; the state's MAC covers it")
    func counterRises() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        #expect(try counter(test.url) == 1, "a new vault's header and state are write 1")
        let account = try vault.accounts.insert(Samples.account()).id
        let afterInsert = try #require(try counter(test.url))
        let generation = try vault.tokens.store(Samples.tokens("one"), for: account, replacing: nil)
        #expect(try counter(test.url) == afterInsert + 1)
        let mac = try #require(try RawDatabase.blob(test.url, "SELECT row_mac FROM tokens"))
        #expect(mac[0] == 2 && mac.count == 45 + 4 * 9, "format 2: version, key id, counter, tag, one short tag per column")
        let written = mac[5..<13].reduce(0) { $0 << 8 | Int($1) }
        #expect(written == afterInsert + 1, "the row carries the counter of the write that stored it")
        _ = try vault.tokens.store(Samples.tokens("two"), for: account, replacing: generation)
        #expect(try counter(test.url) == afterInsert + 2)

        // The counter edited without the key: the state no longer matches its MAC.
        try RawDatabase.execute(test.url, "UPDATE vault_state SET write_counter = write_counter + 100")
        let message = refusal { _ = try vault.tokens.accessSnapshot(for: account) }
        #expect(message.contains("vault_state.write_counter"), "\(message)")
    }

    @Test("a state row with a column this build does not know (a newer build's): writes are refused, nothing is written")
    func stateColumnsUnknown() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account()).id
        let generation = try vault.tokens.store(Samples.fixedTokens("one"), for: account, replacing: nil)
        let before = try #require(try counter(test.url))
        try RawDatabase.execute(test.url, "ALTER TABLE vault_state ADD COLUMN newer_build TEXT")
        let message = refusal { _ = try vault.tokens.store(Samples.fixedTokens("two"), for: account, replacing: generation) }
        #expect(message.contains("columns this build does not know"), "\(message)")
        #expect(try counter(test.url) == before)
        #expect(try vault.tokens.current(for: account)?.tokens == Samples.fixedTokens("one"), "the write rolled back")
    }

    @Test("tokens are written with their MAC in one statement; a tokens table with another column takes the general path")
    func tokensWrittenWhole() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account()).id
        var generation = try vault.tokens.store(Samples.fixedTokens("one"), for: account, replacing: nil)
        generation = try vault.tokens.store(Samples.fixedTokens("two"), for: account, replacing: generation)
        // The MAC stored with the row carries the write's counter (the state's), and checks.
        let mac = try #require(try RawDatabase.blob(test.url, "SELECT row_mac FROM tokens"))
        let written = try counter(test.url)
        #expect(mac.count > 13 && Int(mac[5..<13].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) == written)
        #expect(try vault.maintenance.verify().passed)

        // A column this build does not write (NULL in the row, so its MAC still holds), seen by
        // a vault opened after it was added.
        vault.close()
        try RawDatabase.execute(test.url, "ALTER TABLE tokens ADD COLUMN added_later TEXT")
        let reopened = try test.open()
        defer { reopened.close() }
        generation = try reopened.tokens.store(Samples.fixedTokens("three"), for: account, replacing: generation)
        #expect(try reopened.tokens.current(for: account)?.tokens == Samples.fixedTokens("three"))
        #expect(try reopened.maintenance.verify().passed)
        let widened = try #require(try RawDatabase.blob(test.url, "SELECT row_mac FROM tokens"))
        #expect(widened.count == mac.count + RowAuthenticator.columnTagLength, "a column tag for the added column too")
    }

    @Test("a per-column tag edited alone: verify no longer calls the row authentic")
    func columnTagsAreCovered() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account()).id
        _ = try vault.tokens.store(Samples.tokens("tag"), for: account, replacing: nil)
        var mac = try #require(try RawDatabase.blob(test.url, "SELECT row_mac FROM tokens"))
        mac[mac.count - 1] ^= 0x01  // the last column tag
        try RawDatabase.execute(test.url, "UPDATE tokens SET row_mac = ?", [Data(mac)])
        // (Which column it names cannot be told from a changed value: its tag no longer matches.)
        let report = try vault.maintenance.verify()
        #expect(!report.passed && report.damaged.map(\.table) == ["tokens"], "\(report.damaged)")
        _ = refusal { _ = try vault.tokens.current(for: account) }
    }

    @Test("an account's policy row deleted: refused for that account (not loosened to the defaults); the other keeps working")
    func deletedPolicy() throws {
        let (test, vault, alice, bob) = try twoAccounts()
        defer { vault.close() }
        try RawDatabase.execute(test.url, "DELETE FROM session_policies WHERE account_id = ?", [alice.rawValue])
        let message = refusal { _ = try vault.tokens.accessSnapshot(for: alice) }
        #expect(message.contains("session_policies row \(alice.rawValue)") && message.contains("was deleted"), "\(message)")
        _ = refusal { _ = try vault.sessions.policy(for: alice) }
        let other = try #require(try vault.tokens.accessSnapshot(for: bob))
        #expect(other.policy.idleTimeout == .seconds(600) && other.token != nil, "bob's rows are untouched and served")
        let report = try vault.maintenance.verify()
        #expect(report.damaged.map { "\($0.table) \($0.row)" } == ["session_policies \(alice.rawValue)"], "\(report.damaged)")
    }

    @Test("after a sign-out, the tokens and session of before put back: refused, and verify names both")
    func signedOutSessionPutBack() throws {
        let (test, vault, alice, bob) = try twoAccounts()
        defer { vault.close() }
        let old = try saveAside(test, ["tokens", "sessions"])
        _ = try vault.sessions.transition(for: alice) { session, _ in
            session.state = .signedOut
            session.endReason = "signed_out"
            session.endedAt = Date()
        }
        try vault.tokens.delete(for: alice)
        try putBack(test, old, "tokens", account: alice)
        try putBack(test, old, "sessions", account: alice)

        let message = refusal { _ = try vault.tokens.accessSnapshot(for: alice) }
        #expect(message.contains("older than the vault's record") || message.contains("was not"), "\(message)")
        _ = refusal { _ = try vault.tokens.current(for: alice) }
        _ = refusal { _ = try vault.sessions.current(for: alice) }
        #expect(try vault.tokens.accessSnapshot(for: bob)?.token != nil)
        let named = Set(try vault.maintenance.verify().damaged.map(\.table))
        #expect(named == ["tokens", "sessions"], "\(named)")
    }

    @Test("the newest session deleted: the older one is not taken for it")
    func newestSessionDeleted() throws {
        let (test, vault, alice, _) = try twoAccounts()
        defer { vault.close() }
        // Signing in again ends the first session: deleting the second would leave the first newest.
        _ = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice-2"), policy: SessionPolicy())
        try RawDatabase.execute(
            test.url, "DELETE FROM sessions WHERE session_id = (SELECT max(session_id) FROM sessions WHERE account_id = ?)",
            [alice.rawValue])
        let message = refusal { _ = try vault.sessions.current(for: alice) }
        #expect(message.contains("not the newest session"), "\(message)")
    }

    @Test("the header put back from before a switch: refused; the state put back: refused by this process and at open")
    func headerAndStatePutBack() throws {
        let (test, vault, alice, _) = try twoAccounts()  // bob is active
        defer { vault.close() }
        let old = try saveAside(test, ["vault_meta", "vault_state"])
        try vault.accounts.setActive(alice)
        _ = try vault.tokens.store(Samples.tokens("alice-2"), for: alice, replacing: 1)
        let current = try saveAside(test, ["vault_meta"], as: "current.db")
        func putBack(_ table: String, from copy: URL) throws {
            try RawDatabase.execute(
                test.url,
                "ATTACH DATABASE ? AS old; DELETE FROM main.\(table); INSERT INTO main.\(table) SELECT * FROM old.\(table); DETACH DATABASE old;",
                [copy.path])
        }
        // The header of before the switch (bob active): not served as bob's token.
        try putBack("vault_meta", from: old)
        let header = refusal { _ = try vault.tokens.accessSnapshot(for: nil) }
        #expect(header.contains("vault header") && header.contains("older than the vault's record"), "\(header)")
        #expect(throws: VaultError.self, "opening checks it too") { try test.open() }
        #expect(try vault.maintenance.verify().damaged.map(\.table) == ["vault_meta"])
        try putBack("vault_meta", from: current)
        #expect(try vault.tokens.accessSnapshot(for: nil)?.account == alice, "the current header is served again")

        // The state of before: this process saw a later write; a new one refuses to open.
        try putBack("vault_state", from: old)
        let seen = refusal { _ = try vault.tokens.accessSnapshot(for: alice) }
        #expect(seen.contains("went back from write"), "\(seen)")
        #expect(throws: VaultError.self, "the header is newer than the state") { try test.open() }
    }

    @Test("a removed account's rows put back: verify names them; the vault does not record the account")
    func removedAccountPutBack() throws {
        let (test, vault, alice, _) = try twoAccounts()
        defer { vault.close() }
        let old = try saveAside(test, ["accounts", "tokens"])
        _ = try vault.accounts.remove(alice)
        #expect(try vault.maintenance.verify().passed, "a removal leaves a vault that verifies")
        try RawDatabase.execute(
            test.url,
            "ATTACH DATABASE ? AS old; INSERT INTO main.accounts SELECT * FROM old.accounts WHERE account_id = ?; INSERT INTO main.tokens SELECT * FROM old.tokens WHERE account_id = ?; DETACH DATABASE old;",
            [old.path, alice.rawValue, alice.rawValue])
        _ = refusal { _ = try vault.accounts.find(alice) }
        _ = refusal { _ = try vault.tokens.current(for: alice) }
        let damaged = try vault.maintenance.verify().damaged
        #expect(Set(damaged.map(\.table)) == ["accounts", "tokens"], "\(damaged)")
        #expect(damaged.allSatisfy { $0.reason.contains("does not record") }, "\(damaged)")
    }

    @Test("two accounts' notifications stored in turn: verify passes; one of bob's deleted, verify names bob's and only his")
    func interleavedCollections() throws {
        let (test, vault, alice, bob) = try twoAccounts()
        defer { vault.close() }
        for index in 0..<4 {
            for account in [alice, bob, alice] {
                try vault.notifications.upsert(
                    NotificationRecord(
                        uuid: "\(account.rawValue)-\(index)-\(UUID().uuidString)", account: account, subject: "s\(index)", message: "m",
                        actions: [], createdAt: Times.at(index)))
            }
        }
        #expect(try vault.maintenance.verify().passed)
        try RawDatabase.execute(test.url, "DELETE FROM notifications WHERE seq = (SELECT max(seq) FROM notifications WHERE account_id = ?)", [bob.rawValue])
        let damaged = try vault.maintenance.verify().damaged
        #expect(damaged.map(\.table) == ["notifications"], "\(damaged)")
        #expect(damaged.first?.row == bob.rawValue, "\(damaged)")
        #expect(damaged.first?.reason.contains("holds 3 rows where the vault recorded 4") == true, "\(damaged)")
    }

    @Test("a write transaction that authenticates rows and never records its counter is refused at commit")
    func unfinishedWriteRefused() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account()).id
        let before = try counter(test.url)
        let integrity = vault.core.integrity
        #expect(throws: (any Error).self) {
            try vault.core.withOpenPool { pool in
                try pool.write { db in
                    try db.execute(sql: "UPDATE accounts SET scopes = 'edited' WHERE account_id = ?", arguments: [account.rawValue])
                    try integrity.authenticate(.accounts, where: "account_id = ?", [account.rawValue], db)
                }
            }
        }
        #expect(try counter(test.url) == before)
        #expect(try vault.accounts.find(account)?.client.scopes == ["openid", "profile"], "rolled back")
    }
}
