import Foundation
import GRDB
import Logging
import VaultCrypto
import VaultSession
import VaultStore

// MARK: - Vaults for the benchmarks

/// A key-file vault in the run's temp directory, with one signed-in account.
struct BenchVault {
    let url: URL
    let keyFile: URL
    let account: AccountID

    var credential: VaultCredential { .keyFile(keyFile) }
    func open() throws -> Vault { try Vault.open(at: url, credential: credential, options: quietOptions()) }
}

/// The library's logs are not part of a measurement (and stay off the table's output).
func quietLogger() -> Logger { Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() } }

func quietOptions() -> VaultOptions {
    var options = VaultOptions()
    options.logger = quietLogger()
    return options
}

func randomString(_ count: Int) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    var generator = SystemRandomNumberGenerator()
    return String((0..<count).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
}

func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

/// A realistic pair: an ~800-character JWT-like access token and a 64-character refresh token.
func sampleTokens(expiresIn seconds: TimeInterval) -> TokenSet {
    TokenSet(
        accessToken: "eyJ" + randomString(797), refreshToken: randomString(64), tokenType: "Bearer",
        accessTokenExpiresAt: Date().addingTimeInterval(seconds), scopes: ["openid", "profile"])
}

/// Sessions that never idle out during a run.
let benchPolicy = SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(24 * 3600))

func makeVault(
    in dir: URL, name: String, tokenEndpoint: URL,
    clientID: String = "bench-cli", tokens: TokenSet
) throws -> BenchVault {
    let keyFile = dir.appendingPathComponent("\(name).key")
    guard
        FileManager.default.createFile(
            atPath: keyFile.path, contents: Data(randomBytes(32)),
            attributes: [.posixPermissions: 0o600])
    else {
        throw BenchError("cannot write \(keyFile.path)")
    }
    let url = dir.appendingPathComponent("\(name).db")
    let vault = try Vault.create(at: url, credential: .keyFile(keyFile), options: quietOptions())
    defer { vault.close() }
    let record = try vault.accounts.signIn(
        NewAccount(
            issuer: "https://id.bench.test", subject: name, label: "Bench \(name)",
            client: OAuthClientSettings(tokenEndpoint: tokenEndpoint, clientID: clientID)),
        tokens: tokens, policy: benchPolicy)
    return BenchVault(url: url, keyFile: keyFile, account: record.account.id)
}

/// Adds `count` notifications, newest last, in large transactions (one per chunk).
func fillNotifications(_ bench: BenchVault, count: Int) throws {
    let vault = try bench.open()
    defer { vault.close() }
    try fillNotifications(vault, account: bench.account, count: count)
}

/// Adds `count` notifications of `account` to an open vault, newest last; their uuids are
/// `PREFIX-0000-4000-8000-<12-digit index>` (`uuidPrefix`: 8 hex digits).
func fillNotifications(_ vault: Vault, account: AccountID, count: Int, uuidPrefix: String = "00000000") throws {
    let base = Date(timeIntervalSince1970: 1_700_000_000)
    let actions = [
        NotificationAction(label: "Approve", action: "approve", authLevel: "high"),
        NotificationAction(label: "Deny", action: "deny"),
    ]
    let subject = "Sign-in request from a new device"
    let message = "A device named Work laptop (Linux, Berlin) asks to sign in to your account. Approve it only if it was you."
    var done = 0
    let chunk = 50_000
    while done < count {
        let n = min(chunk, count - done)
        let records = (done..<(done + n)).map { i in
            NotificationRecord(
                uuid: uuidPrefix + String(format: "-0000-4000-8000-%012d", i), account: account,
                subject: subject, message: message, actions: actions,
                createdAt: base.addingTimeInterval(Double(i)), expiresAt: base.addingTimeInterval(Double(i) + 300))
        }
        try vault.notifications.upsert(records)
        done += n
    }
}
