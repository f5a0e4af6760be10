import Foundation
import GRDB

// MARK: - Devices

/// This install's and the other devices' registrations with each account: status, activation
/// method, last activity, and an approval the device waits for.
///
/// ```swift
/// for device in try vault.devices.all(for: account) { print(device.name, device.status) }
/// ```
public struct DeviceStore: VaultArea {
    let core: VaultCore

    /// The stable id of this install (``Vault/deviceID``), which its own registrations carry.
    public var deviceID: String { core.deviceID }

    /// Inserts or replaces a device registration (by its id).
    public func save(_ device: DeviceRegistration) throws {
        try write("saving a device") { db in try self.save(device, db) }
    }

    private func save(_ device: DeviceRegistration, _ db: Database) throws {
        let name = try self.seal(device.name, table: "devices", column: "name", account: device.account, row: device.id, db)
        let detail = try self.seal(
            device.statusReason, table: "devices", column: "status_detail", account: device.account,
            row: device.id, db)
        // Only a pending device waits on a request; any other status drops it.
        let approvalJSON =
            try device.status == .pending
            ? device.pendingApproval.map {
                String(decoding: try JSONEncoder().encode($0), as: UTF8.self)
            } : nil
        try integrity.rewrite(.devices, matching: ["registration_id": device.id], db) {
            try db.execute(
                sql: """
                    INSERT INTO devices (registration_id, account_id, device_id, name, platform, status, activation_method,
                        status_detail, created_at, updated_at, last_activity_at, approval_request)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (registration_id) DO UPDATE SET
                        device_id = excluded.device_id, name = excluded.name, platform = excluded.platform,
                        status = excluded.status, activation_method = excluded.activation_method,
                        status_detail = excluded.status_detail, updated_at = excluded.updated_at,
                        last_activity_at = excluded.last_activity_at, approval_request = excluded.approval_request
                    WHERE devices.account_id = excluded.account_id
                    """,
                arguments: [
                    device.id, device.account.rawValue, device.deviceID, name, device.platform, device.status.rawValue,
                    device.activationMethod?.rawValue, detail, device.createdAt.millisecondsSince1970,
                    device.updatedAt.millisecondsSince1970, device.lastActivityAt?.millisecondsSince1970,
                    approvalJSON,
                ])
            guard db.changesCount == 1 else {
                throw VaultError(.invalidArgument, "device registration \(device.id) belongs to another account", path: self.path)
            }
        }
    }

