import Foundation
import GRDB
import Testing
import VaultTestSupport

@testable import VaultStore

/// Case 4 of issue 7: a process killed with SIGKILL inside each migration step leaves the
/// schema at the old or the new version of that step, never in between; migrating twice makes
/// the second run a no-op.
///
/// The child (SessionProbe `migrate`) opens a copy of the schema-1 fixture, so it applies every
/// shipped step, plus a slow test step after them (a big table and an index) so that kills land
/// inside a step, not only between steps.
@Suite("Crash: SIGKILL during migration", .timeLimit(.minutes(TestTimeScale.minutes(30))))
struct MigrationCrashTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appending(path: "Fixtures")

    /// What a killed migration left: user_version, the steps recorded, and what each step creates.
    struct SchemaState: CustomStringConvertible {
        var userVersion: Int
        var recorded: [Int]
        var hasStep2Tables: Bool
        var fillerRows: Int?
        var description: String {
            "user_version \(userVersion), recorded \(recorded), step-2 tables \(hasStep2Tables), filler \(fillerRows.map(String.init) ?? "none")"
        }
    }

    static func schemaState(_ url: URL) throws -> SchemaState {
        let queue = try DatabaseQueue(path: url.path)
        defer { try? queue.close() }
        return try queue.read { db in
            SchemaState(
                userVersion: try Int.fetchOne(db, sql: "PRAGMA user_version") ?? -1,
                recorded: try db.tableExists("vault_migrations")
                    ? try Int.fetchAll(db, sql: "SELECT version FROM vault_migrations ORDER BY version") : [],
                hasStep2Tables: try db.tableExists("refresh_state") && db.tableExists("session_policies"),
                fillerRows: try db.tableExists("stress_filler") ? try Int.fetchOne(db, sql: "SELECT count(*) FROM stress_filler") : nil)
        }
    }

    /// Whether the state is exactly one version, every step up to it whole, none after it.
    static func isConsistent(_ state: SchemaState, slowRows: Int) -> Bool {
        let version = state.userVersion
        let last = Migration.latestVersion + 1
        guard (1...last).contains(version), state.recorded == Array(1...version) else { return false }
        guard state.hasStep2Tables == (version >= 2) else { return false }
        return version == last ? state.fillerRows == slowRows : state.fillerRows == nil
    }

    @Test("killed at random moments inside the migration steps: old or new version, never between; a second run is a no-op")
    func killedDuringMigration() async throws {
        let scale = StressScale.current
        let slowRows = scale.count(test: 20_000, quick: 50_000, full: 100_000)
        let kills = scale.count(test: 8, quick: 30, full: 100)
        let directory = try TemporaryDirectory()
        let passphrase = directory.file("fixture.passphrase")
        try Data(FixtureV1.passphrase.utf8).write(to: passphrase)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passphrase.path)

        // One uninterrupted run first: how long a whole migration takes here bounds the kill times.
        let timing = try fresh(in: directory, name: "timing.db")
        let started = ContinuousClock.now
        let lines = try await stressChild(vault: timing, keyFile: passphrase, "migrate", "\(slowRows)").finish()
        let whole = ContinuousClock.now - started
        #expect(lines.contains("migrated \(Migration.latestVersion + 1)"), "\(lines)")

        var tried = 0
        var passed = 0
        var leaked = 0
        var seenVersions = Set<Int>()
        var problems: [String] = []
        for attempt in 0..<kills {
            let url = try fresh(in: directory, name: "kill-\(attempt).db")
            let child = try stressChild(vault: url, keyFile: passphrase, "migrate", "\(slowRows)")
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...max(1, Int(whole.timeInterval * 1000)))))
            await child.kill()
            tried += 1
            let state = try Self.schemaState(url)
            seenVersions.insert(state.userVersion)
            if Self.isConsistent(state, slowRows: slowRows) {
                passed += 1
            } else {
                leaked += 1
                problems.append("kill \(attempt): \(state)")
            }
            // Migrating again finishes the job from wherever the kill left it...
            let rerun = try await stressChild(vault: url, keyFile: passphrase, "migrate", "\(slowRows)").finish()
            #expect(rerun.contains("migrated \(Migration.latestVersion + 1)"), "\(rerun)")
            let finished = try Self.schemaState(url)
            #expect(Self.isConsistent(finished, slowRows: slowRows) && finished.userVersion == Migration.latestVersion + 1, "\(finished)")
            try? FileManager.default.removeItem(at: url)
        }

        // ...and a second run on a migrated vault changes nothing: no step, no backup.
        let applied = try appliedSteps(timing)
        let backups = try backupFiles(in: directory)
        let again = try await stressChild(vault: timing, keyFile: passphrase, "migrate", "\(slowRows)").finish()
        #expect(again.contains("migrated \(Migration.latestVersion + 1)"))
        #expect(try appliedSteps(timing) == applied, "the second run re-applied or re-recorded a step")
        #expect(try backupFiles(in: directory) == backups, "the second run made a backup")

        StressResults.record(StressCount(case: "4 kill during migration", tried: tried, passed: passed, lost: 0, leaked: leaked))
        #expect(problems.isEmpty, "\(problems)")
        #expect(passed == tried)
        print("migration kills left versions \(seenVersions.sorted()) (whole run \(whole))")
    }

    func fresh(in directory: TemporaryDirectory, name: String) throws -> URL {
        let target = directory.file(name)
        try FileManager.default.copyItem(at: Self.fixtures.appending(path: FixtureV1.fileName), to: target)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
        return target
    }

    func appliedSteps(_ url: URL) throws -> [String] {
        let queue = try DatabaseQueue(path: url.path)
        defer { try? queue.close() }
        return try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT version, name, checksum, applied_at FROM vault_migrations ORDER BY version")
                .map { "\($0["version"] as Int) \($0["name"] as String) \($0["checksum"] as String) \($0["applied_at"] as Int64)" }
        }
    }

    func backupFiles(in directory: TemporaryDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.hasPrefix("timing.db") && $0.hasSuffix(".bak") }.sorted()
    }
}
