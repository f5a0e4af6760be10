import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// A sealed value that was altered, moved or replayed is reported as damage, never returned.
@Suite struct TamperingTests {
    @Test("a flipped byte anywhere in a sealed token is reported as damage naming table and column")
    func flippedByteIsRejected() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("flip"), for: account.id, replacing: nil)
        let original = try #require(try RawDatabase.blob(test.url, "SELECT refresh_token FROM tokens"))
        // Header (version, key id), nonce, ciphertext and tag: every position.
        #expect(original.count == SealedBlob.minimumLength + Samples.fixedTokens("flip").refreshToken!.utf8.count)

        for position in original.indices {
            var altered = original
            altered[position] ^= 0x01
            try RawDatabase.execute(test.url, "UPDATE tokens SET refresh_token = ?", [Data(altered)])
            let error = expectVaultError(.damaged) { try vault.tokens.current(for: account.id) }
            #expect(error?.message.contains("tokens.refresh_token") == true, "byte \(position): \(error.map(String.init(describing:)) ?? "")")
        }
        try RawDatabase.execute(test.url, "UPDATE tokens SET refresh_token = ?", [Data(original)])
        #expect(try vault.tokens.current(for: account.id)?.tokens == Samples.fixedTokens("flip"), "the restored value opens again")
    }

    /// Points the primary-key index of `table` (keyed by `account_id`) at a decoy index where
    /// `first`'s key leads to `second`'s row and `second`'s to `first`'s: what someone who can
    /// write the file can do to its pages, done here through SQLite's writable schema.
    static func crossIndex(_ url: URL, table: String, _ first: String, _ second: String) throws {
        let queue = try RawDatabase.queue(url)
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { db in
            let rows = try Row.fetchAll(db, sql: "SELECT rowid, account_id FROM \(table)")
            let rowid = { (account: String) -> Int64? in rows.first { $0["account_id"] == account }?["rowid"] }
            try db.execute(sql: "CREATE TABLE decoy (account_id TEXT PRIMARY KEY)")
            for row in rows {
                let account: String = row["account_id"]
                let target = account == first ? rowid(second) : account == second ? rowid(first) : row["rowid"]
                try db.execute(sql: "INSERT INTO decoy (rowid, account_id) VALUES (?, ?)", arguments: [target, account])
            }
            let root = try Int.fetchOne(db, sql: "SELECT rootpage FROM sqlite_schema WHERE name = 'sqlite_autoindex_decoy_1'")
            try db.execute(sql: "PRAGMA writable_schema = ON")
            try db.execute(
                sql: "UPDATE sqlite_schema SET rootpage = ? WHERE name = ?", arguments: [root, "sqlite_autoindex_\(table)_1"])
            try db.execute(sql: "PRAGMA writable_schema = OFF")
        }
    }

    @Test("an index altered so one account's lookup finds another's row (same write counter): refused, not served as the first's")
    func indexLeadsToAnotherAccountsRow() throws {
        let directory = try TemporaryDirectory()
        let url = try FixtureTests.copy(FixtureV11.fileName, into: directory)
        // Opened once by this build: migrated, and every row authenticated again in one
        // transaction, so the two accounts' policies carry the same write counter.
        let strict = AccountID(rawValue: "bceda982-225c-4f80-9722-6a75d0a28ae9")
        let loose = AccountID(rawValue: "d529a4c3-9e99-4633-b7c4-fa162d281f52")
        do {
            let vault = try Vault.open(at: url, credential: .passphrase(FixtureV11.passphrase))
            defer { vault.close() }
            #expect(try vault.sessions.policy(for: strict).idleTimeout == .seconds(600))
            #expect(try vault.sessions.policy(for: loose).idleTimeout == nil)
        }
        try Self.crossIndex(url, table: "session_policies", strict.rawValue, loose.rawValue)

        let vault = try Vault.open(at: url, credential: .passphrase(FixtureV11.passphrase))
        defer { vault.close() }
        // The strict account would have no idle timeout at all: refused instead, naming the table.
        // (SQLite reads the key column from the index, so this row fails its MAC; a plan that read
        // it from the row would meet the account check of `problem`, tested next.)
        let error = expectVaultError(.damaged) { try vault.sessions.policy(for: strict) }
        #expect(error?.message.contains("session_policies") == true, "\(error.map(String.init(describing:)) ?? "no error")")
        _ = expectVaultError(.damaged) { try vault.sessions.policy(for: loose) }
        #expect(!(try vault.maintenance.verify().passed))
    }

    @Test("a row found for one account that is another's authentic row, at the counter the first's entry records: refused")
    func anotherAccountsRowIsRefused() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let policy = SessionPolicy(idleTimeout: .seconds(600))
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: policy).account.id
        let bob = try vault.accounts.signIn(Samples.account("bob"), tokens: Samples.tokens("bob"), policy: SessionPolicy(idleTimeout: nil)).account.id
        // Bob's refresh state: a lease taken.
        _ = try vault.leases.begin(
            for: bob, holder: "bob's refresh", seenGeneration: try #require(try vault.tokens.current(for: bob)?.generation), leaseDuration: .seconds(60))
        let integrity = vault.maintenance.integrity
        let queue = try DatabaseQueue(path: test.url.path)
        defer { try? queue.close() }
        try queue.read { db in
            for slot in [VaultManifest.Slot.account, .tokens, .policy, .refresh, .session] {
                let sql = "SELECT * FROM \(slot.table.name) WHERE account_id = ?"
                let bobs = try #require(try StoredRecord.fetchOne(db, sql, [bob.rawValue], table: slot.table, path: nil), "\(slot)")
                var commitment = try #require(try integrity.commitment(db))
                // Alice's entry made to name the counter bob's row carries (as when one
                // transaction authenticated both), and her session the same id.
                let counter = try #require(RowIntegrity.counter(of: bobs.values, layout: bobs.layout))
                var entry = try #require(commitment.manifest.accounts[alice.rawValue])
                switch slot {
                case .account: entry.account = counter
                case .tokens: entry.tokens = counter
                case .policy: entry.policy = counter
                case .refresh: entry.refresh = counter
                case .session:
                    entry.session = counter
                    entry.sessionID = try bobs.value("session_id", as: Int64.self)
                }
                commitment.manifest.accounts[alice.rawValue] = entry
                #expect(try RowIntegrity.problem(bobs, slot, account: bob.rawValue, commitment) == nil, "\(slot): bob's own row is his")
                let reason = try RowIntegrity.problem(bobs, slot, account: alice.rawValue, commitment)
                #expect(reason?.contains("another account") == true, "\(slot): \(reason ?? "accepted")")
                // The check every read of the session layer makes, with the same manifest.
                let error = expectVaultError(.damaged) {
                    try integrity.checkCurrent(bobs, slot, account: alice.rawValue, db, commitment: commitment)
                }
                #expect(error?.message.contains("another account") == true, "\(slot)")
            }
        }
    }

    @Test("a lookup by key (device, notification, account by issuer and subject) that finds another authentic row: refused")
    func lookupLandingOnAnotherRowIsRefused() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: SessionPolicy()).account.id
        let bob = try vault.accounts.signIn(Samples.account("bob"), tokens: Samples.tokens("bob"), policy: SessionPolicy()).account.id
        for (name, account) in [("laptop", alice), ("desktop", bob)] {
            try vault.devices.save(
                DeviceRegistration(
                    id: name, account: account, deviceID: vault.deviceID, name: name, platform: "linux", status: .active, createdAt: Times.at(0),
                    updatedAt: Times.at(0)))
            #expect(
                try vault.notifications.upsert(
                    NotificationRecord(
                        uuid: name, account: alice, subject: "Sign-in request", message: "Approve?", actions: [], createdAt: Times.at(1),
                        expiresAt: Times.at(400))))
        }
        let aliceAccount = try #require(try vault.accounts.find(alice))
        let bobAccount = try #require(try vault.accounts.find(bob))
        let integrity = vault.maintenance.integrity
        let queue = try DatabaseQueue(path: test.url.path)
        defer { try? queue.close() }
        try queue.read { db in
            // Each row the lookup for "laptop" (alice) would find if an index led it to the other.
            let desktop = try #require(try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE registration_id = 'desktop'"))
            let notice = try #require(try Row.fetchOne(db, sql: "SELECT * FROM notifications WHERE uuid = 'desktop'"))
            let bobs = try #require(try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [bob.rawValue]))
            // Authentic rows: their MACs alone would accept them.
            try integrity.check(desktop, in: .devices, db)
            try integrity.check(notice, in: .notifications, db)
            try integrity.check(bobs, in: .accounts, db)
            try integrity.lookedUp(desktop, in: .devices, by: ["registration_id": "desktop"])
            try integrity.lookedUp(bobs, in: .accounts, by: ["issuer": bobAccount.issuer, "subject": bobAccount.subject])
            let refusals = [
                expectVaultError(.damaged) { try integrity.lookedUp(desktop, in: .devices, by: ["registration_id": "laptop"]) },
                expectVaultError(.damaged) { try integrity.lookedUp(notice, in: .notifications, by: ["account_id": alice.rawValue, "uuid": "laptop"]) },
                expectVaultError(.damaged) {
                    try integrity.lookedUp(bobs, in: .accounts, by: ["issuer": aliceAccount.issuer, "subject": aliceAccount.subject])
                },
            ]
            for error in refusals {
                #expect(error?.message.contains("the file's index leads to another row") == true, "\(String(describing: error))")
                #expect(error?.message.contains("laptop") == false && error?.message.contains(aliceAccount.subject) == false, "no key value")
            }
        }
        // A write through such a lookup changes nothing.
        let write = expectVaultError(.damaged) {
            try queue.write { db in
                try integrity.rewrite(.devices, where: "registration_id = 'desktop'", [], db, lookedUpBy: ["registration_id": "laptop"]) {
                    try db.execute(sql: "UPDATE devices SET status = 'revoked' WHERE registration_id = 'desktop'")
                }
            }
        }
        #expect(write?.message.contains("devices.registration_id") == true, "\(String(describing: write))")
        #expect(try vault.devices.find("desktop")?.status == .active)
    }

    @Test("a truncated or extended sealed value is reported as damage")
    func resizedBlobIsRejected() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("size"), for: account.id, replacing: nil)
        let original = try #require(try RawDatabase.blob(test.url, "SELECT access_token FROM tokens"))
        for altered in [Array(original.dropLast()), original + [0], Array(original.prefix(10)), []] {
            try RawDatabase.execute(test.url, "UPDATE tokens SET access_token = ?", [Data(altered)])
            expectVaultError(.damaged) { try vault.tokens.current(for: account.id) }
        }
    }

    /// Where a sealed value is copied from and to.
    enum Move: String, CaseIterable, CustomStringConvertible {
        case accessTokenToOtherAccount
        case accessTokenIntoRefreshToken
        case refreshTokenIntoIDToken
        case labelIntoEmail
        case labelToOtherAccount
        case notificationSubjectToOtherNotification
        case notificationSubjectIntoMessage
        case deviceNameToOtherDevice
        var description: String { rawValue }
    }

    @Test("a sealed value moved to another row, column or account is reported as damage", arguments: Move.allCases)
    func movedBlobIsRejected(move: Move) throws {
        let test = try TestVault()
        let vault = try test.create(clock: Times.fixedClock)
        defer { vault.close() }
        let alice = try vault.accounts.insert(Samples.account("alice"))
        let bob = try vault.accounts.insert(Samples.account("bob"))
        try vault.tokens.store(Samples.fixedTokens("alice"), for: alice.id, replacing: nil)
        try vault.tokens.store(Samples.fixedTokens("bob"), for: bob.id, replacing: nil)
        let first = NotificationRecord(
            uuid: "n-1", account: alice.id, subject: "first subject", message: "first message",
            actions: [], createdAt: Times.at(1))
        let second = NotificationRecord(
            uuid: "n-2", account: alice.id, subject: "second subject", message: "second message",
            actions: [], createdAt: Times.at(2))
        try vault.notifications.upsert([first, second])
        let laptop = DeviceRegistration(
            id: "reg-1", account: alice.id, deviceID: "d-1", name: "laptop", platform: "linux",
            status: .active, createdAt: Times.at(0), updatedAt: Times.at(0))
        let phone = DeviceRegistration(
            id: "reg-2", account: alice.id, deviceID: "d-2", name: "phone", platform: "linux",
            status: .active, createdAt: Times.at(0), updatedAt: Times.at(0))
        try vault.devices.save(laptop)
        try vault.devices.save(phone)

        let url = test.url
        func copy(_ select: String, _ selectArgs: StatementArguments, into update: String, _ updateArgs: StatementArguments) throws {
            let blob = try #require(try RawDatabase.blob(url, select, selectArgs))
            try RawDatabase.execute(url, update, [Data(blob)] + updateArgs)
        }

        let read: () throws -> Any
        let expectedPlace: String
        switch move {
        case .accessTokenToOtherAccount:
            try copy(
                "SELECT access_token FROM tokens WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE tokens SET access_token = ? WHERE account_id = ?", [bob.id.rawValue])
            read = { try vault.tokens.current(for: bob.id) as Any }
            expectedPlace = "tokens.access_token"
        case .accessTokenIntoRefreshToken:
            try copy(
                "SELECT access_token FROM tokens WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE tokens SET refresh_token = ? WHERE account_id = ?", [alice.id.rawValue])
            read = { try vault.tokens.current(for: alice.id) as Any }
            expectedPlace = "tokens.refresh_token"
        case .refreshTokenIntoIDToken:
            try copy(
                "SELECT refresh_token FROM tokens WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE tokens SET id_token = ? WHERE account_id = ?", [alice.id.rawValue])
            read = { try vault.tokens.current(for: alice.id) as Any }
            expectedPlace = "tokens.id_token"
        case .labelIntoEmail:
            try copy(
                "SELECT label FROM accounts WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE accounts SET email = ? WHERE account_id = ?", [alice.id.rawValue])
            read = { try vault.accounts.find(alice.id) as Any }
            expectedPlace = "accounts.email"
        case .labelToOtherAccount:
            try copy(
                "SELECT label FROM accounts WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE accounts SET label = ? WHERE account_id = ?", [bob.id.rawValue])
            read = { try vault.accounts.all() as Any }
            expectedPlace = "accounts.label"
        case .notificationSubjectToOtherNotification:
            try copy(
                "SELECT subject FROM notifications WHERE uuid = 'n-1'", [],
                into: "UPDATE notifications SET subject = ? WHERE uuid = 'n-2'", [])
            read = { try vault.notifications.find("n-2", account: alice.id) as Any }
            expectedPlace = "notifications.subject"
        case .notificationSubjectIntoMessage:
            try copy(
                "SELECT subject FROM notifications WHERE uuid = 'n-1'", [],
                into: "UPDATE notifications SET message = ? WHERE uuid = 'n-1'", [])
            read = { try vault.notifications.page() as Any }
            expectedPlace = "notifications.message"
        case .deviceNameToOtherDevice:
            try copy(
                "SELECT name FROM devices WHERE registration_id = 'reg-1'", [],
                into: "UPDATE devices SET name = ? WHERE registration_id = 'reg-2'", [])
            read = { try vault.devices.find("reg-2") as Any }
            expectedPlace = "devices.name"
        }
        let error = expectVaultError(.damaged) { try read() }
        #expect(error?.message.contains(expectedPlace) == true, "\(error.map(String.init(describing:)) ?? "no error")")
    }

    @Test("an older token blob replayed into its own row after a newer store is reported as damage")
    func replayedOlderGenerationIsRejected() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        let first = try vault.tokens.store(Samples.fixedTokens("old"), for: account.id, replacing: nil)
        let oldRefresh = try #require(try RawDatabase.blob(test.url, "SELECT refresh_token FROM tokens"))
        try vault.tokens.store(Samples.fixedTokens("new"), for: account.id, replacing: first)

        try RawDatabase.execute(test.url, "UPDATE tokens SET refresh_token = ?", [Data(oldRefresh)])
        let error = expectVaultError(.damaged) { try vault.tokens.current(for: account.id) }
        #expect(error?.message.contains("tokens.refresh_token") == true)
    }

    @Test("an account's data key moved to another account does not open")
    func movedDataKeyIsRejected() throws {
        let test = try TestVault()
        var vault = try test.create()
        let alice = try vault.accounts.insert(Samples.account("alice"))
        let bob = try vault.accounts.insert(Samples.account("bob"))
        try vault.tokens.store(Samples.fixedTokens("bob"), for: bob.id, replacing: nil)
        vault.close()
        // Give bob alice's wrapped data key: it must not open as bob's key.
        try RawDatabase.execute(
            test.url,
            """
            UPDATE accounts SET wrapped_data_key = (SELECT wrapped_data_key FROM accounts WHERE account_id = ?)
            WHERE account_id = ?
            """, [alice.id.rawValue, bob.id.rawValue])
        vault = try test.open()
        defer { vault.close() }
        let error = expectVaultError(.damaged) { try vault.tokens.current(for: bob.id) }
        #expect(error?.message.contains("accounts.wrapped_data_key") == true)
    }
}
