// Operations for the reliability suite (Tests/VaultReliabilityTests). Unlike `tokens` and
// `switch`, they start at once (no `ready`/`go` handshake): the parent kills them with SIGKILL
// at random moments, so every line is flushed as soon as it is written. Digests, never tokens.
// KEYFILE may instead be a file named `*.passphrase` holding a test passphrase.
//
//     SessionProbe VAULT KEYFILE rotate-loop N ACCOUNT...     store N rotated token sets (CAS), round robin
//         prints `storing ACCOUNT GEN SHA` before and `committed ACCOUNT GEN SHA` after each commit
//     SessionProbe VAULT KEYFILE mixed N SEED ACCOUNT...      N mixed reads, rotations, switches, notification writes
//         prints `rotated N`, `notified N`, `busy N`, `errors N`, `p99 MS`, then `done`
//     SessionProbe VAULT KEYFILE migrate SLOW_ROWS             open (and so migrate), with a slow test step 3
//         prints `migrated VERSION`
//     SessionProbe VAULT KEYFILE rotate-key BATCH             rotate the vault's keys, printing `batch DONE/TOTAL`, then `finished`
//     SessionProbe VAULT KEYFILE refresh-and-hang LEASE_MS    refresh the active account through SessionService;
//         prints `received` once the server's answer arrived and hangs before storing it
import Foundation
import Logging
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultURLSession

@_spi(RawWrites) @testable import VaultStore

/// Writes one line to standard output at once (write(2), no buffering), so a kill loses nothing printed.
func emitNow(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(1, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}

func sha(_ text: String?) -> String {
    text.map { Digest.hex(Digest.sha256(Array($0.utf8))) } ?? "none"
}

/// A random token value (never printed).
func randomToken(_ prefix: String) -> String {
    prefix + UUID().uuidString.lowercased() + UUID().uuidString.lowercased()
}

/// Runs a reliability operation; nil when `arguments` names none of them.
func runReliabilityOperation(_ arguments: [String]) async -> Int32? {
    guard arguments.count >= 4 else { return nil }
    let vaultURL = URL(fileURLWithPath: arguments[0])
    // A file named `*.passphrase` holds a (test) passphrase, for passphrase vaults such as the fixtures.
    let credentialURL = URL(fileURLWithPath: arguments[1])
    let credential: VaultCredential
    do {
        credential =
            credentialURL.pathExtension == "passphrase"
            ? try .passphrase(String(decoding: try Data(contentsOf: credentialURL), as: UTF8.self))
            : .keyFile(credentialURL)
    } catch {
        emitNow("error cannot read the credential")
        return 1
    }
    let rest = Array(arguments.dropFirst(3))
    do {
        switch arguments[2] {
        case "rotate-loop":
            try rotateLoop(vaultURL, credential, count: Int(rest[0]) ?? 1, accounts: rest.dropFirst().map(AccountID.init))
        case "mixed":
            guard rest.count >= 3 else { return 2 }
            try mixed(
                vaultURL, credential, count: Int(rest[0]) ?? 1, seed: UInt64(rest[1]) ?? 1,
                accounts: rest.dropFirst(2).map(AccountID.init))
        case "migrate":
            try migrate(vaultURL, credential, slowRows: Int(rest[0]) ?? 100_000)
        case "rotate-key":
            let vault = try Vault.open(at: vaultURL, credential: credential)
            try vault.maintenance.rotateKeys(credential: credential, batchSize: Int(rest[0]) ?? 100) { progress in
                if progress.phase == .resealing { emitNow("batch \(progress.rowsDone)/\(progress.rowsTotal)") }
            }
            emitNow("finished")
            vault.close()
        case "refresh-and-hang":
            try await refreshAndHang(vaultURL, credential, leaseMilliseconds: Int(rest[0]) ?? 1000)
        default:
            return nil
        }
        return 0
    } catch {
        emitNow("error \(kind(of: error)) \((error as? VaultError)?.code.description ?? "")")
        return 1
    }
}

// MARK: - rotate-loop

func rotateLoop(_ url: URL, _ credential: VaultCredential, count: Int, accounts: [AccountID]) throws {
    let vault = try Vault.open(at: url, credential: credential)
    defer { vault.close() }
    guard !accounts.isEmpty else { return }
    for index in 0..<count {
        let account = accounts[index % accounts.count]
        let current = try vault.tokens.current(for: account)
        let refresh = randomToken("rt_")
        let tokens = TokenSet(
            accessToken: randomToken("at_"), refreshToken: refresh, tokenType: "Bearer",
            accessTokenExpiresAt: Date().addingTimeInterval(3600), scopes: ["openid"])
        let next = (current?.generation ?? 0) + 1
        emitNow("storing \(account) \(next) \(sha(refresh))")
        let stored = try vault.tokens.store(tokens, for: account, replacing: current?.generation)
        emitNow("committed \(account) \(stored) \(sha(refresh))")
    }
}

// MARK: - mixed

/// A small deterministic generator, so a failing run can be repeated with its seed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func isBusy(_ error: any Error) -> Bool {
    let text = "\(error)".lowercased()
    return text.contains("database is locked") || text.contains("sqlite_busy") || text.contains("busy")
}

