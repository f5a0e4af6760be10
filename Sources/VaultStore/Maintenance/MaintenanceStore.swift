import Foundation
import GRDB
import Logging
import VaultCrypto
import VaultSync

/// The outcome of ``MaintenanceStore/verify(depth:progress:)``: SQLite's own check, every row's
/// MAC, counter and commitment and, at ``VerifyDepth/deep``, every sealed value.
///
/// ```swift
/// let report = try vault.maintenance.verify()
/// for value in report.damaged { print("\(value.table) row \(value.row) column \(value.column): \(value.reason)") }
/// ```
public struct IntegrityReport: Sendable, Hashable {
    public var checkedAt: Date
    /// What SQLite's structure check (`PRAGMA quick_check`, or `integrity_check` at
    /// ``VerifyDepth/deep``) and `PRAGMA foreign_key_check` reported; empty when both passed.
    public var databaseProblems: [String]
    /// How many sealed values were opened successfully: each account's data keys, and at
    /// ``VerifyDepth/deep`` every other sealed value too.
    public var sealedValuesOpened: Int
    /// Sealed values that do not open, each named by table, row and column.
    public var damaged: [DamagedValue]
    /// Sealed values that could not be tried because the key they need did not open.
    public var sealedValuesSkipped: Int
    /// Rows whose MAC matched (every row of every table the vault acts on is checked; a row
    /// that does not match is in ``damaged``, one entry for each column that changed).
    public var rowsAuthenticated: Int = 0

    /// How much was checked.
    public var depth: VerifyDepth = .rows

    /// Whether nothing was found wrong.
    public var passed: Bool { databaseProblems.isEmpty && damaged.isEmpty && sealedValuesSkipped == 0 }
}

/// How much ``MaintenanceStore/verify(depth:progress:)`` reads and checks.
///
/// Both depths catch every edit, deletion and put-back row that someone without the key can
/// make: a row's MAC covers every byte of it, sealed values included, and the counters and
/// commitments cover which rows exist. What ``deep`` adds finds faults of the vault's own making
/// or of the disk's, the way `restic check --read-data` and `borg check --verify-data` do.
public enum VerifyDepth: String, Sendable, Hashable, CaseIterable {
    /// Every row's MAC, every counter against the manifest, every collection against its
    /// commitment, each account's data keys unwrapped, and SQLite's `quick_check` (every page,
    /// record and constraint but UNIQUE, in linear time) and `foreign_key_check`.
    case rows
    /// ``rows``, and every sealed value opened with freshly unwrapped keys, and SQLite's full
    /// `integrity_check` (indexes against their tables, UNIQUE constraints too). About twice
    /// the time on a large history.
    case deep
}

/// One sealed value that does not open.
public struct DamagedValue: Sendable, Hashable, CustomStringConvertible {
    public var table: String
    /// The row's key: an account id, device registration id or notification uuid.
    public var row: String
    public var column: String
    /// Why it does not open (never the value).
    public var reason: String

    public var description: String { "\(table) row \(row) column \(column): \(reason)" }
}

/// How far a long operation got: `completed` of `total` units (rows, pages or steps).
public struct MaintenanceProgress: Sendable, Hashable {
    public var completed: Int
    public var total: Int
}

// MARK: - Verify

/// Keeping a vault sound: verification of every sealed value and row MAC, online backups, key
/// rotation and credential changes, and checkpoints that fold the WAL back into the file.
///
/// ```swift
/// let report = try vault.maintenance.verify()
/// guard report.passed else { for damage in report.damaged { print(damage) }; return }
/// try vault.maintenance.backup(to: URL(fileURLWithPath: "/backups/vault.db"))
/// ```
public struct MaintenanceStore: VaultArea {
    let core: VaultCore

    /// Checks every row the vault authenticates (its MAC, its counter against the manifest, its
    /// collection's commitment) and unwraps each account's data keys, while SQLite checks the
    /// file's structure on another thread; at ``VerifyDepth/deep`` it also opens every sealed
    /// value of every table with freshly unwrapped keys. Records the time and verdict in the
    /// vault (see ``VaultInspection/lastIntegrityCheck``).
    ///
    /// Damage is reported, not thrown; only a failure to read or record throws.
    /// `progress` is called on the calling thread as rows are checked.
    @discardableResult
    public func verify(depth: VerifyDepth = .rows, progress: ((MaintenanceProgress) -> Void)? = nil) throws -> IntegrityReport {
        try verify(depth: depth, splitAt: Self.rowsWorthSplitting, progress: progress)
    }

