import Foundation
import GRDB

// MARK: - Devices

extension Vault {
    /// Inserts or replaces a device registration (by its id).
    public func saveDevice(_ device: DeviceRegistration) throws {
        try write("saving a device") { db in
            let name = try self.seal(device.name, table: "devices", column: "name", account: device.account, row: device.id, db)
            try db.execute(
                sql: """
                    INSERT INTO devices (registration_id, account_id, device_id, name, platform, status, activation_method,
                        status_reason, created_at, updated_at, last_activity_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (registration_id) DO UPDATE SET
                        device_id = excluded.device_id, name = excluded.name, platform = excluded.platform,
                        status = excluded.status, activation_method = excluded.activation_method,
                        status_reason = excluded.status_reason, updated_at = excluded.updated_at,
                        last_activity_at = excluded.last_activity_at
                    WHERE devices.account_id = excluded.account_id
                    """,
                arguments: [
                    device.id, device.account.rawValue, device.deviceID, name, device.platform, device.status.rawValue,
                    device.activationMethod?.rawValue, device.statusReason, device.createdAt.millisecondsSince1970,
                    device.updatedAt.millisecondsSince1970, device.lastActivityAt?.millisecondsSince1970,
                ])
            guard db.changesCount == 1 else {
                throw VaultError(.invalidArgument, "device registration \(device.id) belongs to another account", path: self.path)
            }
        }
    }

    /// The devices registered with an account (or with every account), oldest first.
    public func devices(for account: AccountID? = nil) throws -> [DeviceRegistration] {
        try read("listing devices") { db in
            let rows: [Row]
            if let account {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM devices WHERE account_id = ? ORDER BY created_at, registration_id",
                                        arguments: [account.rawValue])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY created_at, registration_id")
            }
            return try rows.map { try self.device(from: $0, db) }
        }
    }

    /// One device registration by its id.
    public func device(_ id: String) throws -> DeviceRegistration? {
        try read("reading a device") { db in
            try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE registration_id = ?", arguments: [id]).map { try self.device(from: $0, db) }
        }
    }

    private func device(from row: Row, _ db: Database) throws -> DeviceRegistration {
        let account = AccountID(rawValue: row["account_id"])
        let id: String = row["registration_id"]
        guard let name = try open(row["name"], table: "devices", column: "name", account: account, row: id, db) else {
            throw VaultError(.damaged, "device \(id) has no name", path: path)
        }
        return DeviceRegistration(
            id: id, account: account, deviceID: row["device_id"], name: name, platform: row["platform"],
            status: DeviceStatus(rawValue: row["status"]) ?? .revoked,
            activationMethod: (row["activation_method"] as String?).flatMap(ActivationMethod.init(rawValue:)),
            statusReason: row["status_reason"],
            createdAt: Date(millisecondsSince1970: row["created_at"]),
            updatedAt: Date(millisecondsSince1970: row["updated_at"]),
            lastActivityAt: (row["last_activity_at"] as Int64?).map(Date.init(millisecondsSince1970:)))
    }
}
