import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// Issue 31: someone who can write the vault file but lacks the key deletes rows, or puts
/// back rows from an older copy of the same vault. For every authenticated table: each row
/// deleted, and, after each kind of write the vault does, each row that write changed, added or
/// removed put back as the older copy had it, alone and together with the other rows of the same
/// account the write changed. Each must be refused where it is used or named by `vault verify`.
///
/// What stays out, and why: putting back every row a write changed (the state row included)
/// is that write undone in full, which is the whole file rolled back (documented limit).
@Suite("Rollback sweep: a row deleted, or put back from an older copy, is found")
struct RollbackSweepTests {
    /// A write the vault does, after the older copy was taken.
    struct Write: CustomStringConvertible {
        var description: String
        var apply: @Sendable (Vault, [AccountID]) throws -> Void
    }

    static let writes: [Write] = [
        Write(description: "a token stored (refresh)") { vault, ids in
            let generation = try #require(try vault.tokens.current(for: ids[0])).generation
            _ = try vault.tokens.store(Samples.tokens("rolled-forward"), for: ids[0], replacing: generation)
        },
        Write(description: "a session's activity recorded") { vault, ids in
            var session = try #require(try vault.sessions.current(for: ids[1]))
            session.lastActivityAt = session.lastActivityAt.addingTimeInterval(30)
            try vault.sessions.update(session)
        },
        Write(description: "a stricter policy") { vault, ids in
            try vault.sessions.setPolicy(SessionPolicy(idleTimeout: .seconds(120)), for: ids[0])
        },
        Write(description: "a lease ended with a failure") { vault, ids in
            // The sweep's vault left bob's lease with holder h-1.
            try vault.leases.fail(
                for: ids[1], holder: "h-1", failure: "server error (HTTP 503)", detail: nil, nextAttemptAt: Date(timeIntervalSinceNow: 600))
        },
        Write(description: "a device revoked") { vault, ids in
            var device = try #require(try vault.devices.all(for: ids[0]).first)
            device.status = .revoked
            device.updatedAt = device.updatedAt.addingTimeInterval(60)
            try vault.devices.save(device)
        },
        Write(description: "a notification answered") { vault, ids in
            _ = try vault.notifications.recordAnswer(
                to: "n-bob", account: ids[1], action: "allow", byDevice: "device-bob", at: Date(timeIntervalSince1970: 1_700_000_900))
        },
        Write(description: "notifications pruned") { vault, ids in
            _ = try vault.notifications.prune(keepNewest: 0, account: ids[0])
        },
        Write(description: "an event recorded") { vault, ids in
            try vault.events.append(
                kind: "refresh_failed", account: ids[0], data: ["status": "503"], detail: nil, origin: "sweep",
                retention: EventRetention())
        },
        Write(description: "the active account switched (with its event, as the session layer does)") { vault, ids in
            let journal = EventJournal(origin: "sweep", retention: EventRetention())
            _ = try vault.accounts.setActive(
                ids[0], recording: EventRecording(journal) { _ in [EventRecord(kind: "account_switched", account: ids[0])] })
        },
    ]

    /// A key-file vault populated like the mutation sweep's, closed (its WAL checkpointed).
    static func pristine() throws -> (TestVault, Data) {
        let test = try TestVault()
        let vault = try test.create()
        try MutationSweepTests.populate(vault)
        vault.close()
        return (test, try Data(contentsOf: test.url))
    }

