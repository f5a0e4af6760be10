import AgentWire
import Foundation
import GRDB
import VaultAgent
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - The agent (issue 15)

/// A `vault agent run` child serving one key-file vault, its socket in a private runtime
/// directory of the run; stopped (SIGTERM, its keys wiped) when the scenario ends.
struct RunningAgent {
    let process: Process
    let environment: [String: String]
    let client: AgentClient

    static func start(vaultBinary: String, bench: BenchVault, dir: URL) async throws -> RunningAgent {
        let runtime = dir.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment.removeValue(forKey: "VAULT_PASSPHRASE")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: vaultBinary)
        process.arguments = ["agent", "run", "--vault", bench.url.path, "--key-file", bench.keyFile.path, "--lock-after", "none"]
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let client = AgentClient(socket: try AgentSocket.path(forVault: bench.url, environment: environment), timeoutSeconds: 30)
        let deadline = nowNanos() + 30_000_000_000
        while !(await client.isRunning()) {
            guard process.isRunning, nowNanos() < deadline else {
                process.terminate()
                throw BenchError("the agent did not start serving within 30 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return RunningAgent(process: process, environment: environment, client: client)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// The figures of issues 15 and 32: a whole `vault token` process served by the agent (the lean
/// front installed as `vault`, and the full command), one request to the agent from a linked
/// client, and 64 client processes hammering it for ten seconds.
func benchAgent(_ report: Report, bench: BenchVault, vaultBinary: String, selfBinary: String, dir: URL, scale: Scale) async throws {
    log("== the agent: vault token served by a running agent")
    let agent = try await RunningAgent.start(vaultBinary: vaultBinary, bench: bench, dir: dir)
    defer { agent.stop() }
    guard let sqlite = ["/usr/bin/sqlite3", "/bin/sqlite3"].first(where: FileManager.default.isExecutableFile) else {
        throw BenchError("sqlite3 CLI not found (apt-get install sqlite3)")
    }
    // The front `make install` puts in place as `vault`, built beside the full command.
    let leanBinary = URL(fileURLWithPath: vaultBinary).deletingLastPathComponent().appendingPathComponent("vault-lean").path
    guard FileManager.default.isExecutableFile(atPath: leanBinary) else { throw BenchError("\(leanBinary) is not built (swift build --product vault-lean)") }
    // No credential on the command line or in the environment: only the agent can answer.
    let tokenArgs = ["token", "--vault", bench.url.path]
    for binary in [leanBinary, vaultBinary] {
        let check = try runProcess(binary, tokenArgs, environment: agent.environment)
        guard check.status == 0 else { throw BenchError("\(binary) token through the agent exited \(check.status)") }
    }
    let sql = "SELECT hex(access_token) FROM tokens WHERE account_id = '\(bench.account.rawValue)'"
    for (name, binary, target) in [("`vault token` process (lean front)", leanBinary, 2.0), ("`vault-full token` process", vaultBinary, Double?.none)] {
        let process = try await measurePair(
            warmup: 3, iterations: scale.processIterations, block: 5,
            Operation(body: {
                let r = try runProcess(binary, tokenArgs, environment: agent.environment)
                guard r.status == 0 else { throw BenchError("\(name) through the agent failed (\(r.status))") }
            }),
            Operation(body: { _ = try runProcess(sqlite, [bench.url.path, sql]) }))
        let ratio = process.vault.p50 / process.baseline.p50
        report.add(
            Figure(
                figure: "\(name), agent running (vs sqlite3 CLI one row)", vault: process.vault.p50 / 1e6,
                baseline: process.baseline.p50 / 1e6, unit: "ms p50", ratio: ratio, target: target.map { "<= \(fmt($0))" } ?? "reported",
                met: target.map { ratio <= $0 } ?? true,
                detail: "p99 \(fmt(process.vault.p99 / 1e6)) vs \(fmt(process.baseline.p99 / 1e6)) ms, n=\(process.vault.count)"))
    }

    log("== the agent: one token request from a linked AgentClient")
    let pool = try DatabasePool(path: bench.url.path, configuration: baselineConfiguration())
    defer { try? pool.close() }
    let id = bench.account.rawValue
    let pointRead = {
        let data: Data? = try pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM tokens WHERE account_id = ?"), arguments: [id])?["access_token"]
        }
        guard data != nil else { throw BenchError("baseline row missing") }
    }
    // The floor: a bare Unix-socket echo round trip (a request-sized message out, an
    // answer-sized one back, blocking calls on a kept connection) plus the GRDB point read.
    let echo = try await EchoServer(path: dir.appendingPathComponent("echo.sock").path, selfBinary: selfBinary)
    defer { echo.stop() }
    let client = agent.client
    let request = try await measurePair(
        warmup: 200, iterations: scale.agentIterations, block: 250,
        Operation(body: { _ = try await client.token() }),
        Operation(body: {
            try echo.roundTrip()
            try pointRead()
        }))
    report.latency("agent token request, linked AgentClient (vs Unix-socket echo + GRDB point read)", request, limit: 1.5)

    log("== the agent: \(scale.agentClients) client processes for \(scale.agentSeconds) s")
    try await benchAgentLoad(report, agent: agent, selfBinary: selfBinary, clients: scale.agentClients, seconds: scale.agentSeconds)
}

private func benchAgentLoad(_ report: Report, agent: RunningAgent, selfBinary: String, clients: Int, seconds: Int) async throws {
    var children: [(Process, Pipe, Pipe)] = []
    for _ in 0..<clients {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: selfBinary)
        process.arguments = ["child-agent", agent.client.socketPath?.path ?? "", "\(seconds)"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        children.append((process, input, output))
    }
    var readers: [LineReader] = children.map { LineReader($0.2.fileHandleForReading) }
    for i in readers.indices { guard readers[i].next() == "ready" else { throw BenchError("an agent client failed to start") } }
    let started = nowNanos()
    for child in children { child.1.fileHandleForWriting.write(Data("go\n".utf8)) }
    var latencies: [UInt64] = []
    var failures = 0
    var failureKinds: Set<String> = []
    var reported = 0
    for i in readers.indices {
        // Each child writes its figures only after its timed window, so no pipe fills during it.
        while let line = readers[i].next() {
            if line.hasPrefix("lat ") {
                latencies.append(contentsOf: line.dropFirst(4).split(separator: ",").compactMap { UInt64($0) })
            } else if line.hasPrefix("failed ") {
                let parts = line.split(separator: " ")
                failures += parts.count > 1 ? Int(parts[1]) ?? 1 : 1
                if parts.count > 2 { failureKinds.insert(parts.dropFirst(2).joined(separator: " ")) }
            } else if line.hasPrefix("done") {
                reported += 1
            }
        }
        children[i].0.waitUntilExit()
    }
    let elapsed = Double(nowNanos() - started) / 1e9
    let stats = Stats(latencies)
    let lost = clients - reported
    let rate = Double(stats.count) / Double(seconds)
    report.add(
        Figure(
            figure: "agent, \(clients) client processes for \(seconds) s", vault: rate, baseline: nil, unit: "requests/s",
            ratio: nil, target: "0 failed or lost", met: failures == 0 && lost == 0 && stats.count > 0,
            detail: "\(stats.count) answered, \(failures) failed\(failureKinds.isEmpty ? "" : " (\(failureKinds.sorted().joined(separator: "; ")))"), "
                + "\(lost) clients without a report; p50 \(fmt(stats.p50 / 1e6)) ms, p99 \(fmt(stats.p99 / 1e6)) ms; "
                + "\(fmt(elapsed)) s wall clock"))
    report.add(
        Figure(
            figure: "agent, \(clients) client processes: p99 request", vault: stats.p99 / 1e6, baseline: nil, unit: "ms",
            ratio: nil, target: "reported", met: stats.count > 0, detail: "max \(fmt(stats.percentile(100) / 1e6)) ms"))
}

/// A load client: connects per request as `vault token` does, one request in flight, until its
/// window ends; reports its latencies (ns) and failures after the window.
func childAgent(_ arguments: [String]) async {
    guard arguments.count == 2, let seconds = UInt64(arguments[1]) else {
        emitLine("failed 1 usage")
        return
    }
    let client = AgentClient(socket: URL(fileURLWithPath: arguments[0]), timeoutSeconds: 30)
    emitLine("ready")
    guard readLine() == "go" else { return }
    let end = nowNanos() + seconds * 1_000_000_000
    var latencies: [UInt64] = []
    var failures = 0
    var kind = ""
    while nowNanos() < end {
        let start = nowNanos()
        do {
            _ = try await client.token()
            latencies.append(nowNanos() - start)
        } catch {
            failures += 1
            kind = "\(type(of: error)): \(error)"
        }
    }
    var index = 0
    while index < latencies.count {
        let chunk = latencies[index..<min(index + 2000, latencies.count)]
        emitLine("lat " + chunk.map(String.init).joined(separator: ","))
        index += 2000
    }
    if failures > 0 { emitLine("failed \(failures) \(kind)") }
    emitLine("done")
}

/// A bare Unix-socket echo peer for the agent round trip's floor, in a process of its own as
/// the agent is (`VaultBench child-echo SOCKET`: one connection, blocking reads); the client
/// sends 40 bytes (a token request's frame) and reads 400 back (a token answer's size).
final class EchoServer: Sendable {
    private let process: Process
    private let client: Int32
    static let requestSize = 40
    static let answerSize = 400

    init(path: String, selfBinary: String) async throws {
        unlink(path)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: selfBinary)
        process.arguments = ["child-echo", path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.process = process
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let deadline = nowNanos() + 10_000_000_000
        var client: Int32 = -1
        while client < 0 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if connected == 0 {
                client = fd
            } else {
                close(fd)
                guard process.isRunning, nowNanos() < deadline else { throw BenchError("the echo peer did not listen within 10 s") }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        self.client = client
    }

    /// The child's side: accept one connection, answer each request until it closes.
    static func serve(at path: String) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 4) == 0 else { return }
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        var request = [UInt8](repeating: 0, count: requestSize)
        let answer = [UInt8](repeating: 0x61, count: answerSize)
        while readExactly(connection, &request) {
            guard answer.withUnsafeBytes({ write(connection, $0.baseAddress, $0.count) }) == answer.count else { return }
        }
    }

    /// One round trip, the answer awaited as `AgentClient` awaits one on a kept connection
    /// (watched for up to the same time from the calling thread, then a blocking read), so the
    /// floor and the client differ only in what the agent does.
    func roundTrip() throws {
        let request = [UInt8](repeating: 0x62, count: Self.requestSize)
        guard request.withUnsafeBytes({ write(client, $0.baseAddress, $0.count) }) == request.count else { throw BenchError("echo write") }
        _ = WireProtocol.answerArrives(client, withinNanoseconds: AgentClient.spinNanoseconds)
        var answer = [UInt8](repeating: 0, count: Self.answerSize)
        guard Self.readExactly(client, &answer) else { throw BenchError("echo read") }
    }

    static func readExactly(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress.map { $0 + offset }, $0.count - offset) }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    func stop() {
        close(client)
        process.terminate()
        process.waitUntilExit()
    }
}
