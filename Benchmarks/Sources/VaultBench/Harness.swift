import Foundation

// MARK: - Measurement

/// Nanoseconds on the monotonic clock.
@inline(__always) func nowNanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Percentiles of a set of samples (nanoseconds).
struct Stats {
    var samples: [UInt64]

    init(_ samples: [UInt64]) { self.samples = samples.sorted() }

    func percentile(_ p: Double) -> Double {
        guard !samples.isEmpty else { return .nan }
        let index = min(samples.count - 1, Int((p / 100 * Double(samples.count - 1)).rounded()))
        return Double(samples[index])
    }
    var p50: Double { percentile(50) }
    var p99: Double { percentile(99) }
    var count: Int { samples.count }
}

/// One operation under test: `prepare` runs untimed before each timed `body`.
struct Operation {
    var prepare: () async throws -> Void = {}
    var body: () async throws -> Void
}

/// Measures two operations the same way, interleaved in blocks (vault block, baseline block,
/// vault block, …) so drift in the machine's speed lands on both. Warm-up iterations are
/// run and discarded first.
func measurePair(
    warmup: Int, iterations: Int, block: Int = 50,
    _ vault: Operation, _ baseline: Operation
) async throws -> (vault: Stats, baseline: Stats) {
    for _ in 0..<warmup {
        try await vault.prepare()
        try await vault.body()
        try await baseline.prepare()
        try await baseline.body()
    }
    var a: [UInt64] = []
    var b: [UInt64] = []
    a.reserveCapacity(iterations)
    b.reserveCapacity(iterations)
    while a.count < iterations {
        let n = min(block, iterations - a.count)
        for _ in 0..<n {
            try await vault.prepare()
            let start = nowNanos()
            try await vault.body()
            a.append(nowNanos() - start)
        }
        for _ in 0..<n {
            try await baseline.prepare()
            let start = nowNanos()
            try await baseline.body()
            b.append(nowNanos() - start)
        }
    }
    return (Stats(a), Stats(b))
}

func measure(warmup: Int, iterations: Int, _ op: Operation) async throws -> Stats {
    for _ in 0..<warmup {
        try await op.prepare()
        try await op.body()
    }
    var a: [UInt64] = []
    for _ in 0..<iterations {
        try await op.prepare()
        let start = nowNanos()
        try await op.body()
        a.append(nowNanos() - start)
    }
    return Stats(a)
}

// MARK: - Results

/// One line of the table and one object of `.bench/results.json`.
struct Figure: Encodable {
    var figure: String
    var vault: Double
    var baseline: Double?
    var unit: String
    var ratio: Double?
    var target: String
    var met: Bool
    /// Spread and sample counts, for the reader (not part of the target).
    var detail: String

    /// Whether the figure holds numbers at all: a NaN or infinite value or ratio, or a zero
    /// baseline, means a scenario produced no samples, which is a failure and not a missed target.
    var isMeasured: Bool {
        vault.isFinite && (baseline.map { $0.isFinite && $0 > 0 } ?? true) && (ratio.map(\.isFinite) ?? true)
    }
}

final class Report {
    private(set) var figures: [Figure] = []

    func add(_ figure: Figure) {
        figures.append(figure)
        log(
            "  \(figure.met ? "met   " : "MISSED") \(figure.figure): \(fmt(figure.vault)) \(figure.unit)"
                + (figure.baseline.map { " vs \(fmt($0))" } ?? "") + (figure.ratio.map { " ratio \(fmt($0))" } ?? "")
                + " (target \(figure.target)) \(figure.detail)")
    }

    /// A median-vs-median latency figure; ratio = vault / baseline, met when ≤ `limit`.
    func latency(_ name: String, _ pair: (vault: Stats, baseline: Stats), limit: Double) {
        let ratio = pair.vault.p50 / pair.baseline.p50
        add(
            Figure(
                figure: name, vault: pair.vault.p50 / 1000, baseline: pair.baseline.p50 / 1000, unit: "µs p50",
                ratio: ratio, target: "<= \(limit)", met: ratio <= limit,
                detail: "p99 \(fmt(pair.vault.p99 / 1000)) vs \(fmt(pair.baseline.p99 / 1000)) µs, n=\(pair.vault.count)+\(pair.baseline.count)"))
    }

    func table() -> String {
        let header = ["figure", "vault", "baseline", "unit", "ratio", "target", "met"]
        let rows = figures.map { f in
            [f.figure, fmt(f.vault), f.baseline.map(fmt) ?? "—", f.unit, f.ratio.map(fmt) ?? "—", f.target, f.met ? "yes" : "NO"]
        }
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String]) -> String {
            "| " + cells.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: " | ") + " |"
        }
        return
            ([line(header), "|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|"]
            + rows.map(line)).joined(separator: "\n")
    }

    func write(to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(figures).write(to: url)
    }
}

func fmt(_ value: Double) -> String {
    if value.isNaN { return "nan" }
    if abs(value) >= 1000 { return String(format: "%.0f", value) }
    if abs(value) >= 10 { return String(format: "%.1f", value) }
    return String(format: "%.2f", value)
}

/// Progress on standard error (never a secret: only names and numbers).
func log(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Peak resident memory of this process so far (VmHWM), in KiB.
func peakRSSKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

// MARK: - Child processes

/// Runs `executable` to completion with its standard descriptors on /dev/null; returns the wall
/// time in ns and the exit status (128 + N for a signal).
///
/// `posix_spawn` and `waitpid`, not Foundation's `Process`: `waitUntilExit()` polls its run loop
/// in 50 ms steps, so while another child of this process ran (the agent) every process figure
/// read ~51 ms, the sqlite3 baseline included, and the agent's process ratio came out 1.00.
/// The child gets every signal unblocked and at its default action.
@discardableResult
func runProcess(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (nanos: UInt64, status: Int32) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for target in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
        posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var unblocked = sigset_t()
    sigemptyset(&unblocked)
    posix_spawnattr_setsigmask(&attributes, &unblocked)
    var defaults = sigset_t()
    sigfillset(&defaults)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] =
        (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var pid: pid_t = 0
    let start = nowNanos()
    let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    guard spawned == 0 else { throw BenchError("cannot start \(executable): \(String(cString: strerror(spawned)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        guard errno == EINTR else { throw BenchError("waitpid failed for \(executable): \(String(cString: strerror(errno)))") }
    }
    let nanos = nowNanos() - start
    // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (macros).
    let signal = status & 0x7f
    return (nanos, signal == 0 ? (status >> 8) & 0xff : 128 + signal)
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