    /// A table with at least this many rows is checked in two halves, on two threads.
    static let rowsWorthSplitting = 4096

    /// ``verify(depth:progress:)``, splitting tables of `splitAt` rows or more (tests split
    /// small ones); `beforeUpperHalf` runs on the other thread before its transaction begins
    /// (tests commit a write there).
    func verify(
        depth: VerifyDepth, splitAt: Int, beforeUpperHalf: (@Sendable () throws -> Void)? = nil, progress: ((MaintenanceProgress) -> Void)?
    ) throws -> IntegrityReport {
        _ = try keyring.vaultKey()
        let checkedAt = Date(millisecondsSince1970: clock.now().millisecondsSince1970)
        // SQLite's check of the file's structure reads the whole file on a connection of its
        // own: it runs on a thread of its own meanwhile, not before.
        let structure = { @Sendable [self] in try self.databaseProblemsOnWritableConnection(depth: depth) }
        let (problems, checked) = try alongside(structure) {
            try read("verifying the vault") { db -> IntegrityReport in
                try checkRows(db, depth: depth, splitAt: splitAt, beforeUpperHalf: beforeUpperHalf, progress: progress, checkedAt: checkedAt)
            }
        }
        var report = checked
        report.databaseProblems = problems
        try write("recording the integrity check") { db in
            // A header that fails its MAC is reported above and left as it is: a rewrite would
            // refuse it (it checks the row first), and nothing is recorded over it.
            guard !report.damaged.contains(where: { $0.table == AuthenticatedTable.vaultMeta.name }) else { return }
            try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
                try db.execute(
                    sql: "UPDATE vault_meta SET last_integrity_check_at = ?, last_integrity_check_ok = ? WHERE singleton = 1",
                    arguments: [checkedAt.millisecondsSince1970, report.passed])
            }
        }
        logger.info(
            "verified vault",
            metadata: [
                "path": "\(path)", "passed": "\(report.passed)", "damaged": "\(report.damaged.count)",
                "database_problems": "\(report.databaseProblems.count)", "depth": "\(depth.rawValue)",
            ])
        return report
    }

    /// The rows that do not match what the state row commits to (schema 12): the header, and for
    /// every account the manifest names each row the session layer reads, deleted, older or
    /// newer than recorded; rows of the manifest's tables for accounts it does not name; each
    /// collection against its commitment; and any authenticated row written at a counter above
    /// the state's. Rows whose MAC fails are listed by the MAC check; this judges the others.
    static func manifestProblems(_ db: Database, path: String, integrity: RowIntegrity, pass: RowPass? = nil) throws -> [DamagedValue] {
        guard let state = try StoredRecord.fetchOne(db, RowIntegrity.stateSQL, table: .vaultState, path: path) else {
            return [DamagedValue(table: "vault_state", row: "1", column: RowMAC.column, reason: "was deleted")]
        }
        let commitment: RowIntegrity.Commitment
        do {
            commitment = try integrity.commitment(of: state)
        } catch {
            return [DamagedValue(table: "vault_state", row: "1", column: "manifest", reason: "is missing or unreadable")]
        }
        var problems: [DamagedValue] = []
        if let header = try StoredRecord.fetchOne(db, "SELECT * FROM vault_meta WHERE singleton = 1", table: .vaultMeta, path: path),
            let reason = RowIntegrity.headerProblem(header, commitment)
        {
            problems.append(DamagedValue(table: "vault_meta", row: "1", column: RowMAC.column, reason: reason))
        }
        for (account, _) in commitment.manifest.accounts.sorted(by: { $0.key < $1.key }) {
            for slot in VaultManifest.Slot.allCases {
                let sql =
                    slot == .session
                    ? "SELECT * FROM sessions WHERE account_id = ? ORDER BY session_id DESC LIMIT 1"
                    : "SELECT * FROM \(slot.table.name) WHERE account_id = ?"
                let record = try StoredRecord.fetchOne(db, sql, [account], table: slot.table, path: path)
                if let reason = try RowIntegrity.problem(record, slot, account: account, commitment) {
                    problems.append(
                        DamagedValue(
                            table: slot.table.name, row: record.map { $0.layout.name(of: $0.values) } ?? account,
                            column: RowMAC.column, reason: reason))
                }
            }
        }
        for slot in VaultManifest.Slot.allCases {
            let rows = try Row.fetchCursor(db, sql: "SELECT DISTINCT account_id FROM \(slot.table.name) ORDER BY account_id")
            while let row = try rows.next() {
                let account = row.storedKey("account_id")
                if commitment.manifest.accounts[account] == nil {
                    problems.append(
                        DamagedValue(
                            table: slot.table.name, row: account, column: RowMAC.column,
                            reason: "belongs to an account the vault does not record"))
                }
            }
        }
        // Verify's pass over the same transaction's rows, or one made now (a repair).
        let pass =
            try pass.flatMap { $0.stateCounter == commitment.counter ? $0 : nil }
            ?? RowPass.scan(db, integrity: integrity, stateCounter: commitment.counter)
        // Each collection against its commitment: a row deleted, added or put back changes it.
        do {
            let recorded = commitment.commitments
            let computed = try pass.computed ?? integrity.computeCommitments(db, checking: false)
            let keys = Set(recorded.digests.keys).union(computed.digests.keys).sorted()
            for key in keys {
                let held = computed.digests[key] ?? MultisetDigest()
                let expected = recorded.digests[key] ?? MultisetDigest()
                guard held != expected else { continue }
                let difference =
                    held.count == expected.count
                    ? "holds \(held.count) rows as the vault recorded, but not the ones it wrote"
                    : "holds \(held.count) rows where the vault recorded \(expected.count)"
                problems.append(
                    DamagedValue(
                        table: key.table, row: key.account.isEmpty ? "(no account)" : key.account, column: "(rows)",
                        reason: "\(difference): a row was deleted, added or put back from an older copy"))
            }
        }
        // Every authenticated row's counter against the state's.
        return problems + AuthenticatedTable.all.flatMap { pass.newer[$0.name] ?? [] }
    }

    /// What verify's one pass over every authenticated row gathers for ``manifestProblems(_:path:integrity:pass:)``,
    /// which otherwise reads every row again for it.
    struct RowPass: Sendable {
        /// The write counter the state row records, read before the pass; nil when the row is
        /// missing or unreadable (the manifest check then reports only that).
        var stateCounter: UInt64?
        /// Each collection's commitment computed from its rows; nil when the commitment key
        /// does not open (the manifest check computes them again, and reports that).
        var computed: VaultCommitments? = VaultCommitments()
        /// The rows written at a counter above ``stateCounter``, by table.
        var newer: [String: [DamagedValue]] = [:]
        /// The digest of the account whose rows are being added: a table's rows come mostly
        /// account by account, so it is kept at hand rather than looked up for every row.
        private var running = (key: VaultCommitments.Key(table: "", account: ""), digest: MultisetDigest())

        init(stateCounter: UInt64?) { self.stateCounter = stateCounter }

        /// Adds one row of `table` (read in place): its counter against the state's, its MAC to
        /// its collection's commitment (`hasher` nil: none computed).
        mutating func add(_ values: StoredRow, layout: RowIntegrity.RowLayout, table: AuthenticatedTable, hasher: MultisetHasher?) throws {
            if let stateCounter, table != .vaultMeta, table != .vaultState,
                let counter = RowIntegrity.counter(of: values, layout: layout), counter > stateCounter
            {
                newer[table.name, default: []].append(
                    DamagedValue(
                        table: table.name, row: layout.name(of: values), column: RowMAC.column,
                        reason: "is newer than the vault's state (the state was put back from an older copy)"))
            }
            guard VaultCommitments.tables.contains(table), let hasher, computed != nil, let mac = values.blob(at: layout.macIndex) else { return }
            let account = RowIntegrity.account(of: values, layout: layout)
            if account != running.key.account || table.name != running.key.table {
                finishTable()
                running.key = VaultCommitments.Key(table: table.name, account: account)
                running.digest = computed?.digests.removeValue(forKey: running.key) ?? MultisetDigest()
            }
            try mac.withUnsafeBytes { try hasher.insert($0, domain: table.name, into: &running.digest) }
        }

        /// Adds what `other` found in other rows of the same transaction (after this pass's).
        mutating func merge(_ other: RowPass) {
            for (table, rows) in other.newer { newer[table, default: []] += rows }
            guard var digests = computed?.digests, let theirs = other.computed?.digests else {
                computed = nil
                return
            }
            for (key, digest) in theirs { digests[key, default: MultisetDigest()].combine(digest) }
            computed?.digests = digests
        }

        /// Puts the digest at hand back with the others (after a table's last row).
        mutating func finishTable() {
            if running.digest.count > 0 { computed?.digests[running.key] = running.digest }
            running = (VaultCommitments.Key(table: "", account: ""), MultisetDigest())
        }

        /// Every authenticated row read once for the checks above (a repair's check, which has
        /// no verify pass to take them from).
        static func scan(_ db: Database, integrity: RowIntegrity, stateCounter: UInt64) throws -> RowPass {
            var pass = RowPass(stateCounter: stateCounter)
            let hasher = try? integrity.commitmentHasher(db)
            if hasher == nil { pass.computed = nil }
            for table in AuthenticatedTable.all {
                let statement = try db.makeStatement(sql: "SELECT * FROM \(table.name) ORDER BY rowid")
                let layout = RowIntegrity.layout(of: statement, in: table)
                let cursor = try DatabaseValue.fetchCursor(statement)
                while try cursor.next() != nil { try pass.add(StoredRow(current: statement), layout: layout, table: table, hasher: hasher) }
                pass.finishTable()
            }
            return pass
        }
    }

    /// The write counter the state row records; nil when it is missing or unreadable.
    static func stateCounter(_ db: Database, path: String, integrity: RowIntegrity) throws -> UInt64? {
        guard let state = try StoredRecord.fetchOne(db, RowIntegrity.stateSQL, table: .vaultState, path: path) else { return nil }
        return try? integrity.commitment(of: state).counter
    }

    /// ``databaseProblems(_:depth:)`` on a connection of its own, opened read-write and closed at once.
    ///
    /// Not on the pool's readers: on a connection opened read-only, `integrity_check` skips CHECK
    /// constraints, so a column edited (constraints ignored) to hold a value outside its CHECK,
    /// a session state of `'bogus'` say, would pass. Not on the pool's writer either, which would
    /// hold up this value's own writes for as long as the check reads. The connection writes
    /// nothing; it is never the last one open, so closing it does not checkpoint.
    func databaseProblemsOnWritableConnection(depth: VerifyDepth) throws -> [String] {
        do {
            let queue = try DatabaseQueue(path: path, configuration: pool.configuration)
            defer { try? queue.close() }
            return try queue.read { try Self.databaseProblems($0, depth: depth) }
        } catch {
            throw VaultConnection.classify(error, path: path)
        }
    }

    /// SQLite's verdict on the file's structure and references; empty when both checks pass.
    ///
    /// `quick_check` reads every page, record and NOT NULL and CHECK constraint in linear time;
    /// `integrity_check` (``VerifyDepth/deep``) also holds every index against its table and
    /// every UNIQUE constraint, in O(N log N): on a large history it alone takes about as long as
    /// reading and hashing every row.
    static func databaseProblems(_ db: Database, depth: VerifyDepth = .deep) throws -> [String] {
        let check = depth == .deep ? "integrity_check" : "quick_check"
        var problems: [String] = []
        do {
            let lines = try String.fetchAll(db, sql: "PRAGMA \(check)")
            if lines != ["ok"] { problems += lines.map { "\(check): \($0)" } }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CORRUPT {
            problems.append("\(check): SQLite reports corruption (\(error.resultCode))")
        }
        for row in try Row.fetchAll(db, sql: "PRAGMA foreign_key_check") where row.count >= 3 {
            // SQLite writes these columns itself; read without `as T` all the same, so nothing here can stop the process.
            let table = String.fromDatabaseValue(row[0] as DatabaseValue) ?? "?"
            let rowid = Int64.fromDatabaseValue(row[1] as DatabaseValue).map(String.init) ?? "?"
            let parent = String.fromDatabaseValue(row[2] as DatabaseValue) ?? "?"
            problems.append("foreign_key_check: \(table) rowid \(rowid) refers to a missing \(parent) row")
        }
        return problems
    }
}

