import Foundation
import GRDB

/// Everything a vault holds except its sealed values: read without a credential, so it can
/// be taken from a vault whose sealed values no longer open, for a support ticket.
///
/// No token, client secret, label, e-mail, device name, notification text or action is in
/// it; only whether each is present.
///
/// ```swift
/// let metadata = try Vault.metadata(at: url)
/// for account in metadata.accounts {
///     print(account.id, account.subject, account.tokens?.accessTokenExpiresAt as Any)
/// }
/// ```
public struct VaultMetadata: Sendable, Hashable {
    public var inspection: VaultInspection
    public var accounts: [AccountMetadata]
    /// Every session, newest first.
    public var sessions: [SessionRecord]
    public var devices: [DeviceMetadata]
    /// Every notification, newest first (empty when not asked for).
    public var notifications: [NotificationMetadata]
}

/// An account without its sealed fields.
public struct AccountMetadata: Sendable, Hashable, Identifiable {
    public var id: AccountID
    public var issuer: String
    public var subject: String
    public var client: OAuthClientSettings
    public var hasLabel: Bool
    public var hasEmail: Bool
    public var hasClientSecret: Bool
    public var createdAt: Date
    /// Presence and expiry of its tokens; nil when it has none.
    public var tokens: TokenMetadata?
    /// The stored session policy; nil when none is stored (or the schema predates policies).
    public var policy: SessionPolicy?
    /// The shared refresh bookkeeping; nil when none is stored.
    public var refresh: RefreshState?
}

/// A device registration without its sealed name.
public struct DeviceMetadata: Sendable, Hashable, Identifiable {
    public var id: String
    public var account: AccountID
    public var deviceID: String
    public var platform: String
    public var status: DeviceStatus
    public var activationMethod: ActivationMethod?
    public var statusReason: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var lastActivityAt: Date?
}

/// A notification without its sealed subject, message, actions and answer.
public struct NotificationMetadata: Sendable, Hashable, Identifiable {
    public var id: String { uuid }
    public var uuid: String
    public var account: AccountID
    public var createdAt: Date
    public var expiresAt: Date?
    public var status: NotificationStatus
    public var answered: Bool
    public var answeredAt: Date?
    public var answeredByDevice: String?
}

// MARK: - Reading

