import Foundation
import GRDB
import VaultCrypto
import VaultSync

/// A table whose rows carry a `row_mac` (schema 3): every value in it may steer the vault
/// (where a request goes, whether a session is valid), so none is trusted unless the row's
/// MAC matches.
struct AuthenticatedTable: Sendable, Hashable {
    var name: String
    /// The column that selects a row again after a write.
    var keyColumn: String
    /// The column that names a row in errors and reports (a notification's uuid, not its seq).
    var nameColumn: String

    init(name: String, keyColumn: String, nameColumn: String? = nil) {
        self.name = name
        self.keyColumn = keyColumn
        self.nameColumn = nameColumn ?? keyColumn
    }

    static let vaultMeta = AuthenticatedTable(name: "vault_meta", keyColumn: "singleton")
    static let vaultState = AuthenticatedTable(name: "vault_state", keyColumn: "singleton")
    static let accounts = AuthenticatedTable(name: "accounts", keyColumn: "account_id")
    static let tokens = AuthenticatedTable(name: "tokens", keyColumn: "account_id")
    static let sessions = AuthenticatedTable(name: "sessions", keyColumn: "session_id")
    static let sessionPolicies = AuthenticatedTable(name: "session_policies", keyColumn: "account_id")
    static let refreshState = AuthenticatedTable(name: "refresh_state", keyColumn: "account_id")
    static let devices = AuthenticatedTable(name: "devices", keyColumn: "registration_id")
    static let notifications = AuthenticatedTable(name: "notifications", keyColumn: "seq", nameColumn: "uuid")
    static let events = AuthenticatedTable(name: "events", keyColumn: "seq")
    static let sessionTransfers = AuthenticatedTable(name: "session_transfers", keyColumn: "transfer_id")
    static let resourceTokens = AuthenticatedTable(name: "resource_tokens", keyColumn: "token_id")
    static let keySlots = AuthenticatedTable(name: "key_slots", keyColumn: "slot_id")

    /// The tables schema 3 authenticated (its migration authenticates their rows).
    static let schema3: [AuthenticatedTable] = [vaultMeta, accounts, tokens, sessions, sessionPolicies, refreshState, devices, notifications]
    /// The tables schema 12 authenticated (its migration authenticates their rows again).
    static let schema12: [AuthenticatedTable] = schema3 + [events, sessionTransfers, vaultState]
    /// Every authenticated table; `vault_meta` first, `vault_state` (schema 12) last.
    static let all: [AuthenticatedTable] = schema3 + [events, sessionTransfers, resourceTokens, keySlots, vaultState]
}

/// The row MAC of one row, as stored in `row_mac` (format 2, schema 12):
///
/// ```
/// offset  size  field
/// 0       1     format version (2)
/// 1       4     id of the vault key the authenticator was derived from, big-endian
/// 5       8     the vault's write counter when the row was written, big-endian
/// 13      32    keyed BLAKE2b over the row, the counter and the column tags
///               (see ``RowIntegrity/feed(_:table:layout:counter:columnTags:into:)``)
/// 45      4×n   one short tag per column, columns sorted by name: says which column changed
/// ```
///
/// Format 1 (schemas 3 to 11) had no counter, and its tag did not cover the column tags, so
/// a column tag could be edited unnoticed. The migration to schema 12 checks every format-1
/// row and authenticates it again in format 2; after it, a format-1 row is one put back from
/// an older copy of the file.
///
/// The key id sits where a sealed value's does, so a key rotation finds rows still
/// authenticated with the old key the way it finds values still sealed with it.
struct RowMAC {
    static let version: UInt8 = 2
    static let column = "row_mac"

    var format: UInt8
    var keyID: UInt32
    /// The write counter the row was written at; nil in format 1.
    var counter: UInt64?
    var tag: ArraySlice<UInt8>
    var columnTags: ArraySlice<UInt8>

    init?(_ bytes: [UInt8]) {
        guard let fields = bytes.withUnsafeBytes({ Fields($0) }) else { return nil }
        format = fields.format
        keyID = fields.keyID
        counter = fields.counter
        tag = bytes[fields.tag]
        columnTags = bytes[fields.columnTags]
    }

    /// The fields of a stored MAC read where its bytes lie, the tag and column tags as ranges
    /// of them: a row check reads these without copying the blob (a page checks 50).
    struct Fields {
        var format: UInt8
        var keyID: UInt32
        var counter: UInt64?
        var tag: Range<Int>
        var columnTags: Range<Int>

        init?(_ bytes: UnsafeRawBufferPointer) {
            guard let format = bytes.first, format == 1 || format == RowMAC.version else { return nil }
            let header = format == 1 ? 5 : 13
            guard bytes.count >= header + RowAuthenticator.tagLength,
                (bytes.count - header - RowAuthenticator.tagLength) % RowAuthenticator.columnTagLength == 0
            else { return nil }
            self.format = format
            keyID = bytes[1..<5].reduce(0) { $0 << 8 | UInt32($1) }
            counter = format == 1 ? nil : bytes[5..<13].reduce(0) { $0 << 8 | UInt64($1) }
            tag = header..<(header + RowAuthenticator.tagLength)
            columnTags = (header + RowAuthenticator.tagLength)..<bytes.count
        }
    }
}

