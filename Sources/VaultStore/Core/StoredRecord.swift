import Foundation
import GRDB
import VaultSync

/// One row of an authenticated table as the vault decodes it: its values, each read from
/// SQLite once, and the table's ``RowIntegrity/RowLayout`` (where each column is). The row MAC
/// is checked on the same values the record is then decoded from.
///
/// ```swift
/// guard let record = try StoredRecord.fetchOne(db, "SELECT * FROM tokens WHERE account_id = ?",
///                                              [id.rawValue], table: .tokens, path: path) else { return nil }
/// try integrity.check(record, db)
/// let generation: Int64 = try record.value("generation")
/// ```
struct StoredRecord {
    let values: StoredRow
    let layout: RowIntegrity.RowLayout
    let table: AuthenticatedTable
    let path: String?

    /// A row read through GRDB's `Row` (every reader that is not on a hot path).
    init(_ row: Row, table: AuthenticatedTable, path: String?) {
        self.init(values: StoredRow(row), layout: RowIntegrity.layout(of: row, in: table), table: table, path: path)
    }

    init(values: StoredRow, layout: RowIntegrity.RowLayout, table: AuthenticatedTable, path: String?) {
        self.values = values
        self.layout = layout
        self.table = table
        self.path = path
    }

    /// The first row of `sql` (a `SELECT *` of `table`), prepared once per connection and read
    /// straight from the statement: GRDB's `Row` would index every column's name first.
    static func fetchOne(
        _ db: Database, _ sql: String, _ arguments: StatementArguments = StatementArguments(),
        table: AuthenticatedTable, path: String?
    ) throws -> StoredRecord? {
        let statement = try db.cachedStatement(sql: sql)
        guard let values = try StoredRow.fetchOne(statement, arguments: arguments) else { return nil }
        return StoredRecord(values: values, layout: RowIntegrity.layout(of: statement, in: table), table: table, path: path)
    }

    /// The rows of several tables that one statement's current row holds side by side: a join
    /// selecting `"|table", t.*` for each, the marker columns (named `|` and the table) saying
    /// where each table's columns start. A table whose key column is NULL there is absent (a
    /// `LEFT JOIN` that matched nothing): nil in its place.
    ///
    /// ```swift
    /// // SELECT NULL AS "|vault_meta", m.*, NULL AS "|tokens", t.* FROM vault_meta m LEFT JOIN tokens t ON …
    /// let (header, token) = try StoredRecord.fetchJoined(db, sql, arguments, tables: [.vaultMeta, .tokens], path: path)
    /// ```
    static func fetchJoined(
        _ db: Database, _ sql: String, _ arguments: StatementArguments, tables: [AuthenticatedTable], path: String?
    ) throws -> [StoredRecord?]? {
        let statement = try db.cachedStatement(sql: sql)
        let cursor = try DatabaseValue.fetchCursor(statement, arguments: arguments)
        guard try cursor.next() != nil else { return nil }
        let row = StoredRow(current: statement)
        let starts = joinedStarts(statement, tables: tables)
        return try tables.indices.map { i in
            guard let start = starts[i] else {
                throw VaultError(.storage, "the joined read names no column \"|\(tables[i].name)\"", path: path)
            }
            let end = i + 1 < tables.count ? (starts[i + 1] ?? statement.columnCount) - 1 : statement.columnCount
            let columns = start..<max(start, end)
            let layout = RowIntegrity.layout(of: statement, columns: columns, in: tables[i])
            let values = StoredRow(values: Array(row.values[columns]))
            if let key = layout.keyIndex, values.values.indices.contains(key), values.values[key].isNull { return nil }
            return StoredRecord(values: values, layout: layout, table: tables[i], path: path)
        }
    }

    /// Where each table's columns start in a joined statement's rows (after its marker column),
    /// found by name once per column count: the statement is cached, and only a migration
    /// changes its columns.
    private static func joinedStarts(_ statement: Statement, tables: [AuthenticatedTable]) -> [Int?] {
        let key = JoinKey(tables: tables.map(\.name), columnCount: statement.columnCount)
        if let known = joinedLayouts.withLock({ $0[key] }) { return known }
        let names = statement.columnNames
        let starts = tables.map { table in names.firstIndex(of: "|" + table.name).map { $0 + 1 } }
        joinedLayouts.withLock { $0[key] = starts }
        return starts
    }

    private struct JoinKey: Hashable {
        var tables: [String]
        var columnCount: Int
    }

    private static let joinedLayouts = Locked<[JoinKey: [Int?]]>([:])

    /// How errors name the row.
    var name: String { layout.name(of: values) }

    /// The column's value as `T`; `.damaged` when it is NULL, missing or cannot be read as `T`.
    func value<T: DatabaseValueConvertible>(_ column: String, as type: T.Type = T.self) throws -> T {
        try values.stored(at: layout.position(of: column), column, table: table.name, row: name, path: path, as: type)
    }

    /// The column's value as `T`, nil when it is NULL or missing (an older schema's row).
    func optional<T: DatabaseValueConvertible>(_ column: String, as type: T.Type = T.self) throws -> T? {
        try values.storedIfPresent(at: layout.position(of: column), column, table: table.name, row: name, path: path, as: type)
    }

    /// Whether the column holds a value, whatever its type (a sealed column's presence, read
    /// without opening it). False for NULL and for a missing column.
    func holdsValue(_ column: String) -> Bool {
        guard let index = layout.position(of: column), values.values.indices.contains(index) else { return false }
        return !values.values[index].isNull
    }

    /// A stored time in milliseconds since 1970.
    func date(_ column: String) throws -> Date {
        Date(millisecondsSince1970: try value(column, as: Int64.self))
    }

    /// A stored time in milliseconds since 1970, nil when it is NULL.
    func optionalDate(_ column: String) throws -> Date? {
        try optional(column, as: Int64.self).map(Date.init(millisecondsSince1970:))
    }
}

extension RowIntegrity {
    /// Checks `record` against its MAC (see ``check(_:in:layout:remembering:_:)``).
    func check(_ record: StoredRecord, remembering: Bool = false, _ db: Database) throws {
        try check(record.values, in: record.table, layout: record.layout, remembering: remembering, db)
    }
}
