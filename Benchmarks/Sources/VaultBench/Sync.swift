import DevGateway
import Foundation
import Logging
import VaultStore

// MARK: - Syncs from the identity service (issue 16)

/// `vault devices sync` of 1,000 devices and `vault notifications sync --all` of 10,000 and
/// 100,000 notifications: the release binary as a whole process under GNU time, against the
/// development gateway on loopback (in this process, seeded in bulk). Rows per second (wall
/// time of the process, the gateway's answers included) and peak RSS; the notification sync
/// should be flat from the smaller history to the larger one.
func benchSync(_ report: Report, dir: URL, vaultBinary: String, scale: Scale) async throws {
    let gateway = try await DevGateway.start(logger: Logger(label: "gateway") { _ in SwiftLogNoOpLogHandler() })
    defer { Task { await gateway.stop() } }
    let api = ["--api", gateway.baseURL.absoluteString]

    /// A vault signed in as `subject` whose machine is an active device at the gateway.
    func machine(_ subject: String) async throws -> BenchVault {
        let issued = await gateway.issueGrant(subject: subject, clientID: "bench-cli")
        let tokens = TokenSet(
            accessToken: issued.accessToken, refreshToken: issued.refreshToken, tokenType: issued.tokenType,
            accessTokenExpiresAt: Date().addingTimeInterval(Double(issued.expiresIn)), scopes: ["openid", "profile"])
        let bench = try makeVault(in: dir, name: "sync-\(subject)", tokenEndpoint: gateway.tokenEndpoint, tokens: tokens)
        let activated = try await runVault(vaultBinary, ["devices", "activate", "--name", "Bench"] + api, bench, dir: dir, tag: "activate-\(subject)")
        guard activated.status == 0 else { throw BenchError("vault devices activate exited \(activated.status)") }
        return bench
    }

    log("== vault devices sync, \(scale.syncDevices) devices")
    let roster = try await machine("devices")
    await gateway.seedDevices(subject: "devices", count: scale.syncDevices - 1)
    let devices = try await runVault(vaultBinary, ["devices", "sync", "--json"] + api, roster, dir: dir, tag: "devices-sync")
    guard devices.status == 0 else { throw BenchError("vault devices sync exited \(devices.status)") }
    log("   \(scale.syncDevices) devices: \(fmt(devices.seconds)) s, peak \(devices.peakKiB / 1024) MiB")
    report.add(
        Figure(
            figure: "vault devices sync, \(scale.syncDevices) devices: rows/s", vault: Double(scale.syncDevices) / devices.seconds,
            baseline: nil, unit: "rows/s", ratio: nil, target: "reported", met: true,
            detail: "\(fmt(devices.seconds)) s whole process, peak RSS \(fmt(Double(devices.peakKiB) / 1024)) MiB"))

    var measured: [(rows: Int, seconds: Double, peakKiB: Int)] = []
    for size in scale.syncNotificationSizes {
        log("== vault notifications sync --all, \(size) notifications")
        let subject = "history-\(size)"
        let bench = try await machine(subject)
        let start = nowNanos()
        await gateway.seedNotifications(subject: subject, count: size)
        log("   seeded in \(fmt(Double(nowNanos() - start) / 1e9)) s")
        let run = try await runVault(vaultBinary, ["notifications", "sync", "--all", "--page-size", "100"] + api, bench, dir: dir, tag: "sync-\(size)")
        guard run.status == 0 else { throw BenchError("vault notifications sync exited \(run.status) on \(size)") }
        let stored = try bench.open()
        let count = try stored.notificationCount()
        stored.close()
        guard count == size else { throw BenchError("the sync of \(size) stored \(count) notifications") }
        log("   \(size) notifications: \(fmt(run.seconds)) s, \(fmt(Double(size) / run.seconds)) rows/s, peak \(run.peakKiB / 1024) MiB")
        measured.append((size, run.seconds, run.peakKiB))
    }
    guard measured.count >= 2, let small = measured.first, let big = measured.last else { return }
    let smallRate = Double(small.rows) / small.seconds
    let bigRate = Double(big.rows) / big.seconds
    report.add(
        Figure(
            figure: "vault notifications sync --all, \(small.rows) notifications: rows/s", vault: smallRate,
            baseline: nil, unit: "rows/s", ratio: nil, target: "reported", met: true,
            detail: "\(fmt(small.seconds)) s whole process, pages of 100, peak RSS \(fmt(Double(small.peakKiB) / 1024)) MiB"))
    report.add(
        Figure(
            figure: "vault notifications sync --all, \(big.rows) vs \(small.rows) notifications: rows/s", vault: bigRate,
            baseline: smallRate, unit: "rows/s", ratio: bigRate / smallRate, target: "reported (flat: ~1)", met: true,
            detail: "\(fmt(big.seconds)) s whole process, pages of 100"))
    let ratio = Double(big.peakKiB) / Double(max(1, small.peakKiB))
    report.add(
        Figure(
            figure: "vault notifications sync peak RSS, \(big.rows) vs \(small.rows) notifications", vault: Double(big.peakKiB) / 1024,
            baseline: Double(small.peakKiB) / 1024, unit: "MiB", ratio: ratio, target: "<= 1.5", met: ratio <= 1.5,
            detail: "GNU time maximum resident set size"))
}

/// Runs the vault binary on `bench` under GNU time on a thread of its own (the gateway answering
/// it runs on this process's cooperative pool): wall time, peak RSS and exit status.
func runVault(_ binary: String, _ arguments: [String], _ bench: BenchVault, dir: URL, tag: String) async throws
    -> (seconds: Double, peakKiB: Int, status: Int32)
{
    try await runVault(binary, arguments + ["--vault", bench.url.path, "--key-file", bench.keyFile.path], dir: dir, tag: tag)
}

/// Runs the vault binary with exactly `arguments` (vault and credential included) under GNU time.
func runVault(_ binary: String, _ arguments: [String], dir: URL, tag: String) async throws
    -> (seconds: Double, peakKiB: Int, status: Int32)
{
    let timeFile = dir.appendingPathComponent("time-\(tag).txt")
    let command = ["-f", "%M", "-o", timeFile.path, binary] + arguments
    let run = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(nanos: UInt64, status: Int32), any Error>) in
        Thread.detachNewThread { continuation.resume(with: Result { try runProcess("/usr/bin/time", command) }) }
    }
    let peak = Int((try String(contentsOf: timeFile, encoding: .utf8)).split(separator: "\n").last ?? "0") ?? 0
    return (Double(run.nanos) / 1e9, peak, run.status)
}