/// Opens sealed values one by one with data keys unwrapped for this check only (never the
/// keyring's cached ones, so a damaged wrapped key is noticed), each value with the key its
/// header names (during a key rotation an account has two), and tallies the outcome.
struct SealedValueChecker {
    let vaultID: [UInt8]
    /// The vault key with an id: the current one or, during a rotation, the next one.
    let vaultKey: (UInt32) throws -> SymmetricKey
    /// Each account's data keys by id; an account whose wrapped key does not open is in `broken`.
    var dataKeys: [AccountID: [UInt32: SymmetricKey]] = [:]
    var broken: Set<AccountID> = []
    var opened = 0
    var skipped = 0
    var damaged: [DamagedValue] = []
    /// The table and account whose shared contexts `shared` holds, one per sealed column.
    private var sharedPlace = (table: "", account: "")
    private var shared: [SharedSealContext?] = []

    init(vaultID: [UInt8], vaultKey: @escaping (UInt32) throws -> SymmetricKey) {
        self.vaultID = vaultID
        self.vaultKey = vaultKey
    }

    mutating func unwrapDataKeys(_ row: Row) {
        let account = AccountID(rawValue: row.storedKey("account_id"))
        dataKeys[account] = [:]
        for (idColumn, column) in [("data_key_id", "wrapped_data_key"), ("pending_data_key_id", "pending_wrapped_data_key")] {
            guard row.hasColumn(idColumn), row.hasColumn(column) else { continue }
            let storedID: DatabaseValue = row[idColumn]
            let storedKey: DatabaseValue = row[column]
            if storedID.isNull || storedKey.isNull { continue }
            // A hand-edited key id or wrapped key of the wrong type: reported once, here; the
            // values that need the key are then counted as skipped.
            guard let id = Int64.fromDatabaseValue(storedID) else {
                broken.insert(account)
                damaged.append(DamagedValue(table: "accounts", row: account.rawValue, column: idColumn, reason: "is not a key id (wrong type)"))
                continue
            }
            guard let wrapped = Data.fromDatabaseValue(storedKey) else {
                broken.insert(account)
                damaged.append(DamagedValue(table: "accounts", row: account.rawValue, column: column, reason: "is not a sealed value (wrong type)"))
                continue
            }
            let keyID = UInt32(truncatingIfNeeded: id)
            let bytes = [UInt8](wrapped)
            let context = SealContext(
                vaultID: vaultID, table: "accounts", column: "wrapped_data_key",
                account: account.rawValue, row: account.rawValue, version: "\(keyID)")
            do {
                let wrapper = try vaultKey(SealedBlob(parsing: bytes).keyID)
                dataKeys[account, default: [:]][keyID] = try wrapper.openKey(bytes, id: keyID, context: context)
                opened += 1
            } catch {
                broken.insert(account)
                damaged.append(DamagedValue(table: "accounts", row: account.rawValue, column: column, reason: Self.reason(error)))
            }
        }
    }

