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
    var associatedData: [UInt8] {
        var bytes = Array("credentialvault.seal.v1".utf8)
        for part in [vaultID, Array(table.utf8), Array(column.utf8), Array(account.utf8), Array(row.utf8), Array(version.utf8)] {
            withUnsafeBytes(of: UInt32(part.count).bigEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: part)
        }
        return bytes
    }
}
