import CSodiumBaseline
import DevGateway
import Foundation
import GRDB
import Logging
import Synchronization
import VaultCrypto
import VaultOAuth
import VaultSession
@_spi(RawWrites) import VaultStore

/// An endpoint nothing listens on: the in-process figures never refresh.
let unusedEndpoint = URL(string: "http://127.0.0.1:9/oauth/token") ?? URL(fileURLWithPath: "/")

/// The connection policy the vault uses, for the baselines' own connections ("same pragmas").
func baselineConfiguration() -> Configuration {
    var config = Configuration()
    config.busyMode = .timeout(10)
    config.prepareDatabase { db in
        try db.execute(sql: "PRAGMA secure_delete = ON; PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON; PRAGMA synchronous = FULL")
    }
    return config
}

struct Scale {
    var hotIterations = 20_000
    var coldIterations = 600
    var durableIterations = 300
    var pageIterations = 400
    var unlockIterations = 8
    var processIterations = 40
    var callers = 1000
    var bareRefreshes = 9
    var processes = 4
    var notificationSizes = [1_000, 10_000, 100_000]
    var agentIterations = 5000
    var agentClients = 64
    var agentSeconds = 10
    /// `vault devices sync`: the account's devices at the gateway (this machine included).
    var syncDevices = 1_000
    /// `vault notifications sync --all`: the two histories whose rows/s and peak RSS are compared.
    var syncNotificationSizes = [10_000, 100_000]
}

// MARK: - Token reads

