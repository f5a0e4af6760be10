import Foundation
import GRDB

/// Reading columns of a row that a hand-edited or damaged file may hold with the wrong type.
///
/// GRDB's `row["column"] as T` stops the process when the value is NULL or of another type
/// (and when the column is missing); a vault read goes through these instead, so such a value
/// is reported as ``VaultError/Code/damaged``, naming the table, row and column (never the value).
///
/// ```swift
/// let generation: Int64 = try row.stored("generation", table: "tokens", row: account.rawValue, path: path)
/// ```
extension Row {
    /// The column's value as `T`; `.damaged` when it is NULL, missing or cannot be read as `T`.
    func stored<T: DatabaseValueConvertible>(
        _ column: String, table: String, row key: String, path: String?, as type: T.Type = T.self
    ) throws -> T {
        guard let index = storedIndex(column) else {
            throw StoredValue.damaged(table: table, column: column, row: key, path: path, "is missing")
        }
        let value: DatabaseValue = self[index]
        if value.isNull {
            throw StoredValue.damaged(table: table, column: column, row: key, path: path, "is empty (NULL)")
        }
        return try StoredValue.convert(value, table: table, column: column, row: key, path: path, as: type)
    }

    /// The column's value as `T`, nil when it is NULL (or the column is missing, as in an older
    /// schema); `.damaged` when it cannot be read as `T`.
    func storedIfPresent<T: DatabaseValueConvertible>(
        _ column: String, table: String, row key: String, path: String?, as type: T.Type = T.self
    ) throws -> T? {
        guard let index = storedIndex(column) else { return nil }
        let value: DatabaseValue = self[index]
        if value.isNull { return nil }
        return try StoredValue.convert(value, table: table, column: column, row: key, path: path, as: type)
    }

    /// A stored time in milliseconds since 1970.
    func storedDate(_ column: String, table: String, row key: String, path: String?) throws -> Date {
        Date(millisecondsSince1970: try stored(column, table: table, row: key, path: path, as: Int64.self))
    }

    /// A stored time in milliseconds since 1970, nil when it is NULL.
    func storedDateIfPresent(_ column: String, table: String, row key: String, path: String?) throws -> Date? {
        try storedIfPresent(column, table: table, row: key, path: path, as: Int64.self).map(Date.init(millisecondsSince1970:))
    }

    /// Whether the column holds a value, whatever its type (a sealed column's presence, read
    /// without opening it). False for NULL and for a missing column.
    func holdsValue(_ column: String) -> Bool {
        guard let index = storedIndex(column) else { return false }
        return !(self[index] as DatabaseValue).isNull
    }

    /// The position of `column`. The vault's SQL spells every column as the schema does, so an
    /// exact comparison finds it; a case-insensitive one (GRDB's rule, which lowercases every
    /// name it compares) is the fallback. Token reads look up ~20 columns: this is on the hot path.
    private func storedIndex(_ column: String) -> Int? {
        Self.storedIndex(of: column, in: columnNames)
    }

    /// The position of `column` among `names` (exact first, then GRDB's case-insensitive rule).
    fileprivate static func storedIndex(of column: String, in names: some Collection<String>) -> Int? {
        if let exact = names.firstIndex(of: column) { return names.distance(from: names.startIndex, to: exact) }
        let wanted = column.lowercased()
        guard let folded = names.firstIndex(where: { $0.lowercased() == wanted }) else { return nil }
        return names.distance(from: names.startIndex, to: folded)
    }

    /// The row's key column (an account id, a uuid…) as text, or "?" when even that is unreadable.
    func storedKey(_ column: String) -> String {
        guard let index = storedIndex(column) else { return "?" }
        return StoredRow.keyText(self[index])
    }
}

/// A row's values, each read from SQLite once, by position: a page of rows is checked (its
/// row MAC reads every column) and then decoded from the same values, with the positions of
/// the columns found once for the whole statement (``Row/storedPositions(_:)``). GRDB's
/// generic `row[index]` goes through unspecialised generic code from another module, which
/// cost more than the value itself on a page of notifications (issue 16).
struct StoredRow {
    let values: [DatabaseValue]

    init(_ row: Row) {
        var values: [DatabaseValue] = []
        values.reserveCapacity(row.count)
        for (_, value) in row { values.append(value) }
        self.values = values
    }

    init(values: [DatabaseValue]) {
        self.values = values
    }

    /// The current row of `statement` (being stepped by a cursor), read straight from SQLite:
    /// GRDB's `Row` would also make each column's name for every row.
    init(current statement: Statement) {
        let sqlite = statement.sqliteStatement
        let count = statement.columnCount
        var values: [DatabaseValue] = []
        values.reserveCapacity(count)
        for index in 0..<count { values.append(DatabaseValue(sqliteStatement: sqlite, index: CInt(index))) }
        self.values = values
    }