func mixed(_ url: URL, _ credential: VaultCredential, count: Int, seed: UInt64, accounts: [AccountID]) throws {
    let vault = try Vault.open(at: url, credential: credential)
    defer { vault.close() }
    var random = SplitMix(state: seed)
    var rotated = 0
    var notified = 0
    var busy = 0
    var errors = 0
    var latencies: [Double] = []
    latencies.reserveCapacity(count)
    for index in 0..<count {
        let account = accounts[Int(random.next() % UInt64(accounts.count))]
        let started = ContinuousClock.now
        do {
            switch random.next() % 10 {
            case 0..<4:
                _ = try vault.tokens.current(for: account)
                _ = try vault.accounts.activeID()
            case 4..<7:
                // Compare-and-swap: retried on a stale generation, counted once committed.
                while true {
                    let current = try vault.tokens.current(for: account)
                    let tokens = TokenSet(
                        accessToken: randomToken("at_"), refreshToken: randomToken("rt_"), tokenType: "Bearer",
                        accessTokenExpiresAt: Date().addingTimeInterval(3600), scopes: ["openid"])
                    do {
                        try vault.tokens.store(tokens, for: account, replacing: current?.generation)
                        rotated += 1
                        break
                    } catch let error as VaultError where error.code == .staleGeneration {
                        continue
                    }
                }
            case 7:
                try vault.accounts.setActive(account)
            default:
                try vault.notifications.upsert(
                    NotificationRecord(
                        uuid: UUID().uuidString.lowercased(), account: account, subject: "stress \(seed)",
                        message: "mixed workload write \(index)", actions: [NotificationAction(label: "OK", action: "ok")],
                        createdAt: Date()))
                notified += 1
            }
        } catch {
            if isBusy(error) { busy += 1 } else { errors += 1 }
            FileHandle.standardError.write(Data("mixed: \(error)\n".utf8))
        }
        let elapsed = ContinuousClock.now - started
        latencies.append(elapsed.timeInterval * 1000)
    }
    latencies.sort()
    let p99 = latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int((Double(latencies.count) * 0.99).rounded(.up)) - 1)]
    emitNow("rotated \(rotated)")
    emitNow("notified \(notified)")
    emitNow("busy \(busy)")
    emitNow("errors \(errors)")
    emitNow("p99 \(String(format: "%.2f", p99))")
    emitNow("done")
}

// MARK: - migrate

/// A test step after the shipped ones: slow enough (`rows` inserted, then indexed) to be killed inside.
func slowMigration(rows: Int) -> Migration {
    Migration(
        version: Migration.latestVersion + 1, name: "stress_slow_step",
        sql: """
            CREATE TABLE stress_filler (n INTEGER PRIMARY KEY, payload BLOB NOT NULL);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < \(rows))
                INSERT INTO stress_filler (n, payload) SELECT x, randomblob(48) FROM c;
            CREATE INDEX stress_filler_payload ON stress_filler (payload);
            """)
}

func migrate(_ url: URL, _ credential: VaultCredential, slowRows: Int) throws {
    var options = VaultOptions()
    options.migrations = Migration.embedded + [slowMigration(rows: slowRows)]
    let vault = try Vault.open(at: url, credential: credential, options: options)
    vault.close()
    // Closing checkpoints the WAL, so the file's own header holds the version.
    emitNow("migrated \(try VaultFile.inspect(url).userVersion)")
}

// MARK: - refresh-and-hang

/// Passes requests through, but once the token endpoint answered, reports it and never returns:
/// the process holds the server's rotated tokens and has not stored them when it is killed.
struct HangAfterResponse: HTTPTransport {
    let inner: any HTTPTransport
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let response = try await inner.send(request)
        emitNow("received \(response.status)")
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}

func refreshAndHang(_ url: URL, _ credential: VaultCredential, leaseMilliseconds: Int) async throws {
    let vault = try Vault.open(at: url, credential: credential)
    var configuration = SessionConfiguration()
    configuration.leaseDuration = .milliseconds(leaseMilliseconds)
    let service = SessionService(
        vault: vault,
        oauth: OAuthClient(
            transport: HangAfterResponse(inner: URLSessionTransport()),
            logger: Logger(label: "probe")),
        configuration: configuration)
    emitNow("refreshing")
    _ = try await service.validAccessToken()
    emitNow("error returned without hanging")
}