/// Makes and checks row MACs for one open vault.
///
/// Every write to an authenticated table goes through
/// ``rewrite(_:where:_:_:lookedUpBy:change:)`` (the rows it touches are checked before and
/// authenticated after, so a write never launders a value changed without the key) or
/// ``authenticate(_:where:_:_:)`` (rows that were just inserted). Every read the vault acts on
/// goes through ``check(_:in:_:)``, and a row found by key through ``lookedUp(_:in:by:)`` too.
struct RowIntegrity {
    let keyring: Keyring
    let path: String

    private static let rowDomain = Array("credentialvault.row.v1".utf8)
    private static let rowDomainV2 = Array("credentialvault.row.v2".utf8)
    private static let columnDomain = Array("credentialvault.column.v1".utf8)

    // MARK: Checking

    /// Throws ``VaultError/Code/damaged`` naming the table, the row and the columns that
    /// changed when `row` (read with `SELECT *`) does not carry its own MAC; ``VaultError/Code/closed``
    /// when it was authenticated with a vault key this process does not hold (rotated elsewhere).
    func check(_ row: Row, in table: AuthenticatedTable, _ db: Database) throws {
        try check(StoredRow(row), in: table, layout: Self.layout(of: row, in: table), db)
    }

    /// Throws ``VaultError/Code/damaged`` unless `row`, which a lookup by `key` found, holds
    /// `key`'s values. An index altered in the file can lead a lookup (a device by its
    /// registration id, say) to another authentic row. SQLite reads an indexed column from the
    /// index today, so that row's MAC fails instead; but that is its planner's choice, not a
    /// guarantee. Key values are never in the message.
    func lookedUp(_ row: Row, in table: AuthenticatedTable, by key: KeyValuePairs<String, any DatabaseValueConvertible>) throws {
        for (column, value) in key where (row[column] as DatabaseValue) != value.databaseValue {
            throw VaultError(
                .damaged,
                "\(table.name).\(column) of the row a lookup found is not the value looked up (the file's index leads to another row): \(path) is damaged or was tampered with; restore it from a backup",
                path: path)
        }
    }

    /// The same with the row's values read once (the caller decodes the same values) and the
    /// layout of the statement's rows found once (a page of rows shares it).
    ///
    /// With `remembering`, values identical to ones this vault checked before (every column,
    /// `row_mac` included, byte for byte, under a key this process still holds) are taken as
    /// checked: recomputing their MAC could only give the same answer (see ``VerifiedRows``).
    func check(_ values: StoredRow, in table: AuthenticatedTable, layout: RowLayout, remembering: Bool = false, _ db: Database) throws {
        switch try verdict(values, in: table, layout: layout, remembering: remembering, db) {
        case .authentic:
            return
        case .unknownKey:
            throw VaultError.keyChanged(path: path)
        case .changed(let columns, let reason):
            let names = columns.map { "\(table.name).\($0)" }.joined(separator: ", ")
            throw VaultError(
                .damaged,
                "\(names) of row \(layout.name(of: values)) \(reason): \(path) is damaged or was tampered with; restore it from a backup",
                path: path)
        }
    }

    /// What ``check(_:in:_:)`` found, as a value.
    enum Verdict: Equatable {
        case authentic
        /// Authenticated with a vault key the file names but this process does not hold.
        case unknownKey
        /// Changed without the key: the columns that changed (`row_mac` when it cannot tell).
        case changed(columns: [String], reason: String)
    }

    func verdict(_ row: Row, in table: AuthenticatedTable, _ db: Database) throws -> Verdict {
        try verdict(StoredRow(row), in: table, layout: Self.layout(of: row, in: table), db)
    }

    func verdict(_ values: StoredRow, in table: AuthenticatedTable, layout: RowLayout, remembering: Bool = false, _ db: Database) throws -> Verdict {
        let unreadable = Verdict.changed(
            columns: [RowMAC.column], reason: "is missing or unreadable: the row was written or edited without the vault key")
        guard let index = layout.macIndex, values.values.indices.contains(index), case .blob(let blob) = values.values[index].storage else {
            return unreadable
        }
        // Read where the blob lies: copying it to an array (and freeing it) cost a tenth of the check.
        return try blob.withUnsafeBytes { bytes in
            guard let stored = RowMAC.Fields(bytes) else { return unreadable }
            return try verdict(values, in: table, layout: layout, remembering: remembering, stored: stored, bytes, db)
        }
    }