extension Vault {
    /// Reads every plain record of the vault at `url` on a read-only connection, without a
    /// credential. Writes nothing. `includeNotifications: false` skips the notification history.
    public static func metadata(at url: URL, options: VaultOptions = VaultOptions(),
                                includeNotifications: Bool = true) throws -> VaultMetadata {
        let inspection = try inspect(at: url, options: options)
        return try readPlain(at: url, options: options) { db in
            let hasPolicies = try db.tableExists("session_policies")
            let hasRefreshState = try db.tableExists("refresh_state")
            let accounts = try Row.fetchAll(db, sql: "SELECT * FROM accounts ORDER BY created_at, rowid").map { row in
                let id = AccountID(rawValue: row["account_id"])
                let scopes: String = row["scopes"]
                let tokens = try Row.fetchOne(db, sql: "SELECT * FROM tokens WHERE account_id = ?", arguments: [id.rawValue])
                    .map { tokenMetadata(from: $0, account: id) }
                return AccountMetadata(
                    id: id, issuer: row["issuer"], subject: row["subject"],
                    client: OAuthClientSettings(
                        tokenEndpoint: URL(string: row["token_endpoint"]) ?? URL(fileURLWithPath: "/"),
                        revocationEndpoint: (row["revocation_endpoint"] as String?).flatMap(URL.init(string:)),
                        clientID: row["client_id"],
                        authentication: ClientAuthentication(rawValue: row["client_auth"]) ?? .none,
                        scopes: scopes.split(separator: " ").map(String.init)),
                    hasLabel: (row["label"] as Data?) != nil, hasEmail: (row["email"] as Data?) != nil,
                    hasClientSecret: (row["client_secret"] as Data?) != nil,
                    createdAt: Date(millisecondsSince1970: row["created_at"]),
                    tokens: tokens,
                    policy: hasPolicies ? try storedPolicy(for: id, db) : nil,
                    refresh: hasRefreshState ? try storedRefreshState(for: id, db) : nil)
            }
            let sessions = try Row.fetchAll(db, sql: "SELECT * FROM sessions ORDER BY session_id DESC").map { try session(from: $0, path: url.path) }
            let devices = try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY created_at, registration_id").map { row in
                DeviceMetadata(
                    id: row["registration_id"], account: AccountID(rawValue: row["account_id"]), deviceID: row["device_id"],
                    platform: row["platform"], status: DeviceStatus(rawValue: row["status"]) ?? .revoked,
                    activationMethod: (row["activation_method"] as String?).flatMap(ActivationMethod.init(rawValue:)),
                    statusReason: row["status_reason"],
                    createdAt: Date(millisecondsSince1970: row["created_at"]),
                    updatedAt: Date(millisecondsSince1970: row["updated_at"]),
                    lastActivityAt: (row["last_activity_at"] as Int64?).map(Date.init(millisecondsSince1970:)))
            }
            let notifications = !includeNotifications ? [] : try Row.fetchAll(
                db, sql: "SELECT * FROM notifications ORDER BY created_at DESC, seq DESC"
            ).map { row in
                NotificationMetadata(
                    uuid: row["uuid"], account: AccountID(rawValue: row["account_id"]),
                    createdAt: Date(millisecondsSince1970: row["created_at"]),
                    expiresAt: (row["expires_at"] as Int64?).map(Date.init(millisecondsSince1970:)),
                    status: NotificationStatus(rawValue: row["status"]) ?? .dismissed,
                    answered: (row["action_taken"] as Data?) != nil,
                    answeredAt: (row["answered_at"] as Int64?).map(Date.init(millisecondsSince1970:)),
                    answeredByDevice: row["answered_by_device"])
            }
            return VaultMetadata(inspection: inspection, accounts: accounts, sessions: sessions, devices: devices,
                                 notifications: notifications)
        }
    }

    static func tokenMetadata(from row: Row, account: AccountID) -> TokenMetadata {
        let scopes: String = row["scopes"]
        return TokenMetadata(
            account: account, generation: row["generation"],
            hasRefreshToken: (row["refresh_token"] as Data?) != nil, hasIDToken: (row["id_token"] as Data?) != nil,
            tokenType: row["token_type"],
            accessTokenExpiresAt: (row["access_expires_at"] as Int64?).map(Date.init(millisecondsSince1970:)),
            scopes: scopes.split(separator: " ").map(String.init),
            updatedAt: Date(millisecondsSince1970: row["updated_at"]))
    }

    private static func storedPolicy(for account: AccountID, _ db: Database) throws -> SessionPolicy? {
        try Row.fetchOne(db, sql: "SELECT * FROM session_policies WHERE account_id = ?", arguments: [account.rawValue]).map { row in
            SessionPolicy(
                idleTimeout: (row["idle_timeout_ms"] as Int64?).map { .milliseconds($0) },
                warningBefore: .milliseconds(row["warning_ms"] as Int64),
                maxExtensions: row["max_extensions"],
                absoluteLifetime: .milliseconds(row["absolute_lifetime_ms"] as Int64),
                backgroundTimeout: (row["background_timeout_ms"] as Int64?).map { .milliseconds($0) },
                idleAction: SessionPolicy.IdleAction(rawValue: row["idle_action"]) ?? .lock)
        }
    }

    private static func storedRefreshState(for account: AccountID, _ db: Database) throws -> RefreshState? {
        try Row.fetchOne(db, sql: "SELECT * FROM refresh_state WHERE account_id = ?", arguments: [account.rawValue]).map { row in
            func date(_ column: String) -> Date? { (row[column] as Int64?).map(Date.init(millisecondsSince1970:)) }
            return RefreshState(
                leaseHolder: row["lease_holder"], leaseGeneration: row["lease_generation"], leaseExpiresAt: date("lease_expires_at"),
                failures: row["failures"], nextAttemptAt: date("next_attempt_at"), lastFailure: row["last_failure"],
                lastFailureAt: date("last_failure_at"), interruptedRefreshes: row["interrupted_refreshes"])
        }
    }
}