    /// Every authenticated row by table and key, as stored.
    static func rows(_ url: URL) throws -> [String: [String: [DatabaseValue]]] {
        let queue = try RawDatabase.queue(url)
        defer { try? queue.close() }
        return try queue.read { db in
            var tables: [String: [String: [DatabaseValue]]] = [:]
            for table in AuthenticatedTable.all {
                for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table.name)") {
                    tables[table.name, default: [:]][row.storedKey(table.keyColumn)] = Array(row.databaseValues)
                }
            }
            return tables
        }
    }

    static func accountOf(_ table: String, key: String, in url: URL) throws -> String? {
        guard let spec = AuthenticatedTable.all.first(where: { $0.name == table }), spec != .vaultMeta, spec != .vaultState else { return nil }
        let queue = try RawDatabase.queue(url)
        defer { try? queue.close() }
        return try queue.read { db in
            try String.fetchOne(db, sql: "SELECT account_id FROM \(table) WHERE CAST(\(spec.keyColumn) AS TEXT) = ?", arguments: [key])
        }
    }

    /// Puts back each (table, key) as `old` holds it (deleting it when `old` has none).
    static func putBack(_ places: [(table: String, key: String)], from old: URL, into url: URL) throws {
        var sql = "PRAGMA foreign_keys = OFF; ATTACH DATABASE ? AS old;"
        var arguments: [(any DatabaseValueConvertible)?] = [old.path]
        for (table, key) in places {
            guard let spec = AuthenticatedTable.all.first(where: { $0.name == table }) else { continue }
            sql += "DELETE FROM main.\(table) WHERE CAST(\(spec.keyColumn) AS TEXT) = ?;"
            sql += "INSERT INTO main.\(table) SELECT * FROM old.\(table) WHERE CAST(\(spec.keyColumn) AS TEXT) = ?;"
            arguments += [key, key]
        }
        try RawDatabase.execute(url, sql + "DETACH DATABASE old;", StatementArguments(arguments))
    }

    /// Nil when the vault noticed (opening refused it, or verify names something); what happened otherwise.
    static func found(_ test: TestVault) -> String? {
        let opened: Vault
        do {
            opened = try test.open()
        } catch let error as VaultError where [.damaged, .keyChanged].contains(error.code) {
            return nil
        } catch {
            return "opening failed: \(error)"
        }
        defer { opened.close() }
        do {
            let report = try opened.maintenance.verify()
            return report.passed ? "verify passed" : nil
        } catch let error as VaultError where error.code == .damaged {
            return nil
        } catch {
            return "verify failed: \(error)"
        }
    }

    @Test("key rotation, event retention and account removal keep every commitment: verify passes after each")
    func maintenanceKeepsCommitments() throws {
        let (test, _) = try Self.pristine()
        let vault = try test.open()
        defer { vault.close() }
        let ids = try vault.accounts.all().sorted { $0.subject < $1.subject }.map(\.id)
        _ = try vault.maintenance.rotateKeys(credential: test.credential, batchSize: 2)
        #expect(try vault.maintenance.verify().passed, "after a key rotation (every row authenticated again)")
        for index in 0..<5 {
            try vault.events.append(
                kind: "refresh_failed", account: ids[index % 2], data: ["n": "\(index)"], detail: nil, origin: "sweep",
                retention: EventRetention(count: 2))
        }
        #expect(try vault.events.list(after: 0).count == 2, "retention pruned the journal")
        #expect(try vault.maintenance.verify().passed, "after retention pruned events")
        _ = try vault.accounts.remove(ids[0])
        #expect(try vault.maintenance.verify().passed, "after an account and its collections were removed")
    }

    @Test("every row of every authenticated table deleted: the vault notices")
    func deletions() throws {
        let (test, pristine) = try Self.pristine()
        var tried = 0
        var missed: [String] = []
        for (table, rows) in try Self.rows(test.url).sorted(by: { $0.key < $1.key }) where table != AuthenticatedTable.vaultMeta.name {
            for key in rows.keys.sorted() {
                try pristine.write(to: test.url)
                let spec = try #require(AuthenticatedTable.all.first { $0.name == table })
                try RawDatabase.execute(
                    test.url, "PRAGMA foreign_keys = OFF; DELETE FROM \(table) WHERE CAST(\(spec.keyColumn) AS TEXT) = ?", [key])
                tried += 1
                if let escaped = Self.found(test) { missed.append("\(table) row \(key) deleted: \(escaped)") }
            }
        }
        #expect(missed.isEmpty, "\(missed.count) of \(tried) deletions went unnoticed: \(missed)")
        #expect(tried >= 12, "the sweep deleted \(tried) rows")
        StressResults.record(
            StressCount(case: "issue 31: a row deleted without the key", tried: tried, passed: tried - missed.count, lost: 0, leaked: missed.count))
    }

    @Test("after each kind of write, each row it changed put back from before it, alone and with its account's others: the vault notices")
    func putBacks() throws {
        let (test, pristine) = try Self.pristine()
        let old = test.directory.file("older-copy.db")
        try pristine.write(to: old)
        let before = try Self.rows(old)
        var tried = 0
        var missed: [String] = []
        for write in Self.writes {
            try pristine.write(to: test.url)
            let vault = try test.open()
            try write.apply(vault, try vault.accounts.all().sorted { $0.subject < $1.subject }.map(\.id))
            vault.close()
            let written = try Data(contentsOf: test.url)
            let after = try Self.rows(test.url)
            var changed: [(table: String, key: String)] = []
            for table in Set(before.keys).union(after.keys).sorted() {
                let keys = Set(before[table, default: [:]].keys).union(after[table, default: [:]].keys)
                for key in keys.sorted() where before[table]?[key].map({ VerifiedRows.identical($0, after[table]?[key] ?? []) }) != true {
                    changed.append((table, key))
                }
            }
            #expect(!changed.isEmpty, "\(write) changed something")
            // Each row alone (never all of what the write changed at once: that undoes the whole
            // write, the whole-file limit).
            for place in changed where changed.count > 1 {
                try written.write(to: test.url)
                try Self.putBack([place], from: old, into: test.url)
                tried += 1
                if let escaped = Self.found(test) { missed.append("after \(write), \(place.table) row \(place.key) put back: \(escaped)") }
            }
            // The rows of each account the write changed, together (the header stays).
            var byAccount: [String: [(table: String, key: String)]] = [:]
            for place in changed where place.table != AuthenticatedTable.vaultMeta.name && place.table != AuthenticatedTable.vaultState.name {
                let account = try Self.accountOf(place.table, key: place.key, in: test.url) ?? Self.accountOf(place.table, key: place.key, in: old) ?? ""
                byAccount[account, default: []].append(place)
            }
            for (account, places) in byAccount.sorted(by: { $0.key < $1.key }) where places.count > 1 {
                try written.write(to: test.url)
                try Self.putBack(places, from: old, into: test.url)
                tried += 1
                if let escaped = Self.found(test) { missed.append("after \(write), account \(account)'s \(places.map(\.table)) put back: \(escaped)") }
            }
        }
        #expect(missed.isEmpty, "\(missed.count) of \(tried) put-backs went unnoticed: \(missed)")
        #expect(tried >= 14, "the sweep put back \(tried) rows or sets")
        StressResults.record(
            StressCount(
                case: "issue 31: rows put back from an older copy without the key", tried: tried, passed: tried - missed.count, lost: 0,
                leaked: missed.count))
    }
}
