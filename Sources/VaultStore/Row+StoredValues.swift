import Foundation
import GRDB

/// Reading columns of a row that a hand-edited or damaged file may hold with the wrong type.
///
/// GRDB's `row["column"] as T` stops the process when the value is NULL or of another type;
/// a vault read goes through these instead, so such a value is reported as
/// ``VaultError/Code/damaged``, naming the table, row and column (never the value).
///
/// ```swift
/// let generation: Int64 = try row.stored("generation", table: "tokens", row: account.rawValue, path: path)
/// ```
extension Row {
    /// The column's value as `T`; `.damaged` when it is NULL or cannot be read as `T`.
    func stored<T: DatabaseValueConvertible>(
        _ column: String, table: String, row key: String, path: String?, as type: T.Type = T.self
    ) throws -> T {
        let value: DatabaseValue = self[column]
        guard let converted = T.fromDatabaseValue(value) else {
            throw Self.wrongType(column, table: table, row: key, path: path, isNull: value.isNull, type: type)
        }
        return converted
    }

    /// The column's value as `T`, nil when it is NULL; `.damaged` when it cannot be read as `T`.
    func storedIfPresent<T: DatabaseValueConvertible>(
        _ column: String, table: String, row key: String, path: String?, as type: T.Type = T.self
    ) throws -> T? {
        let value: DatabaseValue = self[column]
        if value.isNull { return nil }
        guard let converted = T.fromDatabaseValue(value) else {
            throw Self.wrongType(column, table: table, row: key, path: path, isNull: false, type: type)
        }
        return converted
    }

    /// A stored time in milliseconds since 1970.
    func storedDate(_ column: String, table: String, row key: String, path: String?) throws -> Date {
        Date(millisecondsSince1970: try stored(column, table: table, row: key, path: path, as: Int64.self))
    }

    /// A stored time in milliseconds since 1970, nil when it is NULL.
    func storedDateIfPresent(_ column: String, table: String, row key: String, path: String?) throws -> Date? {
        try storedIfPresent(column, table: table, row: key, path: path, as: Int64.self).map(Date.init(millisecondsSince1970:))
    }

    /// The row's key column (an account id, a uuid…) as text, or "?" when even that is unreadable.
    func storedKey(_ column: String) -> String {
        String.fromDatabaseValue(self[column]) ?? "?"
    }

    private static func wrongType(_ column: String, table: String, row key: String, path: String?,
                                  isNull: Bool, type: Any.Type) -> VaultError {
        let what = isNull ? "is empty (NULL)" : "does not hold a \(type) value"
        return VaultError(
            .damaged,
            "\(table).\(column) of row \(key) \(what): \(path ?? "the vault") is damaged or was edited; restore it from a backup",
            path: path)
    }
}