    /// Where a table's sealed columns, and the columns their associated data names, are in
    /// the rows of one statement: found once per table.
    struct Positions {
        var sealed: SealedColumns
        var columns: [Int?]
        var account: Int?
        var row: Int?
        var version: Int?

        init(_ sealed: SealedColumns, layout: RowIntegrity.RowLayout) {
            self.sealed = sealed
            columns = sealed.columns.map { layout.position(of: $0) }
            account = layout.position(of: "account_id")
            row = layout.position(of: sealed.rowColumn)
            version = sealed.versionColumn.flatMap { layout.position(of: $0) }
        }
    }

    /// Opens every sealed value of a row of `positions.sealed.table` (read in place).
    mutating func check(_ values: StoredRow, at positions: Positions) {
        let sealed = positions.sealed
        let account = AccountID(rawValue: values.key(at: positions.account))
        let key = values.key(at: positions.row)
        // A version (token generation) edited to something that is not a number names no
        // sealed value: every value of the row is reported, with that reason.
        let version: String
        do {
            version =
                try sealed.versionColumn.map {
                    "\(try values.stored(at: positions.version, $0, table: sealed.table, row: key, path: nil, as: Int64.self))"
                } ?? ""
        } catch {
            for (column, index) in zip(sealed.columns, positions.columns) {
                guard let index, !values.values[index].isNull else { continue }
                damaged.append(
                    DamagedValue(table: sealed.table, row: key, column: column, reason: "its \(sealed.versionColumn ?? "version") is not a number"))
            }
            return
        }
        let keys = dataKeys[account]
        for (column, index) in positions.columns.enumerated() {
            guard let index else { continue }
            check(values.values[index], table: sealed.table, column: column, of: sealed.columns, account: account, keys: keys, key: key, version: version)
        }
    }