    private func verdict(
        _ values: StoredRow, in table: AuthenticatedTable, layout: RowLayout, remembering: Bool, stored: RowMAC.Fields,
        _ bytes: UnsafeRawBufferPointer, _ db: Database
    ) throws -> Verdict {
        if stored.format == 1, !keyring.acceptsFormat1 {
            return .changed(
                columns: [RowMAC.column],
                reason: "carries an authenticator from before schema 12: the row was put back from an older copy of the vault")
        }
        guard let authenticator = keyring.rowAuthenticator(id: stored.keyID) else {
            if try vaultKeyIDs(db).contains(stored.keyID) { return .unknownKey }
            return .changed(columns: [RowMAC.column], reason: "names a vault key the vault does not have")
        }
        if remembering, keyring.verifiedRows.contains(values, table: table.name, keyID: stored.keyID) { return .authentic }
        let tag = UnsafeRawBufferPointer(rebasing: bytes[stored.tag])
        let columnTags = stored.counter == nil ? nil : UnsafeRawBufferPointer(rebasing: bytes[stored.columnTags])
        let matches = try tag.withMemoryRebound(to: UInt8.self) { tag in
            try authenticator.matches(tag: tag) {
                feed(values, table: table, layout: layout, counter: stored.counter, columnTags: columnTags, into: &$0)
            }
        }
        if matches {
            if remembering { keyring.verifiedRows.remember(values, table: table.name, keyID: stored.keyID, layout: layout) }
            return .authentic
        }
        guard let parsed = RowMAC(Array(bytes)) else { return .changed(columns: [RowMAC.column], reason: "is unreadable") }
        return .changed(
            columns: try changedColumns(values, table: table, layout: layout, stored: parsed, authenticator),
            reason: "was changed without the vault key")
    }

    // MARK: Writing

    /// ``rewrite(_:where:_:_:lookedUpBy:change:)`` of the rows whose `key` columns hold `key`'s
    /// values, each row found checked to hold them (``lookedUp(_:in:by:)``) before the change.
    func rewrite<T>(
        _ table: AuthenticatedTable, matching key: KeyValuePairs<String, any DatabaseValueConvertible>, _ db: Database, change: () throws -> T
    ) throws -> T {
        let filter = key.map { "\($0.key) = ?" }.joined(separator: " AND ")
        return try rewrite(table, where: filter, StatementArguments(key.map(\.value)), db, lookedUpBy: key, change: change)
    }

    /// Runs `change`, a write to the rows of `table` that `filter` selects, checking each of
    /// those rows before and authenticating them (and any row `filter` selects afterwards, an
    /// upsert's new row say) after, all in the caller's transaction. Each row found must hold
    /// `key`'s values (``lookedUp(_:in:by:)``).
    func rewrite<T>(
        _ table: AuthenticatedTable, where filter: String, _ arguments: StatementArguments,
        _ db: Database, lookedUpBy key: KeyValuePairs<String, any DatabaseValueConvertible> = [:], change: () throws -> T
    ) throws -> T {
        // The counter first: raising it rewrites the header, which must still be as checked.
        _ = try writeCounter(db)
        var keys: [DatabaseValue] = []
        let before = try Row.fetchCursor(db.cachedStatement(sql: "SELECT * FROM \(table.name) WHERE \(filter)"), arguments: arguments)
        while let row = try before.next() {
            try check(row, in: table, db)
            try lookedUp(row, in: table, by: key)
            keys.append(row[table.keyColumn])
            // Out of its account's commitment as it was (the change may move it to another).
            try uncommit(StoredRow(row), layout: Self.layout(of: row, in: table), table: table, db)
        }
        let result = try change()
        let again = keys.isEmpty ? "" : " OR \(table.keyColumn) IN (\(databaseQuestionMarks(count: keys.count)))"
        try authenticate(table, where: "(\(filter))" + again, arguments + StatementArguments(keys), db, uncommitted: true)
        return result
    }

    /// Authenticates the rows of `table` that `filter` selects as they are now, without
    /// checking them first: for rows this transaction just inserted, and for the migration that
    /// introduced row MACs.
    ///
    /// A row of a collection table enters its account's commitment with its new MAC; the one it
    /// replaces (an upsert's row, still carrying its old MAC) leaves it, unless `uncommitted`
    /// (``rewrite(_:where:_:_:lookedUpBy:change:)`` took every such row out before the change).
    func authenticate(
        _ table: AuthenticatedTable, where filter: String, _ arguments: StatementArguments, _ db: Database, uncommitted: Bool = false
    ) throws {
        let authenticator = try writingAuthenticator(db)
        let counter = try writeCounter(db)
        // Read in place (GRDB's `Row` would index every column's name first), all of them
        // before the first update.
        let select = try db.cachedStatement(sql: "SELECT * FROM \(table.name) WHERE \(filter)")
        let layout = Self.layout(of: select, in: table)
        var rows: [StoredRow] = []
        let cursor = try DatabaseValue.fetchCursor(select, arguments: arguments)
        while try cursor.next() != nil { rows.append(StoredRow(current: select)) }
        let update = try db.cachedStatement(sql: "UPDATE \(table.name) SET \(RowMAC.column) = ? WHERE \(table.keyColumn) = ?")
        for values in rows {
            if !uncommitted { try uncommit(values, layout: layout, table: table, db) }
            let mac = try mac(values, layout: layout, table: table, counter: counter, authenticator)
            let key = layout.keyIndex.map { values.values[$0] } ?? .null
            try update.execute(arguments: [Data(mac), key])
            wrote(values, layout: layout, table: table, db)
            try commit(mac, account: Self.account(of: values, layout: layout), table: table, db)
            // As written: the next check of the same bytes (this process's next write, say) is a memo hit.
            if let index = layout.macIndex {
                var written = values.values
                written[index] = Data(mac).databaseValue
                keyring.verifiedRows.remember(StoredRow(values: written), table: table.name, keyID: authenticator.keyID, layout: layout)
            }
        }
    }

