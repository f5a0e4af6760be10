import Foundation
import GRDB
import Testing

@testable import VaultStore

/// A row of the file as stored, and the MAC `integrity` makes for it now.
struct RemadeMAC {
    var row: String
    var stored: [UInt8]
    var made: [UInt8]
}

/// Every row of `tables` in the file at `url`, read on a connection of its own, with the MAC this
/// build makes for it again at the counter it carries. `forgetting`: with nothing remembered
/// (``VerifiedRows``), so every column tag is hashed again.
func remadeMACs(_ url: URL, tables: [AuthenticatedTable], integrity: RowIntegrity, forgetting: Bool = false) throws -> [RemadeMAC] {
    let queue = try DatabaseQueue(path: url.path)
    defer { try? queue.close() }
    return try queue.read { db in
        var remade: [RemadeMAC] = []
        for table in tables {
            let statement = try db.makeStatement(sql: "SELECT * FROM \(table.name)")
            let layout = RowIntegrity.layout(of: statement, in: table)
            let cursor = try DatabaseValue.fetchCursor(statement)
            while try cursor.next() != nil {
                let values = StoredRow(current: statement)
                let name = "\(table.name) row \(layout.name(of: values))"
                let stored = try #require(RowIntegrity.storedMAC(values, layout: layout), "\(name)")
                let counter = try #require(stored.counter, "\(name): a format-2 MAC")
                let authenticator = try #require(integrity.keyring.rowAuthenticator(id: stored.keyID))
                if forgetting { integrity.keyring.verifiedRows.removeAll() }
                let made = try integrity.mac(values, layout: layout, table: table, counter: counter, authenticator)
                remade.append(RemadeMAC(row: name, stored: values.blob(at: layout.macIndex).map { [UInt8]($0) } ?? [], made: made))
            }
        }
        return remade
    }
}