    /// Opens one sealed value where it lies (nothing copied, no text made), with the shared
    /// part of its associated data encoded once per column and account.
    mutating func check(
        _ stored: DatabaseValue, table: String, column: Int, of columns: [String], account: AccountID, keys: [UInt32: SymmetricKey]?, key: String,
        version: String
    ) {
        if stored.isNull { return }
        let name = columns[column]
        guard let blob = Data.fromDatabaseValue(stored) else {
            damaged.append(DamagedValue(table: table, row: key, column: name, reason: "is not a sealed value (wrong type)"))
            return
        }
        let shared = sharedContext(table: table, column: column, of: columns, account: account.rawValue)
        blob.withUnsafeBytes { bytes in
            let keyID: UInt32
            do {
                keyID = try SealedBlob.keyID(of: bytes)
            } catch {
                damaged.append(DamagedValue(table: table, row: key, column: name, reason: Self.reason(error)))
                return
            }
            guard let keys else {
                damaged.append(DamagedValue(table: table, row: key, column: name, reason: "its account \(account) is missing"))
                return
            }
            guard let dataKey = keys[keyID] else {
                if broken.contains(account) {
                    skipped += 1
                } else {
                    damaged.append(
                        DamagedValue(
                            table: table, row: key, column: name,
                            reason: "names key \(keyID), which its account does not have"))
                }
                return
            }
            do {
                guard try dataKey.opensToText(bytes, sharing: shared, row: key, version: version) else {
                    damaged.append(DamagedValue(table: table, row: key, column: name, reason: "opens but is not text"))
                    return
                }
                opened += 1
            } catch {
                damaged.append(DamagedValue(table: table, row: key, column: name, reason: Self.reason(error)))
            }
        }
    }

