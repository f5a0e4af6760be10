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

    fileprivate static let domain = Array("credentialvault.seal.v1".utf8)

    /// Calls `body` with `prefix` (a sealed blob's header), then the domain and the vault id,
    /// table, column, account, row and version, each after its length (so no two different
    /// contexts encode to the same bytes), written on the stack and valid only inside `body`.
    func withAssociatedData<R>(after prefix: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var table = table
        var column = column
        var account = account
        var row = row
        var version = version
        return try table.withUTF8 { table in
            try column.withUTF8 { column in
                try account.withUTF8 { account in
                    try row.withUTF8 { row in
                        try version.withUTF8 { version in
                            try vaultID.withUnsafeBytes { vaultID in
                                let count =
                                    prefix.count + Self.domain.count + 6 * 4 + vaultID.count + table.count + column.count + account.count
                                    + row.count + version.count
                                return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { buffer in
                                    // A cursor passed along rather than a captured `var`: a nested
                                    // function that mutates a capture pays a dynamic exclusivity
                                    // check per call (a tenth of a notification page).
                                    guard let base = buffer.baseAddress else { preconditionFailure("no memory for associated data") }
                                    let limit = base + count
                                    let afterPrefix = Self.put(prefix, at: base, limit: limit)
                                    var end = Self.domain.withUnsafeBytes { Self.put($0, at: afterPrefix, limit: limit) }
                                    end = Self.part(vaultID, at: end, limit: limit)
                                    end = Self.part(UnsafeRawBufferPointer(table), at: end, limit: limit)
                                    end = Self.part(UnsafeRawBufferPointer(column), at: end, limit: limit)
                                    end = Self.part(UnsafeRawBufferPointer(account), at: end, limit: limit)
                                    end = Self.part(UnsafeRawBufferPointer(row), at: end, limit: limit)
                                    end = Self.part(UnsafeRawBufferPointer(version), at: end, limit: limit)
                                    precondition(end == limit, "associated data is shorter than counted")
                                    return try body(UnsafeRawBufferPointer(buffer))
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Copies `bytes` to `position` and returns the position after them; never past `limit`.
    fileprivate static func put(
        _ bytes: UnsafeRawBufferPointer, at position: UnsafeMutableRawPointer, limit: UnsafeMutableRawPointer
    ) -> UnsafeMutableRawPointer {
        precondition(limit - position >= bytes.count, "associated data is longer than counted")
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return position }
        position.copyMemory(from: source, byteCount: bytes.count)
        return position + bytes.count
    }

    /// `bytes` after their length, four bytes big-endian.
    fileprivate static func part(
        _ bytes: UnsafeRawBufferPointer, at position: UnsafeMutableRawPointer, limit: UnsafeMutableRawPointer
    ) -> UnsafeMutableRawPointer {
        let length = withUnsafeBytes(of: UInt32(truncatingIfNeeded: bytes.count).bigEndian) { put($0, at: position, limit: limit) }
        return put(bytes, at: length, limit: limit)
    }
}

/// What the associated data of values in one vault, table, column and account shares, encoded
/// once: a page of notifications opens three columns of one account in 50 rows.
/// ``SymmetricKey/openText(_:sharing:row:version:)`` adds a value's row and version, giving the
/// same bytes as the ``SealContext`` with all six parts.
///
/// ```swift
/// let subjects = SharedSealContext(vaultID: vault, table: "notifications", column: "subject", account: id)
/// let subject = try key.openText(blob, sharing: subjects, row: uuid)
/// ```
public struct SharedSealContext: Sendable {
    /// The domain, then the vault id, table, column and account, each after its length.
    let encoded: [UInt8]

    public init(vaultID: [UInt8], table: String, column: String, account: String) {
        // The same writer as `SealContext.withAssociatedData`, so the two encodings cannot drift.
        let context = SealContext(vaultID: vaultID, table: table, column: column, account: account, row: "")
        let withoutRowAndVersion = context.withAssociatedData(after: UnsafeRawBufferPointer(start: nil, count: 0)) { Array($0) }
        // Drop the empty row's and version's length prefixes; `withAssociatedData(header:row:version:)` writes them.
        encoded = Array(withoutRowAndVersion.dropLast(8))
    }

    /// Calls `body` with `header`, the shared part, then `row` and `version`, written on the
    /// stack, valid only inside `body`.
    func withAssociatedData<R>(
        header: UnsafeRawBufferPointer, row: String, version: String, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        var row = row
        var version = version
        return try row.withUTF8 { row in
            try version.withUTF8 { version in
                try encoded.withUnsafeBytes { shared in
                    let count = header.count + shared.count + 4 + row.count + 4 + version.count
                    return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { buffer in
                        guard let base = buffer.baseAddress else { preconditionFailure("no memory for associated data") }
                        let limit = base + count
                        var end = SealContext.put(header, at: base, limit: limit)
                        end = SealContext.put(shared, at: end, limit: limit)
                        end = SealContext.part(UnsafeRawBufferPointer(row), at: end, limit: limit)
                        end = SealContext.part(UnsafeRawBufferPointer(version), at: end, limit: limit)
                        precondition(end == limit, "associated data is shorter than counted")
                        return try body(UnsafeRawBufferPointer(buffer))
                    }
                }
            }
        }
    }
}
