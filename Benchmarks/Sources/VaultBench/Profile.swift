import CSodiumBaseline
import DevGateway
import Foundation
import GRDB
import Logging
import VaultOAuth
import VaultSession
@_spi(RawWrites) import VaultStore

/// `VaultBench profile WHAT N`: a small loop to run under `valgrind --tool=callgrind` when a
/// target is missed (instruction counts are repeatable on noisy machines). WHAT is `cold`
/// (token after another connection committed), `store` (durable token store), `verify`
/// (`vault verify` of 20,000 notifications, or `PROFILE_ROWS`; `PROFILE_DEPTH=deep` for `--deep`; it prints the CPU time of all
/// threads beside the wall time, and times `PRAGMA integrity_check` and `quick_check` alone;
/// `PROFILE_KEEP=PATH`, in a directory only you can write, keeps a copy of the vault for the
/// `sqlite3` shell), `open` (open, and open and close, key file) or `page` (first notification
/// page of 50 out of 1000), `page-baseline` (the same page's baseline: plaintext keyset page +
/// 150 decrypts + row MACs) or `page-baseline-plain` (the baseline before issue 32, without the
/// row MACs).
///
/// The page loops warm up with one page (statements prepared, keys unwrapped), then call
/// ``profiledStorePage(_:)`` or ``profiledBaselinePage(_:work:macs:)`` N times: counting only
/// inside those (`scripts/page-instructions.sh` does) gives the instructions of a page.
func profileLoop(_ arguments: [String]) async throws {
    guard arguments.count == 2, let iterations = Int(arguments[1]) else {
        throw BenchError("usage: profile cold|refreshed|store|verify|open|page|page-baseline|page-baseline-plain|split|http N")
    }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("credentialvault-profile-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(at: dir) }
    if arguments[0] == "http" {
        // Time of each refresh request against the gateway with no added latency: the first
        // in the process (client set-up) and the rest.
        let gateway = try await DevGateway.start(logger: quietLogger())
        let oauth = OAuthClient(logger: quietLogger())
        var grant = await gateway.issueGrant(subject: "http", clientID: "bench-cli")
        var times: [UInt64] = []
        var fresh: [UInt64] = []
        for i in 0..<(2 * iterations) {
            let client = i < iterations ? oauth : OAuthClient(logger: quietLogger())
            let start = nowNanos()
            let response = try await client.refresh(
                refreshToken: grant.refreshToken ?? "", scope: nil, endpoint: gateway.tokenEndpoint,
                client: ClientCredentials(clientID: "bench-cli"))
            if i < iterations { times.append(nowNanos() - start) } else { fresh.append(nowNanos() - start) }
            grant = await gateway.issueGrant(subject: "http", clientID: "bench-cli")
            _ = response
        }
        await gateway.stop()
        let rest = Stats(Array(times.dropFirst()))
        log("one client: first request \(fmt(Double(times[0]) / 1e6)) ms; then p50 \(fmt(rest.p50 / 1e6)) ms, p99 \(fmt(rest.p99 / 1e6)) ms")
        log("a new client per request: p50 \(fmt(Stats(fresh).p50 / 1e6)) ms, p99 \(fmt(Stats(fresh).p99 / 1e6)) ms")
        return
    }
    let bench = try makeVault(in: dir, name: "profile", tokenEndpoint: unusedEndpoint, tokens: sampleTokens(expiresIn: 7 * 24 * 3600))
    let vault = try bench.open()
    defer { vault.close() }
    switch arguments[0] {
    case "cold":
        let service = SessionService(vault: vault, oauth: OAuthClient(logger: quietLogger()), logger: quietLogger())
        let pool = try DatabasePool(path: bench.url.path, configuration: baselineConfiguration())
        defer { try? pool.close() }
        // Another connection's commit that changes no authenticated row (see Scenarios.swift).
        try await pool.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS bench_touch (n INTEGER); INSERT INTO bench_touch VALUES (0)") }
        for _ in 0..<iterations {
            try await pool.write { db in try db.execute(sql: "UPDATE bench_touch SET n = n + 1") }
            _ = try await service.validAccessToken()
        }
    case "refreshed":
        // A token request after another handle on the file (another process) stored a refreshed pair.
        let service = SessionService(vault: vault, oauth: OAuthClient(logger: quietLogger()), logger: quietLogger())
        let other = try bench.open()
        defer { other.close() }
        var generation = try other.tokens.current(for: bench.account)?.generation
        let pair = sampleTokens(expiresIn: 7 * 24 * 3600)
        var samples: [UInt64] = []
        for _ in 0..<iterations {
            generation = try other.tokens.store(pair, for: bench.account, replacing: generation)
            let start = nowNanos()
            _ = try await service.validAccessToken()
            samples.append(nowNanos() - start)
        }
        log("validAccessToken after another process stored a refreshed pair: p50 \(fmt(Stats(samples).p50 / 1000)) µs")
    case "split":
        // Where the time of a token request after another connection's commit goes: the same
        // commit, then each step alone (µs p50 of `iterations`).
        let service = SessionService(vault: vault, oauth: OAuthClient(logger: quietLogger()), logger: quietLogger())
        let pool = try DatabasePool(path: bench.url.path, configuration: baselineConfiguration())
        defer { try? pool.close() }
        // Another connection's commit that changes no authenticated row (see Scenarios.swift).
        try await pool.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS bench_touch (n INTEGER); INSERT INTO bench_touch VALUES (0)") }
        let touch = { try pool.write { db in try db.execute(sql: "UPDATE bench_touch SET n = n + 1") } }
        var steps: [String: [UInt64]] = [:]
        func time(_ name: String, _ body: () throws -> Void) rethrows {
            let start = nowNanos()
            try body()
            steps[name, default: []].append(nowNanos() - start)
        }
        for _ in 0..<iterations {
            try touch()
            try time("stamp") { _ = try vault.changeStamp() }
            try touch()
            try time("snapshot") { _ = try vault.tokens.accessSnapshot(for: nil) }
            try touch()
            try time("point read") {
                _ = try pool.read { db in try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM tokens"))?["access_token"] as Data? }
            }
            try touch()
            try time("4 statements, one read") {
                try pool.read { db in
                    _ = try Row.fetchOne(db.cachedStatement(sql: "SELECT active_account_id FROM vault_meta WHERE singleton = 1"))
                    _ = try Row.fetchOne(
                        db.cachedStatement(sql: "SELECT * FROM sessions WHERE account_id = ? ORDER BY session_id DESC LIMIT 1"),
                        arguments: [bench.account.rawValue])
                    _ = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM session_policies WHERE account_id = ?"), arguments: [bench.account.rawValue])
                    _ = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM tokens WHERE account_id = ?"), arguments: [bench.account.rawValue])
                }
            }
            try touch()
            try time("1 join, one read") {
                try pool.read { db in
                    _ = try Row.fetchOne(
                        db.cachedStatement(
                            sql: """
                                SELECT m.active_account_id, s.*, p.*, t.generation, t.access_token, t.token_type, t.access_expires_at, t.scopes
                                FROM vault_meta m
                                LEFT JOIN sessions s ON s.session_id = (SELECT max(session_id) FROM sessions WHERE account_id = ?1)
                                LEFT JOIN session_policies p ON p.account_id = ?1
                                LEFT JOIN tokens t ON t.account_id = ?1
                                WHERE m.singleton = 1
                                """), arguments: [bench.account.rawValue])
                }
            }
            try touch()
            try time("access revision (the state row)") { _ = try vault.tokens.accessRevision(for: bench.account) }
            try touch()
            try time("one-statement vault read") { _ = try vault.accounts.activeID() }
            try touch()
            let hop = nowNanos()
            _ = try await BlockingWork.run { 0 }
            steps["off-pool hop (empty)", default: []].append(nowNanos() - hop)
            try touch()
            let start = nowNanos()
            _ = try await service.validAccessToken()
            steps["validAccessToken", default: []].append(nowNanos() - start)
        }
        for (name, samples) in steps.sorted(by: { $0.key < $1.key }) { log("\(name): p50 \(fmt(Stats(samples).p50 / 1000)) µs") }
    case "open":
        // Opening and closing the key-file vault: what an unlock costs besides the KDF.
        vault.close()
        var samples: [UInt64] = []
        var opens: [UInt64] = []
        for _ in 0..<iterations {
            let start = nowNanos()
            let opened = try bench.open()
            opens.append(nowNanos() - start)
            opened.close()
            samples.append(nowNanos() - start)
        }
        log("open alone, key file: p50 \(fmt(Stats(opens).p50 / 1000)) µs")
        log("open + close, key file: p50 \(fmt(Stats(samples).p50 / 1000)) µs")
    case "store":
        var generation = try vault.tokens.current(for: bench.account)?.generation
        let pair = sampleTokens(expiresIn: 3600)
        for _ in 0..<iterations { generation = try vault.tokens.store(pair, for: bench.account, replacing: generation) }
    case "verify":
        // `vault verify` of 20,000 notifications (or PROFILE_ROWS), N times (issue 31's verify figure).
        let rows = ProcessInfo.processInfo.environment["PROFILE_ROWS"].flatMap { Int($0) } ?? 20_000
        let depth = ProcessInfo.processInfo.environment["PROFILE_DEPTH"].flatMap(VerifyDepth.init(rawValue:)) ?? .rows
        try fillNotifications(bench, count: rows)
        var samples: [UInt64] = []
        var cpu: [UInt64] = []
        for _ in 0..<iterations {
            let (start, startCPU) = (nowNanos(), processCPUNanos())
            guard try vault.maintenance.verify(depth: depth).passed else { throw BenchError("the vault does not verify") }
            samples.append(nowNanos() - start)
            cpu.append(processCPUNanos() - startCPU)
        }
        log("verify (\(depth.rawValue)), \(rows) notifications: p50 \(fmt(Stats(samples).p50 / 1e6)) ms; CPU (all threads) p50 \(fmt(Stats(cpu).p50 / 1e6)) ms")
        let queue = try DatabaseQueue(path: bench.url.path)
        var checks: [UInt64] = []
        for _ in 0..<iterations {
            let start = nowNanos()
            _ = try await queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
            checks.append(nowNanos() - start)
        }
        log("PRAGMA integrity_check alone: p50 \(fmt(Stats(checks).p50 / 1e6)) ms")
        checks = []
        for _ in 0..<iterations {
            let start = nowNanos()
            _ = try await queue.read { try String.fetchAll($0, sql: "PRAGMA quick_check") }
            checks.append(nowNanos() - start)
        }
        log("PRAGMA quick_check alone: p50 \(fmt(Stats(checks).p50 / 1e6)) ms")
        try queue.close()
        if let keep = ProcessInfo.processInfo.environment["PROFILE_KEEP"] {
            // A consistent copy (SQLite's backup API: the WAL's frames included).
            try? FileManager.default.removeItem(atPath: keep)
            try vault.maintenance.backup(to: URL(fileURLWithPath: keep))
        }
    case "page":
        try fillNotifications(bench, count: 1000)
        _ = try vault.notifications.page(NotificationQuery(limit: 50))
        for _ in 0..<iterations { try profiledStorePage(vault) }
    case "page-baseline", "page-baseline-plain":
        // The same page's baseline (History.swift), to compare instruction counts with `page`.
        try fillNotifications(bench, count: 1000)
        guard sodium_init() >= 0 else { throw BenchError("sodium_init failed") }
        let plain = try PlaintextNotifications(copying: bench, in: dir, name: "profile-plain")
        defer { plain.close() }
        let work = try plain.pageWork(after: nil)
        let macs = arguments[0] == "page-baseline"
        try plain.page(after: nil, work: work, macs: macs)
        for _ in 0..<iterations { try profiledBaselinePage(plain, work: work, macs: macs) }
    default:
        throw BenchError("unknown profile \(arguments[0])")
    }
}

/// CPU time of every thread of this process so far (user and system).
func processCPUNanos() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let seconds = UInt64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
    let micros = UInt64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
    return seconds * 1_000_000_000 + micros * 1_000
}

/// One first page of 50 of the vault (`Vault.notifications.page`), where callgrind can count it (`--toggle-collect`).
@inline(never) func profiledStorePage(_ vault: Vault) throws {
    guard try vault.notifications.page(NotificationQuery(limit: 50)).items.count == 50 else { throw BenchError("short page") }
}

/// One first page of 50 of the baseline, where callgrind can count it (`--toggle-collect`).
@inline(never) func profiledBaselinePage(_ plain: PlaintextNotifications, work: [Int], macs: Bool) throws {
    try plain.page(after: nil, work: work, macs: macs)
}
