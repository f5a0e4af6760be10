import Foundation
import GRDB
import VaultCrypto

/// What can be learned about a vault without unlocking it: the file, its schema, how it is
/// unlocked and how many records of each kind it holds. Nothing in it is secret (see the
/// README's "what someone holding only the file can learn").
///
/// ```swift
/// let facts = try Vault.inspect(at: VaultLocation.defaultURL())
/// print("schema \(facts.schemaVersion), \(facts.counts.accounts) accounts")
/// if !facts.pendingMigrations.isEmpty { print("run `vault migrate`") }
/// ```
public struct VaultInspection: Sendable, Hashable {
    /// The vault file.
    public var url: URL
    /// Bytes in the vault file itself.
    public var fileSize: Int64
    /// Bytes in its write-ahead log (`-wal`), 0 when there is none.
    public var walSize: Int64
    /// The schema version the vault is at.
    public var schemaVersion: Int
    /// The schema version this build writes.
    public var latestSchemaVersion: Int
    /// The migrations this build would apply, oldest first; empty when the vault is up to date.
    public var pendingMigrations: [SchemaStep]
    /// The migrations recorded in the vault, oldest first.
    public var appliedMigrations: [AppliedSchemaStep]
    /// How the vault is unlocked, with the key-derivation cost for a passphrase.
    public var unlockMethod: VaultUnlockMethod
    /// The vault's random id (hex).
    public var vaultID: String
    /// This install's device id.
    public var deviceID: String
    public var createdAt: Date
    /// The active account (nil: none).
    public var activeAccount: AccountID?
    /// The last recorded ``MaintenanceStore/verify(depth:progress:)`` run, nil when never.
    public var lastIntegrityCheck: IntegrityCheckRecord?
    public var counts: VaultCounts
    /// The ways in (slot 0, the header's credential, first), as the file says: not authenticated
    /// (``KeySlotStore/list()`` checks them once the vault is open).
    public var keySlots: [KeySlot] = []
    /// Refresh tokens a process with a grant watch warned are expiring (event
    /// `refresh_token_expiring`), by account: the latest warning of each account's current
    /// (active or locked) session. From the event log, not authenticated.
    public var expiringRefreshTokens: [AccountID: Date] = [:]
}

/// One schema step of this build: `Migrations/NNNN_name.sql`.
public struct SchemaStep: Sendable, Hashable, CustomStringConvertible {
    public var version: Int
    public var name: String

    public var description: String { String(format: "%04d_%@", version, name) }
}

/// A schema step recorded in a vault, with when it was applied.
public struct AppliedSchemaStep: Sendable, Hashable {
    public var step: SchemaStep
    public var appliedAt: Date
}

/// How a vault is unlocked, as its header records it.
public enum VaultUnlockMethod: Sendable, Hashable {
    /// A passphrase stretched with Argon2id at this cost.
    case passphrase(KDFParameters)
    /// A 32-byte key file.
    case keyFile
}

/// When the vault's integrity was last checked, and whether it passed.
public struct IntegrityCheckRecord: Sendable, Hashable {
    public var checkedAt: Date
    public var passed: Bool
}

/// How many records of each kind a vault holds, by state.
public struct VaultCounts: Sendable, Hashable {
    public var accounts: Int
    public var sessions: [SessionState: Int]
    public var devices: [DeviceStatus: Int]
    public var notifications: [NotificationStatus: Int]
}

// MARK: - Inspecting