    /// Authenticates a row of `table` that the caller writes whole, in one statement, from the
    /// values it writes (`values` in `layout`'s order, `row_mac` NULL) rather than read back:
    /// `write` is handed the MAC to store with them. The row it replaces, if any, must have been
    /// checked in this transaction, as ``rewrite(_:where:_:_:lookedUpBy:change:)`` would. Not for a
    /// collection's rows, whose MACs enter their commitments (``authenticate(_:where:_:_:uncommitted:)``).
    ///
    /// The values must be stored as given: of the type their column's affinity keeps (text in a
    /// TEXT column, an integer in an INTEGER one, a blob or NULL anywhere). A value SQLite
    /// converted would leave a row that fails its check, refused as damaged when next read.
    func writeWhole(_ table: AuthenticatedTable, _ values: [DatabaseValue], layout: RowLayout, _ db: Database, write: (Data) throws -> Void) throws {
        guard !VaultCommitments.tables.contains(table) else {
            throw VaultError(.invalidArgument, "\(table.name) rows enter a commitment: authenticate them after writing", path: path)
        }
        let authenticator = try writingAuthenticator(db)
        let counter = try writeCounter(db)
        let mac = Data(try mac(StoredRow(values: values), layout: layout, table: table, counter: counter, authenticator))
        try write(mac)
        var written = values
        if let index = layout.macIndex { written[index] = mac.databaseValue }
        wrote(StoredRow(values: written), layout: layout, table: table, db)
        // As written: the next check of the same bytes (this process's next write, say) is a memo hit.
        keyring.verifiedRows.remember(StoredRow(values: written), table: table.name, keyID: authenticator.keyID, layout: layout)
    }

    /// A row's `account_id` as text, "" when it has none (an event of the whole vault).
    static func account(of values: StoredRow, layout: RowLayout) -> String {
        guard let index = layout.positions["account_id"], values.values.indices.contains(index),
            case .string(let account) = values.values[index].storage
        else { return "" }
        return account
    }

    // MARK: Collection commitments

    /// Deletes the rows of `table` (a collection table) that `filter` selects, taking each out
    /// of its account's commitment: every deletion of such rows goes through here.
    func delete(from table: AuthenticatedTable, where filter: String, _ arguments: StatementArguments, _ db: Database) throws {
        _ = try writeCounter(db)
        keyring.writeScopes.withLock { $0[ObjectIdentifier(db)]?.wrote = true }
        if VaultCommitments.tables.contains(table) {
            let rows = try Row.fetchCursor(db, sql: "SELECT * FROM \(table.name) WHERE \(filter)", arguments: arguments)
            while let row = try rows.next() { try uncommit(StoredRow(row), layout: Self.layout(of: row, in: table), table: table, db) }
        }
        try db.execute(sql: "DELETE FROM \(table.name) WHERE \(filter)", arguments: arguments)
    }

    /// Takes `row` (as stored, its MAC included) out of its account's commitment.
    private func uncommit(_ values: StoredRow, layout: RowLayout, table: AuthenticatedTable, _ db: Database) throws {
        guard VaultCommitments.tables.contains(table), let index = layout.macIndex, values.values.indices.contains(index),
            case .blob(let old) = values.values[index].storage
        else { return }
        try updateCommitment(table: table, account: Self.account(of: values, layout: layout), db) { hasher, digest in
            try hasher.remove([UInt8](old), domain: table.name, from: &digest)
        }
    }

    private func commit(_ mac: [UInt8], account: String, table: AuthenticatedTable, _ db: Database) throws {
        guard VaultCommitments.tables.contains(table) else { return }
        try updateCommitment(table: table, account: account, db) { hasher, digest in
            try hasher.insert(mac, domain: table.name, into: &digest)
        }
    }

    /// Applies `change` to the commitment of `table` and `account` in this transaction's scope
    /// (nothing before schema 12, whose migration computes them all).
    private func updateCommitment(
        table: AuthenticatedTable, account: String, _ db: Database, _ change: (MultisetHasher, inout MultisetDigest) throws -> Void
    ) throws {
        _ = try writeCounter(db)
        let connection = ObjectIdentifier(db)
        guard var commitments = keyring.writeScopes.withLock({ $0[connection]?.commitments }) else { return }
        let key = VaultCommitments.Key(table: table.name, account: account)
        var digest = commitments.digests[key] ?? MultisetDigest()
        try change(try commitmentHasher(db), &digest)
        commitments.digests[key] = digest
        keyring.writeScopes.withLock { $0[connection]?.commitments = commitments }
    }

    /// The commitments' hasher, its root key opened from the header with the vault key the
    /// first time (a process keeps it while locked, like its row authenticators).
    func commitmentHasher(_ db: Database) throws -> MultisetHasher {
        if let hasher = keyring.commitmentHasher { return hasher }
        guard let root = try commitmentRoot(db) else {
            throw VaultError(.damaged, "the vault header's commitment key is missing: \(path) is damaged or was tampered with", path: path)
        }
        defer { root.wipe() }
        return keyring.keepCommitmentHasher(try MultisetHasher(derivedFrom: root))
    }

