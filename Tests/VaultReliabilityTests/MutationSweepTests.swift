import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultStore

/// Someone who can write the vault file but lacks the key edits one stored value: every column
/// of every table the vault acts on, set to NULL, to an extreme, and to another row's value.
/// The vault must notice every such edit: `verify` names the table and column (the header,
/// which opening reads, refuses to open). A column that escapes is either listed in the README
/// with the reason it cannot steer anything, or a failure here.
@Suite("Mutation sweep: an edit of any stored value without the key is found")
struct MutationSweepTests {
    /// Tables outside the sweep, each with why it cannot steer the vault (the README says the same).
    static let unauthenticatedTables = [
        // Which migrations ran: an edit makes the next open re-run one (and fail, rolled back)
        // or refuse the file; it changes no value the vault acts on.
        "vault_migrations"
    ]

    enum Mutation: String, CaseIterable, CustomStringConvertible {
        case null, extreme, otherRow
        var description: String { rawValue }
    }

    /// A vault holding a row in every table, two where a table can hold several (so a value can
    /// be copied from another row), every optional column set somewhere.
    static func populate(_ vault: Vault) throws {
        var ids: [AccountID] = []
        for (index, subject) in ["alice", "bob"].enumerated() {
            var new = Samples.account(subject)
            new.client.pins = ["sha256/\(String(repeating: index == 0 ? "A" : "B", count: 43))="]
            new.clientSecret = "secret-\(subject)-sweep"
            new.client.authentication = .clientSecretBasic
            let record = try vault.accounts.signIn(
                new, tokens: Samples.tokens("sweep-\(subject)"),
                policy: SessionPolicy(idleTimeout: .seconds(600 + index), backgroundTimeout: .seconds(60)))
            ids.append(record.account.id)
            guard
                case .acquired = try vault.leases.begin(
                    for: record.account.id, holder: "h-\(index)", seenGeneration: record.generation,
                    leaseDuration: .seconds(60))
            else {
                throw VaultError(.storage, "the sweep's refresh lease was not taken")
            }
            if index == 0 {
                try vault.leases.fail(
                    for: record.account.id, holder: "h-0", failure: "server error (HTTP 503)",
                    detail: "the server's own words", nextAttemptAt: Date(timeIntervalSinceNow: 60))
            }
            try vault.devices.save(
                DeviceRegistration(
                    id: "reg-\(subject)", account: record.account.id, deviceID: "device-\(subject)", name: "laptop of \(subject)",
                    platform: "linux", status: index == 0 ? .active : .pending, activationMethod: .primary, statusReason: "reason \(index)",
                    createdAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(index)), updatedAt: Date(timeIntervalSince1970: 1_700_000_100),
                    lastActivityAt: Date(timeIntervalSince1970: 1_700_000_200 + Double(index))))
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: "n-\(subject)", account: record.account.id, subject: "subject \(subject)", message: "message \(subject)",
                    actions: [NotificationAction(label: "Allow", action: "allow")],
                    createdAt: Date(timeIntervalSince1970: 1_700_000_300 + Double(index)), expiresAt: Date(timeIntervalSince1970: 1_800_000_000)))
        }
        _ = try vault.notifications.recordAnswer(
            to: "n-alice", account: ids[0], action: "allow", byDevice: "device-alice",
            at: Date(timeIntervalSince1970: 1_700_000_400))
        // An ended session next to the live one, and an integrity check on record.
        var session = try #require(try vault.sessions.current(for: ids[1]))
        session.extensionsUsed = 1
        session.backgroundEnteredAt = Date(timeIntervalSince1970: 1_700_000_500)
        try vault.sessions.update(session)
        try vault.maintenance.verify()
    }

    @Test("every column of every authenticated table, NULL, extreme or another row's value: verify names it")
    func sweep() throws {
        let test = try TestVault()
        let vault = try test.create()
        try Self.populate(vault)
        vault.close()
        let pristine = try Data(contentsOf: test.url)
        #expect(FileProbe.bytes(URL(fileURLWithPath: test.url.path + "-wal")).isEmpty, "the sweep edits the file alone")

        let queue = try RawDatabase.queue(test.url)
        let schema = try queue.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        }
        try queue.close()
        let authenticated = AuthenticatedTable.all.map(\.name)
        #expect(Set(schema) == Set(authenticated + Self.unauthenticatedTables), "a new table is either authenticated or listed here with its reason")

        var tried = 0
        var missed: [String] = []
        for table in authenticated {
            let columns = try Self.columns(of: table, in: test.url).filter { $0 != "row_mac" }
            for column in columns {
                for mutation in Mutation.allCases {
                    try pristine.write(to: test.url)
                    guard let sql = try Self.edit(table, column, mutation, in: test.url) else { continue }
                    do {
                        try RawDatabase.execute(
                            test.url, "PRAGMA ignore_check_constraints = ON; PRAGMA foreign_keys = OFF; " + sql.statement,
                            sql.arguments)
                    } catch let error as DatabaseError where [.SQLITE_CONSTRAINT, .SQLITE_MISMATCH].contains(error.resultCode) {
                        continue  // another row's key in a unique column, NULL in a rowid: no edit in place can do that
                    }
                    tried += 1
                    if let escaped = Self.found(table: table, column: column, test: test) {
                        missed.append("\(table).\(column) set to \(mutation): \(escaped)")
                    }
                }
            }
        }
        #expect(missed.isEmpty, "\(missed.count) of \(tried) edits went unnoticed: \(missed)")
        #expect(tried > 150, "the sweep tried \(tried) edits")
        StressResults.record(
            StressCount(
                case: "issue 12: a stored value edited without the key (every column, 3 ways)",
                tried: tried, passed: tried - missed.count, lost: 0, leaked: missed.count))
    }

    /// Nil when the vault noticed the edit of `table.column`; what happened otherwise.
    static func found(table: String, column: String, test: TestVault) -> String? {
        let place = "\(table).\(column)"
        let opened: Vault
        do {
            opened = try test.open()
        } catch let error as VaultError {
            // The header is checked as the vault opens; its unlock columns fail the unlock itself.
            guard table == "vault_meta" || table == "vault_state" else { return "opening failed: \(error.code)" }
            if error.message.contains(place) || [.wrongCredential, .damaged, .notAVault].contains(error.code) { return nil }
            return "opening failed without naming it: \(error.code)"
        } catch {
            return "opening failed: \(type(of: error))"
        }
        defer { opened.close() }
        if table == "vault_meta" { return "the vault opened" }  // (the state is also judged by verify)
        do {
            let report = try opened.verify()
            if report.damaged.contains(where: { "\($0.table).\($0.column)" == place }) { return nil }
            return "verify reported \(report.damaged.map(\.description)) \(report.databaseProblems)"
        } catch {
            return "verify failed: \(error)"
        }
    }

    static func columns(of table: String, in url: URL) throws -> [String] {
        let queue = try RawDatabase.queue(url)
        defer { try? queue.close() }
        return try queue.read { db in try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))").map { $0["name"] } }
    }

    /// The UPDATE that applies `mutation` to `column` of the table's first row; nil when the
    /// mutation would not change the value (NULL already, no other row holding another value).
    static func edit(_ table: String, _ column: String, _ mutation: Mutation, in url: URL) throws -> (statement: String, arguments: StatementArguments)? {
        let queue = try RawDatabase.queue(url)
        defer { try? queue.close() }
        let values = try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT rowid AS rid, \(column) AS value FROM \(table) ORDER BY rowid")
        }
        guard let first = values.first else { return nil }
        let rowid: Int64 = first["rid"]
        let current: DatabaseValue = first["value"]
        let replacement: DatabaseValue
        switch mutation {
        case .null:
            guard !current.isNull else { return nil }
            replacement = .null
        case .extreme:
            switch current.storage {
            case .null, .int64: replacement = Int64.max.databaseValue
            case .double: replacement = Double.greatestFiniteMagnitude.databaseValue
            // Another host on this machine: the edit that would send a token elsewhere.
            case .string(let text): replacement = (text.hasPrefix("http") ? "http://127.0.0.1:9/token" : String(repeating: "x", count: 4096)).databaseValue
            case .blob(let data): replacement = Data(data.dropLast() + [(data.last ?? 0) ^ 0x01]).databaseValue
            }
        case .otherRow:
            guard let other = values.dropFirst().map({ $0["value"] as DatabaseValue }).first(where: { $0 != current }) else { return nil }
            replacement = other
        }
        return ("UPDATE \(table) SET \(column) = ? WHERE rowid = ?", [replacement, rowid])
    }
}