func benchTokenReads(_ report: Report, dir: URL, scale: Scale, measure: Bool = true) async throws -> BenchVault {
    let bench = try makeVault(in: dir, name: "tokens", tokenEndpoint: unusedEndpoint, tokens: sampleTokens(expiresIn: 7 * 24 * 3600))
    guard measure else { return bench }
    let vault = try bench.open()
    let service = SessionService(vault: vault, oauth: OAuthClient(logger: quietLogger()), logger: quietLogger())
    let pool = try DatabasePool(path: bench.url.path, configuration: baselineConfiguration())
    defer {
        try? pool.close()
        vault.close()
    }
    let id = bench.account.rawValue
    let pointRead = {
        // A prepared statement kept by the connection, as the vault's own reads use.
        let data: Data? = try pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM tokens WHERE account_id = ?"), arguments: [id])?["access_token"]
        }
        guard data != nil else { throw BenchError("baseline row missing") }
    }
    let token = { _ = try await service.validAccessToken() }

    log("== valid access token, warm process")
    let warm = try await measurePair(
        warmup: 2000, iterations: scale.hotIterations, block: 500,
        Operation(body: token), Operation(body: pointRead))
    report.latency("valid access token, warm (vs GRDB point read)", warm, limit: 1.0)

    // Issue 34: a tool calling a second API of the same provider holds a second token, kept
    // beside the first and served as cheaply once warm.
    log("== a second resource's token, warm process")
    let files = try TokenTarget(resources: ["https://files.bench.test/"], scopes: ["files.read"])
    try vault.tokens.store(sampleTokens(expiresIn: 7 * 24 * 3600), for: bench.account, target: files)
    _ = try await service.validAccessToken()
    let targetToken = { _ = try await service.validAccessToken(target: files) }
    let second = try await measurePair(
        warmup: 2000, iterations: scale.hotIterations, block: 500,
        Operation(body: targetToken), Operation(body: pointRead))
    report.latency("a second resource's token, warm (vs GRDB point read)", second, limit: 1.0)

    // Another connection commits before every timed call: the cache must not be trusted.
    log("== valid access token after another connection committed")
    // A commit by another connection that changes no row the vault authenticates (an edit of
    // one would be tampering): it moves `data_version`, which is all the cache looks at.
    try await pool.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS bench_touch (n INTEGER); INSERT INTO bench_touch VALUES (0)") }
    let touch = { try pool.write { db in try db.execute(sql: "UPDATE bench_touch SET n = n + 1") } }
    guard sodium_init() >= 0 else { throw BenchError("sodium_init failed") }
    let sealedSize =
        try await pool.read { db in try Int.fetchOne(db, sql: "SELECT length(access_token) FROM tokens WHERE account_id = ?", arguments: [id]) } ?? 0
    let overhead = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES) + Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    let message = randomBytes(max(1, sealedSize - overhead))
    let key = randomBytes(Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES))
    let nonce = randomBytes(Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES))
    let ad = Array("vault-id/tokens/access_token/\(id)/\(id)/1".utf8)
    var ciphertext = [UInt8](repeating: 0, count: message.count + Int(crypto_aead_xchacha20poly1305_ietf_ABYTES))
    var ciphertextLength: UInt64 = 0
    crypto_aead_xchacha20poly1305_ietf_encrypt(&ciphertext, &ciphertextLength, message, UInt64(message.count), ad, UInt64(ad.count), nil, nonce, key)
    let readAndOpen = {
        try pointRead()
        var plain = [UInt8](repeating: 0, count: message.count)
        var plainLength: UInt64 = 0
        guard
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                &plain, &plainLength, nil, ciphertext, UInt64(ciphertext.count),
                ad, UInt64(ad.count), nonce, key) == 0
        else { throw BenchError("baseline open failed") }
        sodium_memzero(&plain, plain.count)
    }
    let cold = try await measurePair(
        warmup: 50, iterations: scale.coldIterations, block: 50,
        Operation(prepare: touch, body: token), Operation(prepare: touch, body: readAndOpen))
    report.latency("valid access token, vault changed by another connection (vs point read + 1 open)", cold, limit: 1.5)
    // The same for a second resource's token: its entry names the account's target tokens too.
    _ = try await service.validAccessToken(target: files)
    let targetCold = try await measurePair(
        warmup: 50, iterations: scale.coldIterations, block: 50,
        Operation(prepare: touch, body: targetToken), Operation(prepare: touch, body: readAndOpen))
    report.latency("a second resource's token, vault changed by another connection (vs point read + 1 open)", targetCold, limit: 1.5)

    log("== valid access token after another process stored a refreshed token")
    // The realistic case: another handle on the file (its own connections, keys and memo of
    // checked rows, as another process has) stores a refreshed pair before every timed call,
    // so the token row the vault reads, checks and opens is a new one each time. The baseline
    // reads the new row after the same commit.
    let other = try bench.open()
    defer { other.close() }
    var generation = try other.tokens.current(for: bench.account)?.generation
    let pair = sampleTokens(expiresIn: 7 * 24 * 3600)
    let storeRefreshed = { generation = try other.tokens.store(pair, for: bench.account, replacing: generation) }
    let refreshed = try await measurePair(
        warmup: 20, iterations: scale.coldIterations, block: 50,
        Operation(prepare: storeRefreshed, body: token), Operation(prepare: storeRefreshed, body: readAndOpen))
    report.latency("valid access token, another process stored a refreshed token (vs point read + 1 open)", refreshed, limit: 1.5)
    return bench
}

// MARK: - Durable store