    /// The commitments' root key sealed by `newKey` instead (the end of a key rotation): the
    /// key stays the same, so the commitments stay valid however the rotation went. Nil for a
    /// vault before schema 12.
    func commitmentKey(resealedUnder newKey: SymmetricKey, _ db: Database) throws -> Data? {
        guard let root = try commitmentRoot(db) else { return nil }
        defer { root.wipe() }
        return Data(try newKey.wrap(root, context: VaultKeys.commitmentKeyContext(vaultID: keyring.vaultID, sealedBy: newKey.id)))
    }

    /// The commitments' root key, opened from the header with the vault key that sealed it;
    /// nil when the header has none (before schema 12).
    private func commitmentRoot(_ db: Database) throws -> SymmetricKey? {
        guard let row = try Row.fetchOne(db, sql: "SELECT vault_key_id, commitment_key FROM vault_meta WHERE singleton = 1"),
            let sealed = row["commitment_key"] as Data?, let sealedBy = row["vault_key_id"] as Int64?
        else { return nil }
        let vaultKey = try keyring.vaultKey(id: UInt32(truncatingIfNeeded: sealedBy))
        do {
            return try vaultKey.openKey(
                [UInt8](sealed), id: VaultKeys.commitmentRootKeyID, context: VaultKeys.commitmentKeyContext(vaultID: keyring.vaultID, sealedBy: vaultKey.id))
        } catch {
            throw VaultError(.damaged, "the vault header's commitment key does not open: \(path) is damaged or was tampered with", path: path)
        }
    }

    /// Makes the commitments' root key of a vault that has none (a new vault, the migration to
    /// schema 12), sealed by the current vault key into the header (the caller authenticates it).
    func newCommitmentKey(_ db: Database) throws {
        let vaultKey = try keyring.vaultKey()
        let root = try SymmetricKey.generate(id: VaultKeys.commitmentRootKeyID)
        defer { root.wipe() }
        let sealed = try vaultKey.wrap(root, context: VaultKeys.commitmentKeyContext(vaultID: keyring.vaultID, sealedBy: vaultKey.id))
        try db.execute(sql: "UPDATE vault_meta SET commitment_key = ? WHERE singleton = 1", arguments: [Data(sealed)])
        keyring.setCommitmentHasher(try MultisetHasher(derivedFrom: root))
    }

    /// Every collection row's commitment computed from the rows as they are, each checked
    /// against its MAC first (verify, and the migration to schema 12).
    func computeCommitments(
        _ db: Database, checking: Bool, tables: [AuthenticatedTable] = VaultCommitments.tables
    ) throws -> VaultCommitments {
        let hasher = try commitmentHasher(db)
        var commitments = VaultCommitments()
        for table in tables {
            let rows = try Row.fetchCursor(db, sql: "SELECT * FROM \(table.name) ORDER BY rowid")
            while let row = try rows.next() {
                if checking { try check(row, in: table, db) }
                guard let mac = row[RowMAC.column] as Data? else { continue }
                let key = VaultCommitments.Key(table: table.name, account: row["account_id"] as String? ?? "")
                var digest = commitments.digests[key] ?? MultisetDigest()
                try hasher.insert([UInt8](mac), domain: table.name, into: &digest)
                commitments.digests[key] = digest
            }
        }
        return commitments
    }

    /// Starts keeping commitments in this transaction (the migration to schema 12, which
    /// computed them).
    func setCommitments(_ commitments: VaultCommitments, _ db: Database) throws {
        _ = try writeCounter(db)
        keyring.writeScopes.withLock {
            $0[ObjectIdentifier(db)]?.commitments = commitments
            $0[ObjectIdentifier(db)]?.wrote = true
        }
    }

    /// Authenticates every row of `table` as it is, in batches of rowids, so memory stays flat
    /// however many rows it holds. `checkingFirst`: each row is checked against its MAC before
    /// (the migration to schema 12 replaces format-1 MACs and launders none).
    func authenticateAll(_ table: AuthenticatedTable, checkingFirst: Bool = false, _ db: Database) throws {
        var after = Int64.min
        let batch = try db.cachedStatement(sql: "SELECT rowid FROM \(table.name) WHERE rowid > ? ORDER BY rowid LIMIT 1000")
        let read = try db.cachedStatement(sql: "SELECT * FROM \(table.name) WHERE rowid = ?")
        while true {
            let rowids = try Int64.fetchAll(batch, arguments: [after])
            guard let last = rowids.last else { return }
            for rowid in rowids {
                if checkingFirst, let row = try Row.fetchOne(read, arguments: [rowid]) { try check(row, in: table, db) }
                try authenticate(table, where: "rowid = ?", [rowid], db)
            }
            after = last
        }
    }

    /// The schema version whose migration added `row_mac`.
    static let introducedInVersion = 3
    /// The schema version whose migration added the vault's state row (write counter,
    /// manifest, commitments) and row MAC format 2.
    static let countedInVersion = 12

