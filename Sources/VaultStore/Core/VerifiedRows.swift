import Foundation
import GRDB
import VaultSync

/// The rows of the hot tables whose MAC this vault checked last, kept byte for byte, so that a
/// token request after another connection's commit does not hash the same four rows again.
///
/// A row read again is taken as checked only when every stored value, `row_mac` included, is
/// identical to the remembered one (same type, same bytes; never by rowid, generation or
/// SQLite's loose equality, which takes `1` and `1.0` as equal) and the key that checked it
/// is still held (the memo belongs to the keyring and is emptied with it). Checking such a
/// row again would hash the same input under the same key and give the same answer, so the
/// memo changes what is read, never what is accepted: a row changed without the key still
/// fails, and an old row put back is what it was before (issue 31 is about that).
///
/// Small by design: a few rows per table (the active account's header, session, policy and
/// tokens), dropped when full. `vault verify` never uses it.
final class VerifiedRows: Sendable {
    private struct Entry {
        var keyID: UInt32
        var values: [DatabaseValue]
    }

    private static let perTable = 8
    private let tables = Locked<[String: [Entry]]>([:])

    /// Whether `values` of `table` are identical to values checked under the vault key `keyID`.
    func contains(_ values: StoredRow, table: String, keyID: UInt32) -> Bool {
        tables.withLock { tables in
            tables[table]?.contains { $0.keyID == keyID && Self.identical($0.values, values.values) } ?? false
        }
    }

    /// Remembers values whose MAC just matched, replacing what was kept for the same row.
    func remember(_ values: StoredRow, table: String, keyID: UInt32, layout: RowIntegrity.RowLayout) {
        let key = layout.keyIndex.flatMap { values.values.indices.contains($0) ? values.values[$0] : nil }
        tables.withLock { tables in
            var entries = tables[table] ?? []
            if let key, let keyIndex = layout.keyIndex {
                entries.removeAll { $0.values.indices.contains(keyIndex) && Self.same($0.values[keyIndex], key) }
            }
            if entries.count >= Self.perTable { entries.removeFirst() }
            entries.append(Entry(keyID: keyID, values: values.values))
            tables[table] = entries
        }
    }

    /// The values last remembered for the row of `table` whose key column (at `keyIndex`) holds
    /// `key`, checked or written under the vault key `keyID`; nil when none is kept.
    func remembered(table: String, key: DatabaseValue, keyIndex: Int, keyID: UInt32) -> [DatabaseValue]? {
        tables.withLock { tables in
            tables[table]?.last { $0.keyID == keyID && $0.values.indices.contains(keyIndex) && Self.same($0.values[keyIndex], key) }?.values
        }
    }

    /// Forgets every row (the keys that checked them are gone).
    func removeAll() {
        tables.withLock { $0 = [:] }
    }

    /// Same count, and each value of the same storage type with the same bytes.
    static func identical(_ a: [DatabaseValue], _ b: [DatabaseValue]) -> Bool {
        guard a.count == b.count else { return false }
        for index in a.indices where !same(a[index], b[index]) { return false }
        return true
    }

    /// The same storage type with the same bytes.
    static func same(_ x: DatabaseValue, _ y: DatabaseValue) -> Bool {
        switch (x.storage, y.storage) {
        case (.null, .null): true
        case (.int64(let p), .int64(let q)): p == q
        case (.double(let p), .double(let q)): p.bitPattern == q.bitPattern
        // UTF-8 bytes, not `==`: Swift compares strings by canonical equivalence.
        case (.string(let p), .string(let q)): sameBytes(p, q)
        case (.blob(let p), .blob(let q)): p == q
        default: false
        }
    }

    private static func sameBytes(_ p: String, _ q: String) -> Bool {
        guard p.utf8.count == q.utf8.count else { return false }
        let compared = p.utf8.withContiguousStorageIfAvailable { a in
            q.utf8.withContiguousStorageIfAvailable { b in
                guard let x = a.baseAddress, let y = b.baseAddress else { return a.count == b.count }
                return memcmp(x, y, a.count) == 0
            }
        }
        return (compared ?? nil) ?? p.utf8.elementsEqual(q.utf8)
    }
}
