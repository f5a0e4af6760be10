// `make bench`: the vault's hot paths against baselines measured in the same run.
//
//     VaultBench --vault-binary PATH [--out .bench/results.json] [--rows 100000] [--quick]
//                [--only unlock,dpop,tokens,durable,process,agent,refresh,pages,maintenance,sync]
//     VaultBench child-refresh VAULT KEYFILE CALLERS     (used by the benchmark itself)
//     VaultBench child-agent SOCKET SECONDS              (likewise: one load client of the agent)
//     VaultBench child-echo SOCKET                       (likewise: the echo peer of the agent's floor)
//     VaultBench profile cold|refreshed|store|verify|open|page|page-baseline|page-baseline-plain|split|http N
//                                                    (a loop to profile; see Profile.swift)
//
// Prints progress on standard error and one table on standard output; writes the same
// figures as JSON. Never prints a token: the figures are times, counts and sizes.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "child-refresh" {
    await childRefresh(Array(arguments.dropFirst()))
    exit(0)
}
if arguments.first == "child-agent" {
    await childAgent(Array(arguments.dropFirst()))
    exit(0)
}
if arguments.first == "child-echo", arguments.count == 2 {
    EchoServer.serve(at: arguments[1])
    exit(0)
}
if arguments.first == "profile" {
    do { try await profileLoop(Array(arguments.dropFirst())) } catch {
        log("profile failed: \(error)")
        exit(1)
    }
    exit(0)
}

let option = { (name: String) -> String? in
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}
guard let vaultBinary = option("--vault-binary") else {
    log("usage: VaultBench --vault-binary PATH [--out FILE] [--rows N] [--quick]")
    exit(64)
}
let out = URL(fileURLWithPath: option("--out") ?? ".bench/results.json")
var scale = Scale()
// The largest notification history (default 100k, as `make bench`; 1M is the issues' full
// size): sizes are 1k, a tenth of it, and it.
if let rows = option("--rows").flatMap(Int.init), rows >= 10_000 {
    scale.notificationSizes = [1_000, rows / 10, rows]
}
let quick = arguments.contains("--quick")
if quick {
    scale = Scale(
        hotIterations: 2000, coldIterations: 100, durableIterations: 40, pageIterations: 50, unlockIterations: 2,
        processIterations: 6, callers: 100, bareRefreshes: 3, processes: 2, notificationSizes: [1_000, 5_000, 20_000],
        agentIterations: 500, agentClients: 8, agentSeconds: 2, syncDevices: 100, syncNotificationSizes: [1_000, 5_000])
}
// A subset of the groups, to re-measure one figure while working on it (`make bench` runs all).
let groups = Set((option("--only") ?? "unlock,dpop,tokens,durable,process,agent,refresh,pages,maintenance,sync").split(separator: ",").map(String.init))
let selfBinary = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
let dir = FileManager.default.temporaryDirectory.appendingPathComponent("credentialvault-bench-\(getpid())")
try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])

let report = Report()
let started = nowNanos()
/// Each group of scenarios runs in its own `do`: a failure is recorded and the next group still
/// runs, so one broken scenario neither hides the others' figures nor lets the run pass.
var failures: [String] = []
@MainActor func record(_ name: String, _ error: any Error) {
    log("!! \(name) failed: \(error)")
    failures.append("\(name): \(error)")
}
if groups.contains("unlock") {
    do { try await benchUnlock(report, dir: dir, scale: scale) } catch { record("unlock", error) }
}
if groups.contains("dpop") {
    do { try await benchDPoPProof(report, scale: scale) } catch { record("dpop", error) }
}
if groups.contains("tokens") || groups.contains("process") {
    var tokens: BenchVault?
    do { tokens = try await benchTokenReads(report, dir: dir, scale: scale, measure: groups.contains("tokens")) } catch { record("tokens", error) }
    if groups.contains("process") {
        do {
            guard let tokens else { throw BenchError("no vault: the token scenario failed") }
            try await benchTokenProcess(report, bench: tokens, vaultBinary: vaultBinary, scale: scale)
        } catch { record("process", error) }
    }
}
if groups.contains("agent") {
    do {
        let bench = try makeVault(in: dir, name: "agent", tokenEndpoint: unusedEndpoint, tokens: sampleTokens(expiresIn: 7 * 24 * 3600))
        try await benchAgent(report, bench: bench, vaultBinary: vaultBinary, selfBinary: selfBinary, dir: dir, scale: scale)
    } catch { record("agent", error) }
}
if groups.contains("durable") {
    do { try await benchDurableStore(report, dir: dir, scale: scale) } catch { record("durable", error) }
}
if groups.contains("refresh") {
    do { try await benchConcurrentRefresh(report, dir: dir, selfBinary: selfBinary, scale: scale) } catch { record("refresh", error) }
}
if groups.contains("pages") || groups.contains("maintenance") {
    var history: [(Int, BenchVault)] = []
    do { history = try await benchNotificationPages(report, dir: dir, scale: scale, measure: groups.contains("pages")) } catch {
        record("pages", error)
    }
    if groups.contains("maintenance") {
        do { try await benchMaintenance(report, vaults: history, vaultBinary: vaultBinary, dir: dir) } catch { record("maintenance", error) }
        do { try await benchVerify(report, vaults: history, quick: scale.unlockIterations < 8) } catch { record("verify", error) }
    }
}
if groups.contains("sync") {
    do { try await benchSync(report, dir: dir, vaultBinary: vaultBinary, scale: scale) } catch { record("sync", error) }
}

// A figure that could not be measured (no samples, a zero baseline) is a failure, not a miss.
for figure in report.figures where !figure.isMeasured {
    failures.append("\(figure.figure): not measured (vault \(fmt(figure.vault)), baseline \(figure.baseline.map(fmt) ?? "—"))")
}
try? report.write(to: out)
try? FileManager.default.removeItem(at: dir)
print(report.table())
let met = report.figures.filter(\.met).count
let missed = report.figures.filter { !$0.met }.map(\.figure)
print("\n\(met) of \(report.figures.count) targets met; \(fmt(Double(nowNanos() - started) / 1e9)) s; written to \(out.path)")
// A missed target is reported, not a failure: ratios drift on a shared machine.
for figure in missed { print("missed: \(figure)") }
if quick { print("(quick mode: proves that every scenario runs; its counts and a debug build's ratios are not the targets' figures)") }
if !failures.isEmpty {
    print("\nFAILED: \(failures.count) scenario(s) or figure(s) did not run or could not be measured:")
    for failure in failures { print("  \(failure)") }
    exit(1)
}