    /// The row MAC of `values` (laid out as `layout`), written at `counter`: made in place,
    /// each column tag and the tag hashed as its bytes are fed (every write makes one or two).
    ///
    /// A column whose value is byte for byte the one in the same row as this vault last checked
    /// or wrote it (``VerifiedRows``, under the same key) keeps that row's column tag: a column
    /// tag covers only the vault, table, row key, column name and value, so hashing them again
    /// would give the same four bytes. A write usually changes a few of a row's columns.
    func mac(
        _ values: StoredRow, layout: RowLayout, table: AuthenticatedTable, counter: UInt64, _ authenticator: RowAuthenticator
    ) throws -> [UInt8] {
        let key = Array(layout.key(of: values).utf8)
        let width = RowAuthenticator.columnTagLength
        let header = 1 + 4 + 8
        let tagEnd = header + RowAuthenticator.tagLength
        var bytes = [UInt8](repeating: 0, count: tagEnd + width * layout.columns.count)
        let previous = previousColumnTags(of: values, layout: layout, table: table, keyID: authenticator.keyID)
        try bytes.withUnsafeMutableBytes { buffer in
            buffer[0] = RowMAC.version
            buffer.storeBytes(of: authenticator.keyID.bigEndian, toByteOffset: 1, as: UInt32.self)
            buffer.storeBytes(of: counter.bigEndian, toByteOffset: 5, as: UInt64.self)
            // Borrowed where they lie, as in `feed`.
            try values.values.withUnsafeBufferPointer { stored in
                try layout.columns.withUnsafeBufferPointer { columns in
                    for position in columns.indices {
                        let start = tagEnd + position * width
                        let index = columns[position].index
                        if let previous, VerifiedRows.same(previous.values[index], stored[index]) {
                            for offset in 0..<width { buffer[start + offset] = previous.tags[previous.tags.startIndex + position * width + offset] }
                            continue
                        }
                        try authenticator.columnTag(into: UnsafeMutableRawBufferPointer(rebasing: buffer[start..<(start + width)])) {
                            feedColumn(layout: layout, key: key, column: columns[position], value: stored[index], into: &$0)
                        }
                    }
                }
            }
            let columnTags = UnsafeRawBufferPointer(rebasing: buffer[tagEnd...])
            try authenticator.tag(into: UnsafeMutableRawBufferPointer(rebasing: buffer[header..<tagEnd])) {
                feed(values, table: table, layout: layout, counter: counter, columnTags: columnTags, into: &$0)
            }
        }
        return bytes
    }

    /// The values and column tags of the row `values` replace, as this vault last checked or
    /// wrote it under the key `keyID`: nil unless that row is remembered with a format-2 MAC of
    /// `keyID` whose column tags are laid out as `layout`'s columns (the same table, the same
    /// columns). Its MAC matched (or was made here), and format 2's tag covers the column tags,
    /// so each is the keyed hash of its column as it was.
    private func previousColumnTags(
        of values: StoredRow, layout: RowLayout, table: AuthenticatedTable, keyID: UInt32
    ) -> (values: [DatabaseValue], tags: ArraySlice<UInt8>)? {
        guard let keyIndex = layout.keyIndex, let macIndex = layout.macIndex, values.values.indices.contains(keyIndex),
            let previous = keyring.verifiedRows.remembered(table: table.name, key: values.values[keyIndex], keyIndex: keyIndex, keyID: keyID),
            previous.count == values.values.count, case .blob(let blob) = previous[macIndex].storage,
            let stored = blob.withUnsafeBytes({ RowMAC.Fields($0) }), stored.format == RowMAC.version, stored.keyID == keyID,
            stored.columnTags.count == layout.columns.count * RowAuthenticator.columnTagLength
        else { return nil }
        // Only the column tags copied out, not the whole MAC.
        return (previous, ArraySlice(blob[(blob.startIndex + stored.columnTags.lowerBound)..<(blob.startIndex + stored.columnTags.upperBound)]))
    }

    /// The write counter `values` were authenticated at; nil for a row without a readable
    /// format-2 MAC.
    static func counter(of values: StoredRow, layout: RowLayout) -> UInt64? {
        // Read in place (verify reads every row's): the same fields ``storedMAC(_:layout:)`` parses.
        guard let index = layout.macIndex, values.values.indices.contains(index), case .blob(let data) = values.values[index].storage else {
            return nil
        }
        return data.withUnsafeBytes { RowMAC.Fields($0)?.counter }
    }

    /// The authenticator new MACs are made with: the next vault key's during a key rotation
    /// when this process holds it, else the current one's. Read in the caller's transaction, so
    /// a rotation finished by another process is noticed (``VaultError/Code/keyChanged``), never
    /// answered with MACs no other process can check.
    func writingAuthenticator(_ db: Database) throws -> RowAuthenticator {
        let ids = try vaultKeyIDs(db)
        for id in ids.reversed() {
            if let authenticator = keyring.rowAuthenticator(id: id) { return authenticator }
        }
        _ = try keyring.vaultKey()  // `.closed` when the keys were wiped
        throw VaultError.keyChanged(path: path)
    }

