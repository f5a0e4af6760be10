import Foundation
import GRDB
import Logging

/// What ``AccountStore/upgradeGuest(_:to:)`` did.
public struct GuestUpgrade: Sendable, Hashable {
    public var guest: AccountID
    public var registered: AccountID
    /// Device registrations, notifications and event-log entries now the registered account's.
    public var devicesMoved: Int
    public var notificationsMoved: Int
    public var eventsMoved: Int
    /// The guest's registrations of a device the registered account already had registered,
    /// and notifications it already held: the registered account's own rows are kept.
    public var duplicatesDropped: Int
    /// Whether the guest's session was open and is now ended with reason `upgraded`.
    public var endedSession: Bool
    /// The guest's tokens, removed from the vault, for the caller to revoke at the provider.
    package var guestTokens: TokenSet?
}

extension AccountStore {
    /// Hands a guest account over to a registered one, in one transaction: the guest's device
    /// registrations, notifications and event history become the registered account's (every
    /// sealed value opened with the guest's key and sealed again with the registered account's,
    /// every row checked against its MAC before it is moved and authenticated again after), the
    /// guest's tokens are removed, its open session ends with reason `upgraded`, and the guest
    /// is marked as upgraded to the registered account. A crash leaves all of it or none.
    ///
    /// Throws `.invalidArgument` when `guest` is not a guest, or is the registered account.
    public func upgradeGuest(_ guest: AccountID, to registered: AccountID) throws -> GuestUpgrade {
        try upgradeGuest(guest, to: registered, recording: nil)
    }

    /// The same, with the events that describe the upgrade written in its transaction.
    package func upgradeGuest(_ guest: AccountID, to registered: AccountID, recording: EventRecording<GuestUpgrade>?) throws -> GuestUpgrade {
        let now = Date(millisecondsSince1970: clock.now().millisecondsSince1970)
        return try write("upgrading a guest account", recording: recording) { db in
            guard let guestRow = try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [guest.rawValue]) else {
                throw VaultError(.notFound, "no account \(guest) in this vault", path: self.path)
            }
            let guestAccount = try self.record(from: guestRow, db)
            guard guestAccount.kind == .guest, guest != registered else {
                throw VaultError(.invalidArgument, "account \(guest) is not a guest account", path: self.path)
            }
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM accounts WHERE account_id = ?", arguments: [registered.rawValue]) ?? false else {
                throw VaultError(.notFound, "no account \(registered) in this vault", path: self.path)
            }
            let targetKey = try self.dataKey(for: registered, db)
            var upgrade = GuestUpgrade(
                guest: guest, registered: registered, devicesMoved: 0, notificationsMoved: 0,
                eventsMoved: 0, duplicatesDropped: 0, endedSession: false)

            for (table, sealed, moved) in [
                (AuthenticatedTable.devices, "devices", \GuestUpgrade.devicesMoved),
                (.notifications, "notifications", \.notificationsMoved),
                (.events, "events", \.eventsMoved),
            ] {
                guard let columns = SealedColumns.all.first(where: { $0.table == sealed }) else { continue }
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM \(table.name) WHERE account_id = ?", arguments: [guest.rawValue])
                for row in rows {
                    let rowid = row[table.keyColumn] as DatabaseValue
                    let key = row.storedKey(columns.rowColumn)
                    if try self.isDuplicate(row, table: table.name, for: registered, db) {
                        try self.integrity.check(row, in: table, db)
                        try self.integrity.delete(from: table, where: "\(table.keyColumn) = ?", [rowid], db)
                        upgrade.duplicatesDropped += 1
                        continue
                    }
                    var assignments = ["account_id = ?"]
                    var arguments: [(any DatabaseValueConvertible)?] = [registered.rawValue]
                    for column in columns.columns {
                        guard let blob = try row.storedIfPresent(column, table: table.name, row: key, path: self.path, as: Data.self) else { continue }
                        guard let plain = try self.open(blob, table: table.name, column: column, account: guest, row: key, db) else { continue }
                        assignments.append("\(column) = ?")
                        arguments.append(
                            try self.seal(
                                plain, with: targetKey, table: table.name, column: column,
                                account: registered, row: key))
                    }
                    // `rewrite` checks the row before it moves: one changed without the key is
                    // never given a fresh MAC (and its sealed values would not open anyway).
                    try self.integrity.rewrite(table, where: "\(table.keyColumn) = ?", [rowid], db) {
                        try db.execute(
                            sql: "UPDATE \(table.name) SET \(assignments.joined(separator: ", ")) WHERE \(table.keyColumn) = ?",
                            arguments: StatementArguments(arguments + [rowid]))
                    }
                    upgrade[keyPath: moved] += 1
                }
            }

            upgrade.guestTokens = (try? core.tokens.current(for: guest, db))?.map(\.tokens) ?? nil
            try core.tokens.wipe(for: guest, db)
            try db.execute(sql: "DELETE FROM refresh_state WHERE account_id = ?", arguments: [guest.rawValue])
            try self.integrity.removed(.refreshState, account: guest.rawValue, db)
            upgrade.endedSession = try core.sessions.endOpen(of: guest, reason: "upgraded", at: now, db)
            try self.integrity.rewrite(.accounts, matching: ["account_id": guest.rawValue], db) {
                try db.execute(
                    sql: "UPDATE accounts SET upgraded_to = ? WHERE account_id = ?",
                    arguments: [registered.rawValue, guest.rawValue])
            }
            try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
                try db.execute(
                    sql: "UPDATE vault_meta SET active_account_id = ? WHERE singleton = 1 AND active_account_id = ?",
                    arguments: [registered.rawValue, guest.rawValue])
            }
            self.logger.info(
                "guest account upgraded",
                metadata: [
                    "account": "\(guest)", "registered": "\(registered)", "devices": "\(upgrade.devicesMoved)",
                    "notifications": "\(upgrade.notificationsMoved)", "events": "\(upgrade.eventsMoved)",
                ])
            return upgrade
        }
    }

    /// Whether the registered account already holds this device registration or notification.
    private func isDuplicate(_ row: Row, table: String, for registered: AccountID, _ db: Database) throws -> Bool {
        switch table {
        case "devices":
            let device: String = try row.stored("device_id", table: table, row: row.storedKey("registration_id"), path: path)
            return try Bool.fetchOne(
                db, sql: "SELECT 1 FROM devices WHERE account_id = ? AND device_id = ?",
                arguments: [registered.rawValue, device]) ?? false
        case "notifications":
            let uuid: String = try row.stored("uuid", table: table, row: row.storedKey("uuid"), path: path)
            return try Bool.fetchOne(
                db, sql: "SELECT 1 FROM notifications WHERE account_id = ? AND uuid = ?",
                arguments: [registered.rawValue, uuid]) ?? false
        default:
            return false
        }
    }
}
