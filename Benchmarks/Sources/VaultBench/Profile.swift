import Foundation
import GRDB
import Logging
import VaultOAuth
import VaultSession
import VaultStore

/// `VaultBench profile WHAT N`: a small loop to run under `valgrind --tool=callgrind` when a
/// target is missed (instruction counts are repeatable on noisy machines). WHAT is `cold`
/// (token after another connection committed), `store` (durable token store) or `page`
/// (first notification page of 50 out of 1000).
func profileLoop(_ arguments: [String]) async throws {
    guard arguments.count == 2, let iterations = Int(arguments[1]) else { throw BenchError("usage: profile cold|store|page N") }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("credentialvault-profile-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(at: dir) }
    let bench = try makeVault(in: dir, name: "profile", tokenEndpoint: unusedEndpoint, tokens: sampleTokens(expiresIn: 7 * 24 * 3600))
    let vault = try bench.open()
    defer { vault.close() }
    switch arguments[0] {
    case "cold":
        let service = SessionService(vault: vault, oauth: OAuthClient(logger: quietLogger()), logger: quietLogger())
        let pool = try DatabasePool(path: bench.url.path, configuration: baselineConfiguration())
        defer { try? pool.close() }
        for _ in 0..<iterations {
            try await pool.write { db in try db.execute(sql: "UPDATE tokens SET updated_at = updated_at + 1") }
            _ = try await service.validAccessToken()
        }
    case "store":
        var generation = try vault.tokens(for: bench.account)?.generation
        let pair = sampleTokens(expiresIn: 3600)
        for _ in 0..<iterations { generation = try vault.storeTokens(pair, for: bench.account, replacing: generation) }
    case "page":
        try fillNotifications(bench, count: 1000)
        for _ in 0..<iterations { _ = try vault.notifications(NotificationQuery(limit: 50)) }
    default:
        throw BenchError("unknown profile \(arguments[0])")
    }
}