    /// The vault key ids the file names: the current one, then the next one during a rotation.
    func vaultKeyIDs(_ db: Database) throws -> [UInt32] {
        let statement = try db.cachedStatement(sql: "SELECT vault_key_id, pending_vault_key_id FROM vault_meta WHERE singleton = 1")
        guard let row = try StoredRow.fetchOne(statement) else {
            throw VaultError(.damaged, "the vault header row is missing", path: path)
        }
        let current = try row.stored(at: 0, "vault_key_id", table: "vault_meta", row: "1", path: path, as: Int64.self)
        let pending = try row.storedIfPresent(at: 1, "pending_vault_key_id", table: "vault_meta", row: "1", path: path, as: Int64.self)
        return [current, pending].compactMap { $0.map { UInt32(truncatingIfNeeded: $0) } }
    }

    // MARK: Encoding

    /// What a row's MAC covers: the vault, the table, the write counter (format 2), and every
    /// column but `row_mac` that holds a value, by name (sorted), with its type and bytes, each
    /// length-prefixed, so no two different rows encode alike; then (format 2) the column tags
    /// stored after the tag, so none can be edited unnoticed. A NULL column contributes
    /// nothing, so a column that a later migration adds (NULL in existing rows) leaves their MACs
    /// valid, while setting any column to or from NULL changes the encoding. Hashed as it is
    /// produced: this runs on every read the vault acts on. Format 1 (`counter` nil) covered
    /// neither the counter nor the column tags.
    func feed(
        _ row: StoredRow, table: AuthenticatedTable, layout: RowLayout, counter: UInt64?, columnTags: UnsafeRawBufferPointer?,
        into input: inout TagInput
    ) {
        input.append(counter == nil ? Self.rowDomain : Self.rowDomainV2)
        Self.lengthPrefixed(keyring.vaultID, into: &input)
        Self.lengthPrefixed(layout.tableName, into: &input)
        if let counter { withUnsafeBytes(of: counter.bigEndian) { input.append($0) } }
        // Values and column names borrowed where they lie: copying each out of its array
        // retained and released its storage, which cost more than hashing its bytes.
        row.values.withUnsafeBufferPointer { values in
            layout.columns.withUnsafeBufferPointer { columns in
                for position in columns.indices {
                    let index = columns[position].index
                    if case .null = values[index].storage { continue }
                    columns[position].prefixedName.withUnsafeBytes { input.append($0) }
                    Self.append(values[index], into: &input)
                }
            }
        }
        if let columnTags { Self.lengthPrefixed(columnTags, into: &input) }
    }

    /// What a column's short tag covers: the vault, the table, the row's key, the column's name
    /// and its value (type and bytes), each length-prefixed.
    private func feedColumn(layout: RowLayout, key: [UInt8], column: RowLayout.Column, value: DatabaseValue, into input: inout TagInput) {
        input.append(Self.columnDomain)
        Self.lengthPrefixed(keyring.vaultID, into: &input)
        Self.lengthPrefixed(layout.tableName, into: &input)
        Self.lengthPrefixed(key, into: &input)
        input.append(column.prefixedName)
        Self.append(value, into: &input)
    }

    /// The columns whose short tags no longer match; `row_mac` itself when none (or when the
    /// row's columns are not those it was authenticated with).
    private func changedColumns(
        _ values: StoredRow, table: AuthenticatedTable, layout: RowLayout, stored: RowMAC,
        _ authenticator: RowAuthenticator
    ) throws -> [String] {
        let width = RowAuthenticator.columnTagLength
        guard stored.columnTags.count == layout.columns.count * width else { return [RowMAC.column] }
        let key = Array(layout.key(of: values).utf8)
        var changed: [String] = []
        for (position, column) in layout.columns.enumerated() {
            let start = stored.columnTags.startIndex + position * width
            var tag = [UInt8](repeating: 0, count: width)
            try tag.withUnsafeMutableBytes { tag in
                try authenticator.columnTag(into: tag) { feedColumn(layout: layout, key: key, column: column, value: values.values[column.index], into: &$0) }
            }
            if Array(stored.columnTags[start..<(start + width)]) != tag { changed.append(column.name) }
        }
        return changed.isEmpty ? [RowMAC.column] : changed
    }

    static func storedMAC(_ row: StoredRow, layout: RowLayout) -> RowMAC? {
        guard let index = layout.macIndex, row.values.indices.contains(index), case .blob(let data) = row.values[index].storage else { return nil }
        return RowMAC(data.withUnsafeBytes { Array($0) })
    }

    /// How a table's `SELECT *` rows are encoded: their columns but `row_mac`, sorted by name,
    /// with their positions, and where `row_mac` is. It also finds a column's position by name
    /// for the readers that decode the same values (``StoredRecord``).
    struct RowLayout: Sendable {
        struct Column: Sendable {
            var name: String
            /// The name's length (four bytes, big-endian), then its UTF-8: how the MAC input names it.
            var prefixedName: [UInt8]
            var index: Int
        }
        var tableName: [UInt8]
        /// The statement's column names, in its order.
        var names: [String]
        var columns: [Column]
        var macIndex: Int?
        /// Every column's position by its name as the statement spells it (`row_mac` included).
        var positions: [String: Int]
        /// Where the key column (``AuthenticatedTable/keyColumn``) and the naming column are.
        var keyIndex: Int?
        var nameIndex: Int?

