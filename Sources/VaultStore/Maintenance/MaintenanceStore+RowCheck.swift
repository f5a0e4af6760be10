import Foundation
import GRDB
import Synchronization
import VaultSync

// MARK: - Verify's row pass

extension MaintenanceStore {
    /// Verify's pass over every row the vault authenticates, in `db`'s transaction: each row read
    /// once, its MAC checked, its counter compared with the state's, its MAC added to its
    /// collection's commitment and, at ``VerifyDepth/deep``, its sealed values opened; then every
    /// row the session layer reads against the manifest.
    ///
    /// A table of `splitAt` rows or more is read in two halves by rowid: the upper halves on a
    /// thread of their own, in a read transaction of their own. That transaction must see the
    /// same vault as `db`'s: both read the state row, which every write rewrites, and when they
    /// differ (a write committed between the two starts) the upper halves are read again here.
    /// What each check finds is listed in the order one pass would list it: sealed values table
    /// by table, then MACs, then what disagrees with the state.
    func checkRows(
        _ db: Database, depth: VerifyDepth, splitAt: Int, beforeUpperHalf: (@Sendable () throws -> Void)? = nil,
        progress: ((MaintenanceProgress) -> Void)?, checkedAt: Date
    ) throws -> IntegrityReport {
        let accountRows = try Row.fetchAll(db, sql: "SELECT * FROM accounts ORDER BY rowid")
        var splits: [String: Int64] = [:]
        var total = 1 + accountRows.count
        for table in AuthenticatedTable.all {
            let rows = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.name)") ?? 0
            if SealedColumns.all.contains(where: { $0.table == table.name }) { total += rows }
            // The first rowid of the upper half: halfway between the first and the last, both
            // read off the ends of the table's b-tree (rows are appended, and pruned oldest
            // first, so their rowids stay about dense; counting half of them would read them).
            // One query each: SQLite reads one end for a lone min() or max(), but scans the
            // table for both in one.
            if rows >= max(splitAt, 2),
                let first = try Int64.fetchOne(db, sql: "SELECT min(rowid) FROM \(table.name)"),
                let last = try Int64.fetchOne(db, sql: "SELECT max(rowid) FROM \(table.name)"), last > first
            {
                splits[table.name] = first + (last - first) / 2 + 1
            }
        }
        // Progress is reported here, on the calling thread; the other thread only counts.
        let upperSteps = StepCount()
        var completed = 0
        func step() {
            completed += 1
            progress?(MaintenanceProgress(completed: completed + upperSteps.value.load(ordering: .relaxed), total: total))
        }
        progress?(MaintenanceProgress(completed: 0, total: total))
        step()

        let mark = try Self.stateMark(db)
        let (upper, lower): (RowShare?, RowShare)
        if splits.isEmpty {
            (upper, lower) = (nil, try checkShare(db, .lower, splits: splits, accountRows: accountRows, depth: depth, step: step))
        } else {
            let other = { @Sendable [self, splits] () throws -> RowShare? in
                try beforeUpperHalf?()
                return try self.onConnectionOfItsOwn { db in
                    // Another snapshot: the caller reads these rows again itself.
                    guard try Self.stateMark(db) == mark else { return nil }
                    let accountRows = try Row.fetchAll(db, sql: "SELECT * FROM accounts ORDER BY rowid")
                    return try self.checkShare(db, .upper, splits: splits, accountRows: accountRows, depth: depth) {
                        upperSteps.value.add(1, ordering: .relaxed)
                    }
                }
            }
            let (checked, ownShare) = try alongside(other) {
                try checkShare(db, .lower, splits: splits, accountRows: accountRows, depth: depth, step: step)
            }
            lower = ownShare
            upper = try checked ?? checkShare(db, .upper, splits: splits, accountRows: accountRows, depth: depth, step: step)
        }
        progress?(MaintenanceProgress(completed: total, total: total))

