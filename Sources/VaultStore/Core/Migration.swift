import VaultCrypto

/// One forward-only schema step from `Migrations/NNNN_name.sql`, embedded at build time.
struct Migration: Sendable, Hashable {
    var version: Int
    var name: String
    var sql: String

    /// SHA-256 of the SQL text, recorded when the migration is applied so a later edit is noticed.
    var checksum: String { Digest.hex(Digest.sha256(Array(sql.utf8))) }

    /// The schema version this build writes.
    static var latestVersion: Int { embedded.last?.version ?? 0 }
}