        init(table: AuthenticatedTable, names: [String]) {
            tableName = Array(table.name.utf8)
            self.names = names
            columns = names.enumerated().filter { $0.element != RowMAC.column }
                .map { Column(name: $0.element, prefixedName: RowIntegrity.prefixed(Array($0.element.utf8)), index: $0.offset) }
                .sorted { $0.name < $1.name }
            macIndex = names.firstIndex(of: RowMAC.column)
            var positions: [String: Int] = [:]
            for (index, name) in names.enumerated() where positions[name] == nil { positions[name] = index }
            self.positions = positions
            keyIndex = positions[table.keyColumn]
            nameIndex = positions[table.nameColumn]
        }

        /// The position of `column`: the vault's SQL spells every column as the schema does,
        /// and a case-insensitive match (GRDB's rule) is the fallback.
        func position(of column: String) -> Int? {
            if let index = positions[column] { return index }
            let wanted = column.lowercased()
            return positions.first { $0.key.lowercased() == wanted }?.value
        }

        /// The row's key as text (an integer key as its number), "?" when unreadable.
        func key(of values: StoredRow) -> String { Self.text(values, at: keyIndex) }
        /// How errors name the row (a notification's uuid, not its seq).
        func name(of values: StoredRow) -> String { Self.text(values, at: nameIndex) }

        private static func text(_ values: StoredRow, at index: Int?) -> String {
            guard let index, values.values.indices.contains(index) else { return "?" }
            switch values.values[index].storage {
            case .string(let text): return text
            case .int64(let number): return String(number)
            default: return "?"
            }
        }
    }

    private struct LayoutKey: Hashable {
        var table: String
        var columnCount: Int
    }

    /// Layouts by table and column count, made once per process: every `SELECT *` of a table
    /// lists the same columns in the same order while the schema stays (a migration that adds a
    /// column changes the count). Reading and sorting column names on every row was a third of
    /// the cost of checking one.
    private static let layouts = Locked<[LayoutKey: RowLayout]>([:])

    static func layout(of row: Row, in table: AuthenticatedTable) -> RowLayout {
        layout(in: table, columnCount: row.count) { Array(row.columnNames) }
    }

    /// The layout of the rows `statement` (a `SELECT *` of `table`) returns.
    static func layout(of statement: Statement, in table: AuthenticatedTable) -> RowLayout {
        layout(in: table, columnCount: statement.columnCount) { statement.columnNames }
    }

    /// The layout of `table`'s row at `columns` of `statement`'s rows (a join selecting `t.*`
    /// there): the same layout as a `SELECT *` of the table.
    static func layout(of statement: Statement, columns: Range<Int>, in table: AuthenticatedTable) -> RowLayout {
        layout(in: table, columnCount: columns.count) { Array(statement.columnNames[columns]) }
    }

    private static func layout(in table: AuthenticatedTable, columnCount: Int, names: () -> [String]) -> RowLayout {
        let key = LayoutKey(table: table.name, columnCount: columnCount)
        if let known = layouts.withLock({ $0[key] }) { return known }
        let layout = RowLayout(table: table, names: names())
        layouts.withLock { $0[key] = layout }
        return layout
    }

    fileprivate static func prefixed(_ part: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        append(part, to: &bytes)
        return bytes
    }

    private static func lengthPrefixed(_ part: [UInt8], into input: inout TagInput) {
        input.append(bigEndian: UInt32(truncatingIfNeeded: part.count))
        input.append(part)
    }

    private static func lengthPrefixed(_ part: UnsafeRawBufferPointer, into input: inout TagInput) {
        input.append(bigEndian: UInt32(truncatingIfNeeded: part.count))
        input.append(part)
    }

    /// A type tag, then the value's bytes: integers and reals as 8 big-endian bytes, text as UTF-8.
    private static func append(_ value: DatabaseValue, into input: inout TagInput) {
        switch value.storage {
        case .null:
            input.append(byte: 0)
            input.append(bigEndian: 0)
        case .int64(let number):
            input.append(byte: 1)
            withUnsafeBytes(of: number.bigEndian) { lengthPrefixed($0, into: &input) }
        case .double(let number):
            input.append(byte: 2)
            withUnsafeBytes(of: number.bitPattern.bigEndian) { lengthPrefixed($0, into: &input) }
        case .string(let text):
            input.append(byte: 3)
            // Read in place (a native string always is); `withUTF8` would need a mutable copy.
            let done: Void? = text.utf8.withContiguousStorageIfAvailable { lengthPrefixed(UnsafeRawBufferPointer($0), into: &input) }
            if done == nil { lengthPrefixed(Array(text.utf8), into: &input) }
        case .blob(let data):
            input.append(byte: 4)
            data.withUnsafeBytes { lengthPrefixed($0, into: &input) }
        }
    }

    /// A length-prefixed part into an array (a column's name, prefixed once per layout).
    private static func append(_ part: [UInt8], to bytes: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: part.count).bigEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: part)
    }
}