        var pass = lower.pass
        if let upper { pass.merge(upper.pass) }
        var damaged = lower.keyDamages
        for table in SealedColumns.all {
            damaged += lower.sealedDamages[table.table] ?? []
            damaged += upper?.sealedDamages[table.table] ?? []
        }
        // A sealed value that does not open is already listed, with its own reason.
        let macDamages = AuthenticatedTable.all.flatMap { (lower.macDamages[$0.name] ?? []) + (upper?.macDamages[$0.name] ?? []) }
        for damage in macDamages
        where !damaged.contains(where: { $0.table == damage.table && $0.row == damage.row && $0.column == damage.column }) {
            damaged.append(damage)
        }
        // Every row the session layer reads, against the header's manifest; every row's
        // counter against the header's (a header checked above: a damaged one is listed).
        if !damaged.contains(where: { [AuthenticatedTable.vaultMeta.name, AuthenticatedTable.vaultState.name].contains($0.table) }) {
            for problem in try Self.manifestProblems(db, path: path, integrity: integrity, pass: pass)
            where !damaged.contains(where: { $0.table == problem.table && $0.row == problem.row }) {
                damaged.append(problem)
            }
        }
        var report = IntegrityReport(
            checkedAt: checkedAt, databaseProblems: [], sealedValuesOpened: lower.opened + (upper?.opened ?? 0),
            damaged: damaged, sealedValuesSkipped: lower.skipped + (upper?.skipped ?? 0))
        report.rowsAuthenticated = lower.authenticated + (upper?.authenticated ?? 0)
        report.depth = depth
        return report
    }

    /// Which rows of a table a share reads: below the table's split (all of a table not split),
    /// or from it on.
    enum Half: Sendable { case lower, upper }

    /// Runs `body` in a read transaction on a read-only connection opened for it and closed
    /// after: not one of the pool's readers, which the caller's half already holds one of (with
    /// every reader held by such halves, the other halves would wait for one forever).
    func onConnectionOfItsOwn<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            var configuration = pool.configuration
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read(body)
        } catch let error as VaultError {
            throw error
        } catch {
            throw VaultError.storage(error, while: "verifying the vault", path: path)
        }
    }

    /// What one share of the row pass found.
    struct RowShare: Sendable {
        var pass: RowPass
        var authenticated = 0
        var opened = 0
        var skipped = 0
        /// Wrapped data keys that do not open (the lower share's; the upper one's are the same).
        var keyDamages: [DamagedValue] = []
        var sealedDamages: [String: [DamagedValue]] = [:]
        /// Rows whose MAC does not match, by table, one entry per column that changed.
        var macDamages: [String: [DamagedValue]] = [:]
    }

    /// The state row's MAC, which every write changes: two transactions that read the same one
    /// see the same rows.
    static func stateMark(_ db: Database) throws -> Data? {
        try Data.fetchOne(db, sql: "SELECT \(RowMAC.column) FROM \(AuthenticatedTable.vaultState.name)")
    }

    /// Checks `half` of every authenticated table's rows in `db`'s transaction.
    func checkShare(
        _ db: Database, _ half: Half, splits: [String: Int64], accountRows: [Row], depth: VerifyDepth, step: () -> Void
    ) throws -> RowShare {
        var checker = SealedValueChecker(vaultID: keyring.vaultID, vaultKey: { try self.keyring.vaultKey(id: $0) })
        defer { checker.wipeKeys() }
        // The data keys first: every other sealed value of an account opens with its key.
        for row in accountRows where depth == .deep || half == .lower {
            checker.unwrapDataKeys(row)
            if half == .lower { step() }
        }
        var share = RowShare(pass: RowPass(stateCounter: try Self.stateCounter(db, path: path, integrity: integrity)))
        if half == .lower {
            share.keyDamages = checker.damaged
            share.opened = checker.opened
        }
        checker.damaged = []
        checker.opened = 0
        // Nil when the header's commitment key does not open: the state check says so.
        let hasher = try? integrity.commitmentHasher(db)
        if hasher == nil { share.pass.computed = nil }
        for table in AuthenticatedTable.all {
            let split = splits[table.name]
            let range: String
            switch (half, split) {
            case (.lower, nil): range = ""
            case (.lower, .some): range = "WHERE rowid < ?"
            case (.upper, nil): continue
            case (.upper, .some): range = "WHERE rowid >= ?"
            }
            let sealedColumns = SealedColumns.all.first { $0.table == table.name }
            // The statement read in place: GRDB's `Row` would index every column's name per row.
            let statement = try db.makeStatement(sql: "SELECT * FROM \(table.name) \(range) ORDER BY rowid")
            if let split { try statement.setArguments([split]) }
            let layout = RowIntegrity.layout(of: statement, in: table)
            let sealed = sealedColumns.map { SealedValueChecker.Positions($0, layout: layout) }
            let cursor = try DatabaseValue.fetchCursor(statement)
            while try cursor.next() != nil {
                let values = StoredRow(current: statement)
                if let sealed {
                    if depth == .deep { checker.check(values, at: sealed) }
                    step()
                }
                switch try integrity.verdict(values, in: table, layout: layout, db) {
                case .authentic:
                    share.authenticated += 1
                case .unknownKey:
                    throw VaultError.keyChanged(path: path)
                case .changed(let columns, let reason):
                    let name = values.key(at: layout.position(of: table.nameColumn))
                    share.macDamages[table.name, default: []] += columns.map { DamagedValue(table: table.name, row: name, column: $0, reason: reason) }
                }
                try share.pass.add(values, layout: layout, table: table, hasher: hasher)
            }
            share.pass.finishTable()
            if sealed != nil {
                share.sealedDamages[table.name] = checker.damaged
                checker.damaged = []
            }
        }
        share.opened += checker.opened
        share.skipped = checker.skipped
        return share
    }
}

/// The rows the other thread has checked, for the progress the calling thread reports.
private final class StepCount: Sendable {
    let value = Atomic<Int>(0)
}
