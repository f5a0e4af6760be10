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
    /// Why the device has its status, in a vault of schema 1 or 2 not yet opened with the key;
    /// nil since (the reason is sealed: see ``DeviceRegistration/statusReason``).
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

extension VaultFile {
    /// See ``Vault/metadata(at:options:includeNotifications:)``.
    static func metadata(
        at url: URL, options: VaultOptions = VaultOptions(),
        includeNotifications: Bool = true
    ) throws -> VaultMetadata {
        let inspection = try inspect(at: url, options: options)
        let path = url.path
        return try readPlain(at: url, options: options) { db in
            let hasPolicies = try db.tableExists("session_policies")
            let hasRefreshState = try db.tableExists("refresh_state")
            let accounts = try Row.fetchAll(db, sql: "SELECT * FROM accounts ORDER BY created_at, rowid").map { row in
                try accountMetadata(from: row, hasPolicies: hasPolicies, hasRefreshState: hasRefreshState, db, path: path)
            }
            let sessions = try Row.fetchAll(db, sql: "SELECT * FROM sessions ORDER BY session_id DESC").map { try SessionStore.session(from: $0, path: path) }
            let devices = try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY created_at, registration_id").map {
                try DeviceStore.deviceMetadata(from: $0, path: path)
            }
            let notifications =
                !includeNotifications
                ? []
                : try Row.fetchAll(
                    db, sql: "SELECT * FROM notifications ORDER BY created_at DESC, seq DESC"
                ).map { try notificationMetadata(from: $0, path: path) }
            return VaultMetadata(
                inspection: inspection, accounts: accounts, sessions: sessions, devices: devices,
                notifications: notifications)
        }
    }

    private static func accountMetadata(
        from row: Row, hasPolicies: Bool, hasRefreshState: Bool,
        _ db: Database, path: String
    ) throws -> AccountMetadata {
        let key = row.storedKey("account_id")
        func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
            try row.stored(column, table: "accounts", row: key, path: path)
        }
        let id = AccountID(rawValue: try value("account_id"))
        let scopes: String = try value("scopes")
        let tokenEndpoint: String = try value("token_endpoint")
        let revocationEndpoint: String? = try row.storedIfPresent("revocation_endpoint", table: "accounts", row: key, path: path)
        // Schema 14's methods are named in client_auth_method (absent before it, NULL for the others).
        let clientAuth: String =
            try row.storedIfPresent("client_auth_method", table: "accounts", row: key, path: path) ?? value("client_auth")
        let tokens = try Row.fetchOne(db, sql: "SELECT * FROM tokens WHERE account_id = ?", arguments: [id.rawValue])
            .map { try tokenMetadata(from: $0, account: id, path: path) }
        return AccountMetadata(
            id: id, issuer: try value("issuer"), subject: try value("subject"),
            client: OAuthClientSettings(
                tokenEndpoint: URL(string: tokenEndpoint) ?? URL(fileURLWithPath: "/"),
                revocationEndpoint: revocationEndpoint.flatMap(URL.init(string:)),
                clientID: try value("client_id"),
                authentication: ClientAuthentication(rawValue: clientAuth) ?? .none,
                scopes: scopes.split(separator: " ").map(String.init)),
            hasLabel: row.holdsValue("label"), hasEmail: row.holdsValue("email"),
            hasClientSecret: row.holdsValue("client_secret"),
            createdAt: try row.storedDate("created_at", table: "accounts", row: key, path: path),
            tokens: tokens,
            policy: hasPolicies ? try SessionStore.storedPolicy(for: id, db, path: path) : nil,
            refresh: hasRefreshState ? try LeaseStore.storedState(for: id, db, path: path) : nil)
    }

    static func tokenMetadata(from row: Row, account: AccountID, path: String?) throws -> TokenMetadata {
        let key = account.rawValue
        let scopes: String = try row.stored("scopes", table: "tokens", row: key, path: path)
        return TokenMetadata(
            account: account, generation: try row.stored("generation", table: "tokens", row: key, path: path),
            hasRefreshToken: row.holdsValue("refresh_token"), hasIDToken: row.holdsValue("id_token"),
            tokenType: try row.stored("token_type", table: "tokens", row: key, path: path),
            accessTokenExpiresAt: try row.storedDateIfPresent("access_expires_at", table: "tokens", row: key, path: path),
            scopes: scopes.split(separator: " ").map(String.init),
            updatedAt: try row.storedDate("updated_at", table: "tokens", row: key, path: path))
    }

    private static func notificationMetadata(from row: Row, path: String?) throws -> NotificationMetadata {
        let key = row.storedKey("uuid")
        func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
            try row.stored(column, table: "notifications", row: key, path: path)
        }
        func date(_ column: String) throws -> Date? {
            try row.storedDateIfPresent(column, table: "notifications", row: key, path: path)
        }
        let status: String = try value("status")
        return NotificationMetadata(
            uuid: try value("uuid"), account: AccountID(rawValue: try value("account_id")),
            createdAt: try row.storedDate("created_at", table: "notifications", row: key, path: path),
            expiresAt: try date("expires_at"),
            status: NotificationStatus(rawValue: status) ?? .dismissed,
            answered: row.holdsValue("action_taken"),
            answeredAt: try date("answered_at"),
            answeredByDevice: try row.storedIfPresent("answered_by_device", table: "notifications", row: key, path: path))
    }
}