extension VaultFile {
    /// See ``Vault/inspect(at:options:)``.
    static func inspect(at url: URL, options: VaultOptions = VaultOptions()) throws -> VaultInspection {
        // The real file: its -wal is next to it, not next to a link to it.
        let url = try VaultFile.realLocation(url)
        let migrator = Migrator(migrations: options.migrations)
        return try readPlain(at: url, options: options) { db in
            let path = url.path
            let pending = try migrator.pending(db, path: path)
            let applied = try migrator.applied(db, path: path)
            let userVersion = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
            guard let meta = try Row.fetchOne(db, sql: "SELECT * FROM vault_meta WHERE singleton = 1") else {
                throw VaultError(.damaged, "\(path) has no vault header row: the vault was never finished or was edited", path: path)
            }
            func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
                try meta.stored(column, table: "vault_meta", row: "1", path: path)
            }
            func optional<T: DatabaseValueConvertible>(_ column: String) throws -> T? {
                try meta.storedIfPresent(column, table: "vault_meta", row: "1", path: path)
            }
            let unlock: VaultUnlockMethod
            if try value("kek_kind") as String == "keyfile" {
                unlock = .keyFile
            } else {
                let ops: Int64 = try optional("kdf_opslimit") ?? 0
                let mem: Int64 = try optional("kdf_memlimit") ?? 0
                unlock = .passphrase(KDFParameters(opsLimit: UInt64(max(ops, 0)), memLimitBytes: UInt64(max(mem, 0))))
            }
            let checkedAt = try meta.storedDateIfPresent("last_integrity_check_at", table: "vault_meta", row: "1", path: path)
            let checkOK: Bool? = try optional("last_integrity_check_ok")
            let vaultID: Data = try value("vault_id")
            let activeAccount: String? = try optional("active_account_id")
            let createdAt = try meta.storedDate("created_at", table: "vault_meta", row: "1", path: path)
            var inspection = VaultInspection(
                url: url,
                fileSize: fileSize(path), walSize: fileSize(path + "-wal"),
                schemaVersion: max(userVersion, applied.last?.version ?? 0),
                latestSchemaVersion: migrator.latestVersion,
                pendingMigrations: pending.map { SchemaStep(version: $0.version, name: $0.name) },
                appliedMigrations: applied.map {
                    AppliedSchemaStep(step: SchemaStep(version: $0.version, name: $0.name), appliedAt: $0.appliedAt)
                },
                unlockMethod: unlock,
                vaultID: Digest.hex([UInt8](vaultID)),
                deviceID: try value("device_id"),
                createdAt: createdAt,
                activeAccount: activeAccount.map(AccountID.init(rawValue:)),
                lastIntegrityCheck: checkedAt.map { IntegrityCheckRecord(checkedAt: $0, passed: checkOK ?? false) },
                counts: try counts(db, path: path))
            // From the header row read above: no second read of it.
            let isKeyFile: Bool = if case .keyFile = unlock { true } else { false }
            inspection.keySlots = VaultKeys.keySlots(keyFile: isKeyFile, createdAt: createdAt, slots: try VaultKeys.SlotRecord.fetchAll(db, path: path))
            inspection.expiringRefreshTokens = try expiringRefreshTokens(db)
            return inspection
        }
    }

    /// The latest `refresh_token_expiring` warning of each account, told during its current
    /// session (a new sign-in brings a new refresh token); a value that does not parse is left out.
    static func expiringRefreshTokens(_ db: Database) throws -> [AccountID: Date] {
        guard try db.tableExists("events") else { return [:] }
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT e.account_id AS account, json_extract(e.data, '$.expires_at') AS expires_at
                FROM events e
                WHERE e.kind = 'refresh_token_expiring' AND json_valid(e.data)
                  AND e.seq = (SELECT max(seq) FROM events WHERE kind = 'refresh_token_expiring' AND account_id = e.account_id)
                  AND e.at >= (SELECT max(started_at) FROM sessions WHERE account_id = e.account_id AND state IN ('active', 'locked'))
                """)
        var expiring: [AccountID: Date] = [:]
        for row in rows {
            guard let account = row["account"] as String?, let text = row["expires_at"] as String?, let milliseconds = Int64(text) else { continue }
            expiring[AccountID(rawValue: account)] = Date(millisecondsSince1970: milliseconds)
        }
        return expiring
    }

    /// How many accounts, and sessions, devices and notifications in each state. A state column
    /// holding something other than text (a hand-edited file) is `.damaged`, naming a row that
    /// holds it; a text state this build does not know is not counted.
    static func counts(_ db: Database, path: String?) throws -> VaultCounts {
        func grouped<State: RawRepresentable & Hashable>(
            _ table: String, _ column: String, key: String,
            as: State.Type
        ) throws -> [State: Int]
        where State.RawValue == String {
            var result: [State: Int] = [:]
            let sql = "SELECT \(column), count(*) AS n, min(\(key)) AS example FROM \(table) GROUP BY \(column)"
            for row in try Row.fetchAll(db, sql: sql) {
                let example = row.storedKey("example")
                let state = try row.stored(column, table: table, row: example, path: path, as: String.self)
                let count = try row.stored("n", table: table, row: example, path: path, as: Int.self)
                if let state = State(rawValue: state) { result[state, default: 0] += count }
            }
            return result
        }
        return VaultCounts(
            accounts: try Int.fetchOne(db, sql: "SELECT count(*) FROM accounts") ?? 0,
            sessions: try grouped("sessions", "state", key: "session_id", as: SessionState.self),
            devices: try grouped("devices", "status", key: "registration_id", as: DeviceStatus.self),
            notifications: try grouped("notifications", "status", key: "uuid", as: NotificationStatus.self))
    }

    /// Runs `body` in a read transaction on a read-only connection to a vault file that passed
    /// the same checks as ``open(at:credential:options:)`` (header, location, mode, application
    /// id, schema not newer than this build).
    static func readPlain<T>(at url: URL, options: VaultOptions, _ body: (Database) throws -> T) throws -> T {
        let url = try VaultFile.checkedLocation(url)
        let path = url.path
        let migrator = Migrator(migrations: options.migrations)
        return try VaultConnection.withReadOnlyQueue(url, options: options) { queue in
            try queue.read { db in
                try VaultFile.checkApplicationID(db, path: path)
                _ = try migrator.pending(db, path: path)
                return try body(db)
            }
        }
    }

    private static func fileSize(_ path: String) -> Int64 {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return Int64(info.st_size)
    }
}
