import Foundation
import GRDB
import VaultStore

// MARK: - Notification pages

/// Builds one vault per size (reused by the maintenance figures) and times the first and the
/// deepest page of 50, newest first, against the first page at the smallest size.
func benchNotificationPages(_ report: Report, dir: URL, scale: Scale, measure: Bool = true) async throws -> [(Int, BenchVault)] {
    var vaults: [(Int, BenchVault)] = []
    for size in scale.notificationSizes {
        let start = nowNanos()
        let bench = try makeVault(in: dir, name: "history-\(size)", tokenEndpoint: unusedEndpoint, tokens: sampleTokens(expiresIn: 3600))
        try fillNotifications(bench, count: size)
        log("   generated \(size) notifications in \(fmt(Double(nowNanos() - start) / 1e9)) s")
        vaults.append((size, bench))
    }
    guard measure else { return vaults }
    log("== notification pages of 50, newest first")
    var cells: [(String, Stats)] = []
    for (size, bench) in vaults {
        let vault = try bench.open()
        defer { vault.close() }
        // The cursor just before the oldest 50: the deepest page a reader can reach.
        let deepest: NotificationCursor = try {
            let queue = try DatabaseQueue(
                path: bench.url.path,
                configuration: {
                    var c = Configuration()
                    c.readonly = true
                    return c
                }())
            defer { try? queue.close() }
            let row = try queue.read { db in
                try Row.fetchOne(db, sql: "SELECT created_at, seq FROM notifications ORDER BY created_at ASC, seq ASC LIMIT 1 OFFSET 50")
            }
            guard let row, let cursor = NotificationCursor("n1.\(row[0] as Int64).\(row[1] as Int64)") else { throw BenchError("no deep cursor") }
            return cursor
        }()
        let first = Operation(body: {
            guard try vault.notifications(NotificationQuery(limit: 50)).items.count == 50 else { throw BenchError("short first page") }
        })
        let deep = Operation(body: {
            guard try vault.notifications(NotificationQuery(limit: 50, after: deepest)).items.count == 50 else { throw BenchError("short deep page") }
        })
        let pair = try await measurePair(warmup: 30, iterations: scale.pageIterations, block: 50, first, deep)
        cells.append(("\(size) rows, first page", pair.vault))
        cells.append(("\(size) rows, deepest page", pair.baseline))
    }
    guard let reference = cells.first?.1 else { return vaults }
    for (name, stats) in cells {
        let ratio = stats.p50 / reference.p50
        report.add(
            Figure(
                figure: "notification page of 50: \(name) (vs \(scale.notificationSizes[0]) rows, first page)",
                vault: stats.p50 / 1000, baseline: reference.p50 / 1000, unit: "µs p50", ratio: ratio,
                target: "<= 1.5", met: ratio <= 1.5, detail: "p99 \(fmt(stats.p99 / 1000)) µs, n=\(stats.count)"))
    }
    return vaults
}

// MARK: - Maintenance at scale

/// `vault verify` and `vault rotate-key` as whole processes on the 100k and 1M vaults:
/// rows per second and peak RSS (GNU time's maximum resident set size).
func benchMaintenance(_ report: Report, vaults: [(Int, BenchVault)], vaultBinary: String, dir: URL) async throws {
    let large = vaults.filter { $0.0 >= 10_000 }
    guard large.count >= 2, let small = large.first, let big = large.last else {
        log("   (maintenance figures need the two largest vaults; skipped)")
        return
    }
    for command in ["verify", "rotate-key", "migrate"] {
        log("== vault \(command)")
        var measured: [(rows: Int, seconds: Double, peakKiB: Int)] = []
        for (size, bench) in [small, big] {
            if command == "migrate" { try downgradeToSchema1(bench.url) }
            let timeFile = dir.appendingPathComponent("time-\(command)-\(size).txt")
            let run = try runProcess(
                "/usr/bin/time",
                [
                    "-f", "%M", "-o", timeFile.path, vaultBinary, command,
                    "--vault", bench.url.path, "--key-file", bench.keyFile.path, "--json",
                ])
            guard run.status == 0 else { throw BenchError("vault \(command) exited \(run.status) on \(size) rows") }
            let peak = Int((try String(contentsOf: timeFile, encoding: .utf8)).split(separator: "\n").last ?? "0") ?? 0
            measured.append((size, Double(run.nanos) / 1e9, peak))
            log("   \(size) rows: \(fmt(Double(run.nanos) / 1e9)) s, peak \(peak / 1024) MiB")
        }
        let (a, b) = (measured[0], measured[1])
        report.add(
            Figure(
                figure: "vault \(command), \(b.rows) notifications: rows/s", vault: Double(b.rows) / b.seconds,
                baseline: nil, unit: "rows/s", ratio: nil, target: "reported", met: true,
                detail: "\(fmt(b.seconds)) s whole process; \(a.rows) rows: \(fmt(Double(a.rows) / a.seconds)) rows/s"))
        let ratio = Double(b.peakKiB) / Double(max(1, a.peakKiB))
        report.add(
            Figure(
                figure: "vault \(command) peak RSS, \(b.rows) vs \(a.rows) rows", vault: Double(b.peakKiB) / 1024,
                baseline: Double(a.peakKiB) / 1024, unit: "MiB", ratio: ratio, target: "<= 1.5", met: ratio <= 1.5,
                detail: "GNU time maximum resident set size"))
    }
}

/// Turns a schema-2 vault back into the schema-1 vault it would be had it never been migrated,
/// so `vault migrate` has real work on a vault of this size: migration 0002's tables and
/// columns are dropped and its record removed. Its sealed values are untouched (0002 adds
/// none), so the migrated vault opens as before.
func downgradeToSchema1(_ url: URL) throws {
    let queue = try DatabaseQueue(path: url.path, configuration: baselineConfiguration())
    defer { try? queue.close() }
    try queue.writeWithoutTransaction { db in
        try db.inTransaction {
            try db.execute(
                sql: """
                    DROP TABLE session_policies;
                    DROP TABLE refresh_state;
                    ALTER TABLE vault_meta DROP COLUMN pending_vault_key_id;
                    ALTER TABLE vault_meta DROP COLUMN pending_wrapped_vault_key;
                    ALTER TABLE accounts DROP COLUMN pending_data_key_id;
                    ALTER TABLE accounts DROP COLUMN pending_wrapped_data_key;
                    DELETE FROM vault_migrations WHERE version = 2;
                    PRAGMA user_version = 1;
                    """)
            return .commit
        }
        try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