    /// The shared part of the associated data of `columns[column]` of `table` for `account`,
    /// kept for the rows that follow (a table's rows come mostly account by account).
    private mutating func sharedContext(table: String, column: Int, of columns: [String], account: String) -> SharedSealContext {
        if table != sharedPlace.table || account != sharedPlace.account || shared.count != columns.count {
            sharedPlace = (table, account)
            shared = Array(repeating: nil, count: columns.count)
        }
        if let context = shared[column] { return context }
        let context = SharedSealContext(vaultID: vaultID, table: table, column: columns[column], account: account)
        shared[column] = context
        return context
    }

    func wipeKeys() {
        for keys in dataKeys.values { keys.values.forEach { $0.wipe() } }
    }

    static func reason(_ error: any Error) -> String {
        guard let error = error as? CryptoError else { return "does not open" }
        switch error.code {
        case .authenticationFailed: return "does not open: altered, moved from another row, or sealed by another vault"
        case .malformedBlob: return "is not a sealed value this build can read"
        case .keyMismatch: return "names a key other than the one that should open it"
        default: return "does not open (\(error.code))"
        }
    }
}

// MARK: - Backup

extension MaintenanceStore {
    /// Copies the vault to `destination` with SQLite's online backup API: a consistent
    /// snapshot while other connections keep reading and writing. The copy is created with
    /// mode 0600 (its directory 0700 when created) and opens with the same passphrase or key
    /// file. Refuses an existing destination (``VaultError/Code/alreadyExists``).
    ///
    /// ```swift
    /// try vault.maintenance.backup(to: URL(fileURLWithPath: "/backups/vault-2026-01-31.db"))
    /// ```
    public func backup(to destination: URL, progress: ((MaintenanceProgress) -> Void)? = nil) throws {
        try withOpenPool { pool in try VaultFile.copy(from: pool, to: destination, sourcePath: path, progress: progress, logger: logger) }
    }
}