func benchDurableStore(_ report: Report, dir: URL, scale: Scale) async throws {
    log("== store a refreshed token pair (synchronous=FULL)")
    let bench = try makeVault(in: dir, name: "durable", tokenEndpoint: unusedEndpoint, tokens: sampleTokens(expiresIn: 3600))
    let vault = try bench.open()
    defer { vault.close() }
    var generation = try vault.tokens.current(for: bench.account)?.generation
    let pair = sampleTokens(expiresIn: 3600)
    let store = { generation = try vault.tokens.store(pair, for: bench.account, replacing: generation) }

    let pool = try DatabasePool(path: dir.appendingPathComponent("durable-baseline.db").path, configuration: baselineConfiguration())
    defer { try? pool.close() }
    // GRDB's WAL set-up puts the writer back to NORMAL after the configuration's pragmas; the
    // vault sets FULL again on its writer, and so does the baseline.
    let synchronous = try await pool.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA synchronous = FULL")
        return try Int.fetchOne(db, sql: "PRAGMA synchronous")
    }
    guard synchronous == 2 else { throw BenchError("the baseline's writer is not at synchronous=FULL") }
    try await pool.write { db in
        try db.execute(
            sql: """
                CREATE TABLE tokens (account_id TEXT PRIMARY KEY, generation INTEGER NOT NULL, access_token BLOB NOT NULL,
                    refresh_token BLOB, id_token BLOB, token_type TEXT NOT NULL, access_expires_at INTEGER, scopes TEXT NOT NULL,
                    updated_at INTEGER NOT NULL)
                """)
    }
    var baselineGeneration: Int64 = 0
    let upsert = {
        baselineGeneration += 1
        try pool.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO tokens VALUES (?, ?, ?, ?, NULL, 'Bearer', ?, 'openid profile', ?)
                        ON CONFLICT (account_id) DO UPDATE SET generation = excluded.generation, access_token = excluded.access_token,
                            refresh_token = excluded.refresh_token, access_expires_at = excluded.access_expires_at, updated_at = excluded.updated_at
                        """
                ).execute(arguments: [
                    bench.account.rawValue, baselineGeneration, Data(pair.accessToken.utf8), Data((pair.refreshToken ?? "").utf8),
                    Int64(Date().timeIntervalSince1970 * 1000), Int64(Date().timeIntervalSince1970 * 1000),
                ])
                return .commit
            }
        }
    }
    let pairStats = try await measurePair(
        warmup: 20, iterations: scale.durableIterations, block: 25,
        Operation(body: store), Operation(body: upsert))
    let vaultOps = 1e9 / pairStats.vault.p50
    let baselineOps = 1e9 / pairStats.baseline.p50
    let ratio = vaultOps / baselineOps
    report.add(
        Figure(
            figure: "store refreshed token pair durably (vs plaintext UPSERT)", vault: vaultOps, baseline: baselineOps,
            unit: "ops/s (1/p50)", ratio: ratio, target: ">= 0.8", met: ratio >= 0.8,
            detail: "p50 \(fmt(pairStats.vault.p50 / 1000)) vs \(fmt(pairStats.baseline.p50 / 1000)) µs"))
}

// MARK: - Unlock

func benchUnlock(_ report: Report, dir: URL, scale: Scale) async throws {
    log("== unlock with the default KDF")
    let url = dir.appendingPathComponent("unlock.db")
    let passphrase = randomString(24)
    let created = try Vault.create(at: url, credential: .passphrase(passphrase), options: quietOptions())
    created.close()
    let cost = KDFParameters.interactive
    let salt = randomBytes(Int(crypto_pwhash_SALTBYTES))
    let password = Array(passphrase.utf8)
    let unlock = { try Vault.open(at: url, credential: .passphrase(passphrase), options: quietOptions()).close() }
    let pwhash = {
        var out = [UInt8](repeating: 0, count: 32)
        let rc = crypto_pwhash(
            &out, 32, passphrase, UInt64(password.count), salt,
            cost.opsLimit, Int(cost.memLimitBytes), crypto_pwhash_ALG_ARGON2ID13)
        sodium_memzero(&out, 32)
        guard rc == 0 else { throw BenchError("crypto_pwhash failed") }
    }
    let pair = try await measurePair(warmup: 1, iterations: scale.unlockIterations, block: 2, Operation(body: unlock), Operation(body: pwhash))
    let ratio = pair.vault.p50 / pair.baseline.p50
    report.add(
        Figure(
            figure: "unlock, default KDF (vs crypto_pwhash alone)", vault: pair.vault.p50 / 1e6, baseline: pair.baseline.p50 / 1e6,
            unit: "ms p50", ratio: ratio, target: "<= 1.05", met: ratio <= 1.05,
            detail: "argon2id13 ops=\(cost.opsLimit) mem=\(cost.memLimitBytes / 1_048_576) MiB; absolute \(fmt(pair.vault.p50 / 1e6)) ms"))
}

// MARK: - Whole process

func benchTokenProcess(_ report: Report, bench: BenchVault, vaultBinary: String, scale: Scale) async throws {
    log("== vault token as a whole process (key-file vault, no agent)")
    guard let sqlite = ["/usr/bin/sqlite3", "/bin/sqlite3"].first(where: FileManager.default.isExecutableFile) else {
        throw BenchError("sqlite3 CLI not found (apt-get install sqlite3)")
    }
    // As installed: the lean front as `vault`, which hands a key-file request to the full
    // command (issue 32: reported); and the full command started directly.
    let leanBinary = URL(fileURLWithPath: vaultBinary).deletingLastPathComponent().appendingPathComponent("vault-lean").path
    let tokenArgs = ["token", "--vault", bench.url.path, "--key-file", bench.keyFile.path]
    let sql = "SELECT hex(access_token) FROM tokens WHERE account_id = '\(bench.account.rawValue)'"
    for (name, binary) in [
        ("`vault token` process, key-file vault, no agent (front, handed over)", leanBinary), ("`vault-full token` process, key-file vault", vaultBinary),
    ] {
        let check = try runProcess(binary, tokenArgs)
        guard check.status == 0 else { throw BenchError("\(binary) token exited \(check.status)") }
        let pair = try await measurePair(
            warmup: 3, iterations: scale.processIterations, block: 5,
            Operation(body: {
                let r = try runProcess(binary, tokenArgs)
                guard r.status == 0 else { throw BenchError("vault token failed") }
            }),
            Operation(body: { _ = try runProcess(sqlite, [bench.url.path, sql]) }))
        let ratio = pair.vault.p50 / pair.baseline.p50
        report.add(
            Figure(
                figure: "\(name) (vs sqlite3 CLI one row)", vault: pair.vault.p50 / 1e6, baseline: pair.baseline.p50 / 1e6,
                unit: "ms p50", ratio: ratio, target: "reported", met: true,
                detail: "p99 \(fmt(pair.vault.p99 / 1e6)) vs \(fmt(pair.baseline.p99 / 1e6)) ms"))
    }
}

// MARK: - Concurrent refresh across processes

func benchConcurrentRefresh(_ report: Report, dir: URL, selfBinary: String, scale: Scale) async throws {
    log("== \(scale.callers) callers × \(scale.processes) processes, token expired")
    let gateway = try await DevGateway.start(logger: Logger(label: "gateway") { _ in SwiftLogNoOpLogHandler() })
    defer { Task { await gateway.stop() } }
    let latency = Duration.milliseconds(200)
    await gateway.setTokenLatency(latency)
    let issued = await gateway.issueGrant(subject: "refresh", clientID: "bench-cli")
    let tokens = TokenSet(
        accessToken: issued.accessToken, refreshToken: issued.refreshToken, tokenType: issued.tokenType,
        accessTokenExpiresAt: Date().addingTimeInterval(-5), scopes: ["openid", "profile"])
    let bench = try makeVault(in: dir, name: "refresh", tokenEndpoint: gateway.tokenEndpoint, tokens: tokens)

    // The baseline: what one refresh takes as a client sees it, the server's latency plus its
    // HTTP exchange, measured here with a new client (and connection) each time, as each
    // child's first request is.
    var bare: [UInt64] = []
    for _ in 0..<scale.bareRefreshes {
        let grant = await gateway.issueGrant(subject: "bare", clientID: "bench-cli")
        let client = OAuthClient(logger: quietLogger())
        let start = nowNanos()
        _ = try await client.refresh(
            refreshToken: grant.refreshToken ?? "", scope: nil, endpoint: gateway.tokenEndpoint,
            client: ClientCredentials(clientID: "bench-cli"))
        bare.append(nowNanos() - start)
    }
    let requestsBefore = await gateway.tokenRequestCount()

    var children: [(Process, Pipe, Pipe)] = []
    for _ in 0..<scale.processes {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: selfBinary)
        process.arguments = ["child-refresh", bench.url.path, bench.keyFile.path, "\(scale.callers)"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        children.append((process, input, output))
    }
    // Every child has opened the vault before any is told to start.
    var readers: [LineReader] = children.map { LineReader($0.2.fileHandleForReading) }
    for i in readers.indices { guard readers[i].next() == "ready" else { throw BenchError("a refresh child failed to start") } }
    for child in children { child.1.fileHandleForWriting.write(Data("go\n".utf8)) }
    var waits: [UInt64] = []
    var errors = 0
    for i in readers.indices {
        while let line = readers[i].next() {
            if line.hasPrefix("wait ") { waits.append(UInt64(line.dropFirst(5)) ?? 0) }
            if line.hasPrefix("error") { errors += 1 }
        }
        children[i].0.waitUntilExit()
    }
    let requests = await gateway.tokenRequestCount() - requestsBefore
    let stats = Stats(waits)
    let latencyMs = Stats(bare).p50 / 1e6
    let nominalMs = Double(latency.components.attoseconds / 1_000_000_000_000_000) + Double(latency.components.seconds) * 1000
    report.add(
        Figure(
            figure: "refresh requests, \(scale.callers) callers × \(scale.processes) processes, token expired",
            vault: Double(requests), baseline: nil, unit: "requests", ratio: nil, target: "== 1",
            met: requests == 1 && errors == 0, detail: "\(waits.count) tokens served, \(errors) errors"))
    let p99 = stats.p99 / 1e6
    report.add(
        Figure(
            figure: "p99 caller wait during that refresh (vs one bare refresh request)", vault: p99, baseline: latencyMs,
            unit: "ms", ratio: p99 / latencyMs, target: "<= latency + 10 ms", met: p99 <= latencyMs + 10 && errors == 0,
            detail: "p50 \(fmt(stats.p50 / 1e6)) ms, max \(fmt(stats.percentile(100) / 1e6)) ms; "
                + "server latency set to \(fmt(nominalMs)) ms, bare request p50 of \(bare.count), p99 \(fmt(Stats(bare).p99 / 1e6)) ms"))
}

/// The child side: opens the vault, says "ready", waits for a line, then starts every caller at once.
func childRefresh(_ arguments: [String]) async {
    guard arguments.count == 3, let callers = Int(arguments[2]) else {
        emitLine("error usage")
        return
    }
    do {
        let vault = try Vault.open(
            at: URL(fileURLWithPath: arguments[0]), credential: .keyFile(URL(fileURLWithPath: arguments[1])),
            options: quietOptions())
        // BENCH_TRACE=1: the library's debug logs on standard error, in µs since "go", to see
        // where a refresh's time goes (messages only: they hold no token).
        let logger = ProcessInfo.processInfo.environment["BENCH_TRACE"] == nil ? quietLogger() : traceLogger()
        let service = SessionService(vault: vault, oauth: OAuthClient(logger: logger), logger: logger)
        emitLine("ready")
        _ = readLine()
        traceOrigin.store(Int(nowNanos()), ordering: .relaxed)
        let lines = await withTaskGroup(of: String.self) { group in
            for _ in 0..<callers {
                group.addTask {
                    let start = nowNanos()
                    do {
                        _ = try await service.validAccessToken()
                        return "wait \(nowNanos() - start)"
                    } catch {
                        return "error \(type(of: error))"
                    }
                }
            }
            var lines: [String] = []
            for await line in group { lines.append(line) }
            return lines
        }
        emitLine(lines.joined(separator: "\n"))
        vault.close()
    } catch {
        emitLine("error \(type(of: error))")
    }
}

/// Lines from a pipe, without loading the whole output at once.
struct LineReader {
    let handle: FileHandle
    var buffer = Data()
    init(_ handle: FileHandle) { self.handle = handle }
    mutating func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty {
                guard !buffer.isEmpty else { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(chunk)
        }
    }
}

/// One write(2) to standard output, unbuffered, so the parent sees the line at once.
func emitLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// When the child was told to go (ns), for ``traceLogger()``.
let traceOrigin = Atomic<Int>(0)

/// Debug-level messages on standard error, stamped with µs since ``traceOrigin``.
func traceLogger() -> Logger {
    var logger = Logger(label: "bench") { _ in TraceHandler() }
    logger.logLevel = .debug
    return logger
}

struct TraceHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let micros = (Int(nowNanos()) - traceOrigin.load(ordering: .relaxed)) / 1000
        FileHandle.standardError.write(Data("[\(getpid()) +\(micros) µs] \(event.message)\n".utf8))
    }
}
