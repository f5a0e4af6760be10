import Foundation
import GRDB

/// What ``MaintenanceStore/acceptCurrentState(origin:)`` did.
public struct RepairReport: Sendable, Hashable {
    /// What disagreed with the header before (rows deleted, put back, or written after it),
    /// each by table and row or account; empty when the vault already committed to its rows.
    public var accepted: [DamagedValue]
    /// Rows authenticated again.
    public var rowsAuthenticated: Int
    /// The write counter the vault now commits to its rows at.
    public var writeCounter: UInt64
}

extension MaintenanceStore {
    /// Makes the vault commit to its rows as they are now (`vault repair --accept-current`):
    /// for a vault whose header disagrees with its rows after a crash or a bug, when the file
    /// as it is must be kept. Every row is checked against its MAC first: a row changed without
    /// the key is never accepted (the call fails with ``VaultError/Code/damaged`` naming it, and
    /// the way out is a backup). Then, in one transaction, every row is authenticated again at a
    /// new write counter, the manifest and the collection commitments are computed from the rows,
    /// and an event (`repair_accepted`, with what disagreed) is recorded.
    ///
    /// It cannot tell a crash's leftovers from rows deleted or put back on purpose: what it
    /// accepts is exactly what ``verify(depth:progress:)`` reported, returned in ``RepairReport/accepted``.
    @discardableResult
    public func acceptCurrentState(origin: String = "vault") throws -> RepairReport {
        _ = try keyring.vaultKey()
        let integrity = self.integrity
        return try write("accepting the vault's rows as they are") { db -> RepairReport in
            let accepted = try Self.manifestProblems(db, path: self.path, integrity: integrity)
            // Above every counter in the file and every one this process saw.
            var highest = self.keyring.counterFloor
            for table in AuthenticatedTable.all {
                let rows = try Row.fetchCursor(db, sql: "SELECT * FROM \(table.name)")
                while let row = try rows.next() {
                    try integrity.check(row, in: table, db)
                    highest = max(highest, RowIntegrity.counter(of: StoredRow(row), layout: RowIntegrity.layout(of: row, in: table)) ?? 0)
                }
            }
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM vault_meta WHERE singleton = 1") ?? false else {
                throw VaultError(.damaged, "\(self.path) has no vault header row; restore it from a backup", path: self.path)
            }
            let counter = highest + 1
            try integrity.beginCounting(at: counter, manifest: VaultManifest(), commitments: nil, db)
            try integrity.authenticate(.vaultMeta, where: "singleton = 1", [], db)
            var rows = 0
            for table in AuthenticatedTable.all where table != .vaultMeta && table != .vaultState {
                rows += try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.name)") ?? 0
                try integrity.authenticateAll(table, db)
            }
            try integrity.setCommitments(try integrity.computeCommitments(db, checking: false), db)
            let summary = accepted.prefix(20).map { "\($0.table) \($0.row): \($0.reason)" }.joined(separator: "; ")
            try self.core.events.insert(
                kind: "repair_accepted", account: nil,
                data: ["disagreed": "\(accepted.count)", "write_counter": "\(counter)", "what": summary], origin: origin,
                at: Date(millisecondsSince1970: self.clock.now().millisecondsSince1970), db)
            try integrity.finishWrite(db)
            return RepairReport(accepted: accepted, rowsAuthenticated: rows, writeCounter: counter)
        }
    }
}