    /// The first row of `statement` (kept prepared by the connection), read by position in
    /// place; nil when it returns none. For small reads on a write's path, where GRDB's `Row`
    /// (which indexes every column's name) cost more than the read.
    static func fetchOne(_ statement: Statement, arguments: StatementArguments = StatementArguments()) throws -> StoredRow? {
        let cursor = try DatabaseValue.fetchCursor(statement, arguments: arguments)
        guard try cursor.next() != nil else { return nil }
        return StoredRow(current: statement)
    }

    /// The key column at `index` (an account id, a uuid…) as text, an integer key as its number,
    /// or "?" when even that is unreadable (as ``Row/storedKey(_:)``).
    func key(at index: Int?) -> String {
        guard let index, values.indices.contains(index) else { return "?" }
        return Self.keyText(values[index])
    }

    /// A key column's value as text: an integer key (a session id) as its number; "?" for
    /// anything else, which is not shown.
    static func keyText(_ value: DatabaseValue) -> String {
        if let text = String.fromDatabaseValue(value) { return text }
        if case .int64(let number) = value.storage { return String(number) }
        return "?"
    }

    /// The bytes at `index` (a blob, or text as UTF-8, as GRDB reads `Data`); nil for NULL,
    /// a number or a missing column.
    func blob(at index: Int?) -> Data? {
        guard let index, values.indices.contains(index) else { return nil }
        return Data.fromDatabaseValue(values[index])
    }

    /// The value at `index` as `T`; `.damaged` when it is NULL, missing (nil) or cannot be read as `T`.
    func stored<T: DatabaseValueConvertible>(
        at index: Int?, _ column: String, table: String, row key: String, path: String?, as type: T.Type = T.self
    ) throws -> T {
        guard let index, values.indices.contains(index) else {
            throw StoredValue.damaged(table: table, column: column, row: key, path: path, "is missing")
        }
        let value = values[index]
        if value.isNull {
            throw StoredValue.damaged(table: table, column: column, row: key, path: path, "is empty (NULL)")
        }
        return try StoredValue.convert(value, table: table, column: column, row: key, path: path, as: type)
    }

    /// The value at `index` as `T`, nil when it is NULL or the column is missing; `.damaged`
    /// when it cannot be read as `T`.
    func storedIfPresent<T: DatabaseValueConvertible>(
        at index: Int?, _ column: String, table: String, row key: String, path: String?, as type: T.Type = T.self
    ) throws -> T? {
        guard let index, values.indices.contains(index) else { return nil }
        let value = values[index]
        if value.isNull { return nil }
        return try StoredValue.convert(value, table: table, column: column, row: key, path: path, as: type)
    }
}

extension Row {
    /// The positions of `columns`, in order (nil for a missing one): rows of one statement share them.
    func storedPositions(_ columns: [String]) -> [Int?] {
        // The names read once (each read of `columnNames` makes every name again).
        let names = Array(columnNames)
        return columns.map { Self.storedIndex(of: $0, in: names) }
    }
}

extension Database {
    /// The first column of the first row of `sql` as `T`: nil when there is no row or the value
    /// is NULL; `.damaged` naming `table.column` and `row` when it cannot be read as `T`.
    ///
    /// Use it instead of `T.fetchOne(db, sql:)` for a stored column: that one never reports a
    /// wrong type (SQLite converts silently: text `'x'` reads as the integer 0).
    ///
    /// ```swift
    /// let next = try db.storedValue("SELECT next_key_id FROM vault_meta WHERE singleton = 1",
    ///                               table: "vault_meta", column: "next_key_id", row: "1", path: path, as: Int64.self)
    /// ```
    func storedValue<T: DatabaseValueConvertible>(
        _ sql: String, arguments: StatementArguments = StatementArguments(),
        table: String, column: String, row key: String, path: String?, as type: T.Type = T.self
    ) throws -> T? {
        guard let row = try Row.fetchOne(self, sql: sql, arguments: arguments), !row.isEmpty else { return nil }
        let value: DatabaseValue = row[0]
        if value.isNull { return nil }
        return try StoredValue.convert(value, table: table, column: column, row: key, path: path, as: type)
    }
}

/// The conversion and the error shared by the readers above.
enum StoredValue {
    static func convert<T: DatabaseValueConvertible>(
        _ value: DatabaseValue, table: String, column: String, row key: String, path: String?, as type: T.Type
    ) throws -> T {
        guard let converted = T.fromDatabaseValue(value) else {
            throw damaged(table: table, column: column, row: key, path: path, "does not hold \(describe(type))")
        }
        return converted
    }

    /// `.damaged` naming the place: never the value found there.
    static func damaged(table: String, column: String, row key: String, path: String?, _ what: String) -> VaultError {
        VaultError(
            .damaged,
            "\(table).\(column) of row \(key) \(what): \(path ?? "the vault") is damaged or was edited; restore it from a backup",
            path: path)
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Int64.Type, is Int.Type, is Int32.Type: "an integer"
        case is String.Type: "text"
        case is Data.Type: "a blob"
        case is Bool.Type: "a boolean (0 or 1)"
        case is Double.Type: "a number"
        default: "a \(type) value"
        }
    }
}
