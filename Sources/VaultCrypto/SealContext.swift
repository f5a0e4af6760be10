/// Where a sealed value belongs. Bound into the AEAD's associated data, so a sealed
/// blob copied to another vault, table, column, account or row fails to open.
///
/// ```swift
/// let context = SealContext(vaultID: vault, table: "tokens", column: "refresh_token",
///                           account: "7C1D…", row: "7C1D…", version: "42")
/// ```
public struct SealContext: Sendable, Hashable {
    public var vaultID: [UInt8]
    public var table: String
    public var column: String
    public var account: String
    public var row: String
    /// Extra binding that changes when a row's value is replaced (a token generation, say),
    /// so an older blob replayed into its own row is rejected too. Empty when unused.
    public var version: String

    public init(vaultID: [UInt8], table: String, column: String, account: String = "", row: String, version: String = "") {
        self.vaultID = vaultID
        self.table = table
        self.column = column
        self.account = account
        self.row = row
        self.version = version
    }

    /// Length-prefixed so that no two different contexts encode to the same bytes.
    var associatedData: [UInt8] { associatedData(after: []) }

    private static let domain = Array("credentialvault.seal.v1".utf8)

    /// `prefix` (a sealed blob's header) then ``associatedData``, built in one array: this runs
    /// for every value opened, and a page of notifications opens 150 of them.
    func associatedData(after prefix: ArraySlice<UInt8>) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(
            prefix.count + Self.domain.count + 6 * 4 + vaultID.count + table.utf8.count + column.utf8.count
                + account.utf8.count + row.utf8.count + version.utf8.count)
        bytes.append(contentsOf: prefix)
        bytes.append(contentsOf: Self.domain)
        func part(_ part: UnsafeBufferPointer<UInt8>) {
            let count = UInt32(part.count)
            bytes.append(UInt8(truncatingIfNeeded: count >> 24))
            bytes.append(UInt8(truncatingIfNeeded: count >> 16))
            bytes.append(UInt8(truncatingIfNeeded: count >> 8))
            bytes.append(UInt8(truncatingIfNeeded: count))
            bytes.append(contentsOf: part)
        }
        func part(_ text: String) {
            var text = text
            text.withUTF8 { part($0) }
        }
        vaultID.withUnsafeBufferPointer { part($0) }
        part(table)
        part(column)
        part(account)
        part(row)
        part(version)
        return bytes
    }
}