// MARK: - Copies of a vault file

extension VaultFile {
    /// See ``Vault/backup(of:to:options:progress:)``.
    static func backup(
        of url: URL, to destination: URL, options: VaultOptions = VaultOptions(),
        progress: ((MaintenanceProgress) -> Void)? = nil
    ) throws {
        // The file itself, links resolved: the copy comes from where the checks looked.
        let url = try VaultFile.checkedLocation(url)
        _ = try VaultFile.readPlain(at: url, options: options) { _ in () }
        try VaultConnection.withReadOnlyQueue(url, options: options) { queue in
            try copy(from: queue, to: destination, sourcePath: url.path, progress: progress, logger: options.logger)
        }
    }

    static func copy(
        from source: some DatabaseReader, to destination: URL, sourcePath: String,
        progress: ((MaintenanceProgress) -> Void)?, logger: Logger
    ) throws {
        do {
            try VaultFile.createEmpty(destination)
        } catch let error as VaultError where error.code == .alreadyExists {
            throw VaultError(
                .alreadyExists, "a file already exists at \(destination.path): a copy never overwrites one; give another destination",
                path: destination.path)
        }
        try fill(destination, from: source, sourcePath: sourcePath, action: "backing up to \(destination.path)", progress: progress)
        logger.info("backed up vault", metadata: ["path": "\(sourcePath)", "backup": "\(destination.path)"])
    }

    /// The one backup routine: SQLite's online backup of `source` into `destination`, an empty
    /// file this call created (mode 0600). On failure the copy is removed, never left half made.
    static func fill(
        _ destination: URL, from source: some DatabaseReader, sourcePath: String, action: String,
        progress: ((MaintenanceProgress) -> Void)? = nil
    ) throws {
        do {
            let target = try DatabaseQueue(path: destination.path)
            try source.backup(to: target, pagesPerStep: 64) { step in
                progress?(MaintenanceProgress(completed: step.completedPageCount, total: step.totalPageCount))
            }
            try target.close()
        } catch {
            VaultFile.remove(destination)
            throw VaultError.storage(error, while: action, path: sourcePath)
        }
    }

    /// Copies the vault next to itself with SQLite's online backup, mode 0600. Returns the copy.
    @discardableResult
    static func backupBeforeMigrating(_ source: DatabaseQueue, of url: URL, fromVersion: Int, options: VaultOptions) throws -> URL {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withYear, .withMonth, .withDay, .withTime]
        let stamp = formatter.string(from: options.clock.now()).replacingOccurrences(of: ":", with: "")
        // Two processes migrating the same vault, or a retry within the same second, must not
        // fail on each other's backup: take the next free name (…-2.bak, …-3.bak).
        let base = url.path + ".v\(fromVersion)-\(stamp)"
        var backupURL = URL(fileURLWithPath: base + ".bak")
        for attempt in 2... {
            do {
                try VaultFile.createEmpty(backupURL)
                break
            } catch let error as VaultError where error.code == .alreadyExists && attempt <= 100 {
                backupURL = URL(fileURLWithPath: base + "-\(attempt).bak")
            }
        }
        try VaultFile.fill(backupURL, from: source, sourcePath: url.path, action: "backing up before migration to \(backupURL.path)")
        options.logger.info("backed up vault before migrating", metadata: ["backup": "\(backupURL.path)"])
        return backupURL
    }
}

extension VaultCore {
    /// This vault's maintenance (see ``MaintenanceStore``).
    var maintenance: MaintenanceStore { MaintenanceStore(core: self) }
}