    /// Records the approval request a pending registration waits on (see ``PendingApproval``).
    /// Returns false, storing nothing, when the registration is no longer pending.
    public func recordPendingApproval(_ approval: PendingApproval, registration id: String) throws -> Bool {
        try write("recording an approval request") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE registration_id = ?", arguments: [id]) else {
                throw VaultError(.recordNotFound, "no device registration \(id)", path: self.path)
            }
            try self.integrity.lookedUp(row, in: .devices, by: ["registration_id": id])
            var device = try self.record(from: row, db)
            guard device.status == .pending else { return false }
            device.pendingApproval = approval
            try self.save(device, db)
            return true
        }
    }

    /// Replaces the account's roster with what the identity service lists, in one transaction:
    /// a device already stored keeps its registration id and creation time; one stored but no
    /// longer listed is kept, marked revoked with `goneReason` (never deleted); a failure stores
    /// nothing. Returns the account's devices as they now are, oldest first.
    public func sync(
        _ listed: [DeviceRegistration], for account: AccountID, goneReason: String,
        at now: Date
    ) throws -> [DeviceRegistration] {
        try write("syncing devices") { db in
            let known = try self.all(for: account, db)
            let listedIDs = Set(listed.map(\.deviceID))
            for var device in listed {
                if let existing = known.first(where: { $0.deviceID == device.deviceID }) {
                    device.id = existing.id
                    device.createdAt = existing.createdAt
                    device.pendingApproval = existing.pendingApproval  // dropped by saveDevice unless still pending
                }
                device.account = account
                try self.save(device, db)
            }
            for var gone in known where !listedIDs.contains(gone.deviceID) && gone.status != .revoked {
                gone.status = .revoked
                gone.statusReason = goneReason
                gone.updatedAt = now
                try self.save(gone, db)
            }
            return try self.all(for: account, db)
        }
    }

    /// The devices registered with an account (or with every account), oldest first.
    public func all(for account: AccountID? = nil) throws -> [DeviceRegistration] {
        try read("listing devices") { db in try self.all(for: account, db) }
    }

    private func all(for account: AccountID?, _ db: Database) throws -> [DeviceRegistration] {
        let rows: [Row]
        if let account {
            rows = try Row.fetchAll(
                db, sql: "SELECT * FROM devices WHERE account_id = ? ORDER BY created_at, registration_id",
                arguments: [account.rawValue])
        } else {
            rows = try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY created_at, registration_id")
        }
        return try rows.map { try self.record(from: $0, db) }
    }

    /// One device registration by its id.
    public func find(_ id: String) throws -> DeviceRegistration? {
        try read("reading a device") { db in
            try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE registration_id = ?", arguments: [id]).map { row in
                try self.integrity.lookedUp(row, in: .devices, by: ["registration_id": id])
                return try self.record(from: row, db)
            }
        }
    }

    private func record(from row: Row, _ db: Database) throws -> DeviceRegistration {
        try integrity.check(row, in: .devices, db)
        let plain = try Self.deviceMetadata(from: row, path: path)
        let sealedName = try row.storedIfPresent("name", table: "devices", row: plain.id, path: path, as: Data.self)
        guard let name = try open(sealedName, table: "devices", column: "name", account: plain.account, row: plain.id, db) else {
            throw VaultError(.damaged, "device \(plain.id) has no name", path: path)
        }
        let detail = try open(
            row.storedIfPresent("status_detail", table: "devices", row: plain.id, path: path, as: Data.self),
            table: "devices", column: "status_detail", account: plain.account, row: plain.id, db)
        let approval = try (row.storedIfPresent("approval_request", table: "devices", row: plain.id, path: path) as String?).map { json in
            do {
                return try JSONDecoder().decode(PendingApproval.self, from: Data(json.utf8))
            } catch {
                throw VaultError(.damaged, "device \(plain.id) has an unreadable approval request", path: path)
            }
        }
        return DeviceRegistration(
            id: plain.id, account: plain.account, deviceID: plain.deviceID, name: name, platform: plain.platform,
            status: plain.status, activationMethod: plain.activationMethod, statusReason: detail ?? plain.statusReason,
            createdAt: plain.createdAt, updatedAt: plain.updatedAt, lastActivityAt: plain.lastActivityAt,
            pendingApproval: approval)
    }

    /// The plain columns of a `devices` row; `.damaged` naming the column when one holds a
    /// value of the wrong type (a hand-edited file).
    static func deviceMetadata(from row: Row, path: String?) throws -> DeviceMetadata {
        let key = row.storedKey("registration_id")
        func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
            try row.stored(column, table: "devices", row: key, path: path)
        }
        func optional<T: DatabaseValueConvertible>(_ column: String) throws -> T? {
            try row.storedIfPresent(column, table: "devices", row: key, path: path)
        }
        let status: String = try value("status")
        let activationMethod: String? = try optional("activation_method")
        return DeviceMetadata(
            id: try value("registration_id"), account: AccountID(rawValue: try value("account_id")),
            deviceID: try value("device_id"), platform: try value("platform"),
            status: DeviceStatus(rawValue: status) ?? .revoked,
            activationMethod: activationMethod.flatMap(ActivationMethod.init(rawValue:)),
            statusReason: try optional("status_reason"),
            createdAt: try row.storedDate("created_at", table: "devices", row: key, path: path),
            updatedAt: try row.storedDate("updated_at", table: "devices", row: key, path: path),
            lastActivityAt: try row.storedDateIfPresent("last_activity_at", table: "devices", row: key, path: path))
    }
}

extension VaultCore {
    /// This vault's devices (see ``DeviceStore``).
    var devices: DeviceStore { DeviceStore(core: self) }
}
