import Foundation
import GRDB
import VaultCrypto
import VaultSync

// MARK: - The vault's state row: write counter, manifest, commitments (schema 12)

extension RowIntegrity {
    /// What the state row commits to: the vault's write counter, the counter at which the
    /// header (`vault_meta`) was last written, the manifest and the collection commitments.
    struct Commitment: Sendable {
        var counter: UInt64
        var metaCounter: UInt64
        var manifest: VaultManifest
        var commitments: VaultCommitments
    }

    static let stateSQL = "SELECT * FROM vault_state WHERE singleton = 1"
    /// The state row's columns as schema 12 created them, in order; `row_mac` last.
    static let stateColumns = ["singleton", "write_counter", "meta_counter", VaultManifest.column, VaultCommitments.column, RowMAC.column]

    /// The write counter the rows authenticated in `db`'s current transaction carry: one more
    /// than the state row's, the row checked first (a counter, manifest or commitment edited
    /// without the key is never carried on). ``finishWrite(_:)`` records it, with the manifest
    /// entries and commitments of what the transaction wrote; every write transaction that
    /// authenticated a row must reach it (one that did not is refused at commit).
    /// 0 while migrations before schema 12 run (the migration to 12 authenticates every row again).
    func writeCounter(_ db: Database) throws -> UInt64 {
        let connection = ObjectIdentifier(db)
        if let scope = keyring.writeScopes.withLock({ $0[connection] }) { return scope.counter }
        // During migrations the table may not exist yet (an older schema's steps).
        if keyring.acceptsFormat1, try !db.tableExists(AuthenticatedTable.vaultState.name) {
            return try beginCounting(at: 0, manifest: nil, commitments: nil, db)
        }
        guard let state = try StoredRecord.fetchOne(db, Self.stateSQL, table: .vaultState, path: path) else {
            throw VaultError(.damaged, "the vault's state row is missing: \(path) is damaged or was tampered with", path: path)
        }
        try check(state, remembering: true, db)
        let commitment = try commitment(of: state)
        // A write holds the newest state: any counter seen before is a floor.
        let floor = keyring.counterFloor
        guard keyring.observe(commitment.counter, floor: floor) else { throw wentBack(from: floor, to: commitment.counter) }
        try beginCounting(at: commitment.counter + 1, manifest: commitment.manifest, commitments: commitment.commitments, db)
        keyring.writeScopes.withLock { $0[connection]?.metaCounter = commitment.metaCounter }
        return commitment.counter + 1
    }

    /// Makes `counter` the write counter of `db`'s current transaction, `manifest` and
    /// `commitments` (nil: none, before schema 12) the ones its ``finishWrite(_:)`` updates.
    /// Without reading the state row: for a new vault, the migration to schema 12 and a repair.
    @discardableResult
    func beginCounting(at counter: UInt64, manifest: VaultManifest?, commitments: VaultCommitments?, _ db: Database) throws -> UInt64 {
        let connection = ObjectIdentifier(db)
        keyring.writeScopes.withLock { $0[connection] = WriteScope(counter: counter, manifest: manifest, commitments: commitments) }
        db.add(transactionObserver: ScopeEnd(keyring: keyring, connection: connection, path: path), extent: .nextTransaction)
        return counter
    }

    /// Notes that the rows of `table` (a manifest table) for `account` were deleted in this
    /// transaction: ``finishWrite(_:)`` records their absence.
    func removed(_ table: AuthenticatedTable, account: String, _ db: Database) throws {
        guard let slot = VaultManifest.Slot(table) else { return }
        _ = try writeCounter(db)
        keyring.writeScopes.withLock {
            $0[ObjectIdentifier(db)]?.wrote = true
            $0[ObjectIdentifier(db)]?.touched[account, default: []].insert(slot)
            $0[ObjectIdentifier(db)]?.removed[account, default: []].insert(slot)
        }
    }

    /// Notes that `account` was removed with every row of it in this transaction.
    func removedAccount(_ account: String, _ db: Database) throws {
        _ = try writeCounter(db)
        keyring.writeScopes.withLock {
            $0[ObjectIdentifier(db)]?.wrote = true
            $0[ObjectIdentifier(db)]?.removedAccounts.insert(account)
        }
    }

    /// Notes a row authenticated in this transaction (its manifest entry, if it has one).
    func wrote(_ values: StoredRow, layout: RowLayout, table: AuthenticatedTable, _ db: Database) {
        let slot = VaultManifest.Slot(table)
        let account = slot == nil ? nil : Self.account(of: values, layout: layout)
        var session: Int64?
        if slot == .session, let index = layout.positions["session_id"], case .int64(let id) = values.values[index].storage { session = id }
        keyring.writeScopes.withLock {
            $0[ObjectIdentifier(db)]?.wrote = true
            if table == .vaultMeta { $0[ObjectIdentifier(db)]?.metaWritten = true }
            guard let slot, let account else { return }
            $0[ObjectIdentifier(db)]?.touched[account, default: []].insert(slot)
            if let session {
                let newest = max(session, $0[ObjectIdentifier(db)]?.sessionsWritten[account] ?? 0)
                $0[ObjectIdentifier(db)]?.sessionsWritten[account] = newest
            }
        }
    }

    /// Records this transaction's counter, the manifest entries of the rows it wrote or removed
    /// and the commitments in the state row, and authenticates it. Each entry is the counter the
    /// row now carries when this transaction wrote it, 0 when the row is gone; an entry of a row
    /// the transaction did not write stays as it was. Nothing to do when it wrote nothing.
    func finishWrite(_ db: Database) throws {
        let connection = ObjectIdentifier(db)
        guard let scope = keyring.writeScopes.withLock({ $0[connection] }), !scope.finished else { return }
        guard var manifest = scope.manifest, scope.wrote else {
            keyring.writeScopes.withLock { $0[connection]?.finished = true }
            return
        }
        guard var commitments = scope.commitments else {
            // Only the migration to schema 12 and a repair begin without them, and both set them.
            throw VaultError(.storage, "a write to \(path) has no commitments to record; nothing was written", path: path)
        }
        for account in scope.removedAccounts {
            let exists = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM accounts WHERE account_id = ?"), arguments: [account]) ?? false
            guard !exists else { continue }
            manifest.accounts[account] = nil
            // Its collections went with it (ON DELETE CASCADE, its events by hand).
            commitments.digests = commitments.digests.filter { $0.key.account != account }
        }
        for (account, slots) in scope.touched where !(scope.removedAccounts.contains(account) && manifest.accounts[account] == nil) {
            var entry = manifest.accounts[account] ?? VaultManifest.Account()
            for slot in slots {
                // A row this transaction wrote carries its counter; one it deleted is read back.
                let (sessionID, counter): (Int64, UInt64?)
                if scope.removed[account]?.contains(slot) == true {
                    (sessionID, counter) = try currentCounter(slot, account: account, db)
                } else if slot == .session {
                    // An older session written (ended, say) leaves the newest's entry as it was.
                    let written = scope.sessionsWritten[account] ?? 0
                    guard written >= entry.sessionID else { continue }
                    (sessionID, counter) = (written, scope.counter)
                } else {
                    (sessionID, counter) = (0, scope.counter)
                }
                // Only what this transaction wrote (its counter), or removed (no row left).
                guard counter == scope.counter || counter == nil else { continue }
                switch slot {
                case .account: entry.account = counter ?? 0
                case .tokens: entry.tokens = counter ?? 0
                case .session:
                    entry.sessionID = counter == nil ? 0 : sessionID
                    entry.session = counter ?? 0
                case .policy: entry.policy = counter ?? 0
                case .refresh: entry.refresh = counter ?? 0
                }
            }
            manifest.accounts[account] = entry
        }
        let metaCounter = scope.metaWritten ? scope.counter : scope.metaCounter
        keyring.writeScopes.withLock {
            $0[connection]?.manifest = manifest
            $0[connection]?.commitments = commitments
            $0[connection]?.finished = true
        }
        try writeState(
            Commitment(counter: scope.counter, metaCounter: metaCounter, manifest: manifest, commitments: commitments), db)
    }

    /// Writes the state row and its MAC in one statement (every write transaction ends with
    /// it), made from the values themselves rather than read back, and remembers it as
    /// checked and decoded: the next write begins without hashing or decoding it again.
    private func writeState(_ commitment: Commitment, _ db: Database) throws {
        let layout = Self.layout(of: try db.cachedStatement(sql: Self.stateSQL), in: .vaultState)
        // Encoded once (each sorts its entries), for the MAC and the statement.
        let (manifest, commitments) = (commitment.manifest.encoded, commitment.commitments.encoded)
        let known: [DatabaseValue] = [
            Int64(1).databaseValue, Int64(commitment.counter).databaseValue, Int64(commitment.metaCounter).databaseValue,
            manifest.databaseValue, commitments.databaseValue, .null,
        ]
        // The row's values in the statement's column order (`row_mac` NULL until it is made).
        var values: [DatabaseValue]
        if layout.names == Self.stateColumns {
            values = known  // the table as schema 12 made it: one comparison of six names
        } else {
            let names = layout.names
            guard Set(names) == Set(Self.stateColumns) else {
                throw VaultError(.damaged, "the vault's state row has columns this build does not know: \(path) was changed by a newer build", path: path)
            }
            values = names.map { name in Self.stateColumns.firstIndex(of: name).map { known[$0] } ?? .null }
        }
        let authenticator = try writingAuthenticator(db)
        let mac = Data(try self.mac(StoredRow(values: values), layout: layout, table: .vaultState, counter: commitment.counter, authenticator))
        try db.cachedStatement(
            sql: """
                INSERT INTO vault_state (singleton, write_counter, meta_counter, manifest, commitments, row_mac) VALUES (1, ?, ?, ?, ?, ?)
                ON CONFLICT (singleton) DO UPDATE SET write_counter = excluded.write_counter, meta_counter = excluded.meta_counter,
                    manifest = excluded.manifest, commitments = excluded.commitments, row_mac = excluded.row_mac
                """
        ).execute(
            arguments: [Int64(commitment.counter), Int64(commitment.metaCounter), manifest, commitments, mac])
        if let index = layout.macIndex { values[index] = mac.databaseValue }
        keyring.verifiedRows.remember(StoredRow(values: values), table: AuthenticatedTable.vaultState.name, keyID: authenticator.keyID, layout: layout)
        keyring.stateMemo.withLock { $0 = (mac, commitment) }
    }

    /// The counter the account's row of `slot` carries (for a session, the newest one, and its
    /// id); nil when there is none.
    private func currentCounter(_ slot: VaultManifest.Slot, account: String, _ db: Database) throws -> (Int64, UInt64?) {
        let sql =
            slot == .session
            ? "SELECT * FROM sessions WHERE account_id = ? ORDER BY session_id DESC LIMIT 1"
            : "SELECT * FROM \(slot.table.name) WHERE account_id = ?"
        guard let record = try StoredRecord.fetchOne(db, sql, [account], table: slot.table, path: path) else { return (0, nil) }
        let id: Int64 = slot == .session ? (try record.optional("session_id") ?? 0) : 0
        return (id, Self.counter(of: record.values, layout: record.layout))
    }

    // MARK: Checking against the state

    /// What a state row (checked against its MAC) commits to. With `floor`
    /// (``Keyring/counterFloor``, taken before the read began), a counter lower than one this
    /// process saw before is refused: the whole file was put back to an older copy while it was
    /// open, which nothing inside the file can show.
    func commitment(of state: StoredRecord, floor: UInt64? = nil) throws -> Commitment {
        if let mac = try state.optional(RowMAC.column, as: Data.self), let memo = keyring.stateMemo.withLock({ $0 }), memo.mac == mac {
            if let floor, !keyring.observe(memo.commitment.counter, floor: floor) { throw wentBack(from: floor, to: memo.commitment.counter) }
            return memo.commitment
        }
        func blob(_ column: String) throws -> Data? { try state.optional(column, as: Data.self) }
        guard let manifest = try blob(VaultManifest.column).flatMap(VaultManifest.init),
            let commitments = try blob(VaultCommitments.column).flatMap(VaultCommitments.init)
        else {
            throw VaultError(.damaged, "the vault's state row is unreadable: \(path) is damaged or was tampered with", path: path)
        }
        let counter = UInt64(max(try state.value("write_counter", as: Int64.self), 0))
        if let floor, !keyring.observe(counter, floor: floor) { throw wentBack(from: floor, to: counter) }
        let commitment = Commitment(
            counter: counter, metaCounter: UInt64(max(try state.value("meta_counter", as: Int64.self), 0)), manifest: manifest,
            commitments: commitments)
        if let mac = try state.optional(RowMAC.column, as: Data.self) { keyring.stateMemo.withLock { $0 = (mac, commitment) } }
        return commitment
    }

    func wentBack(from seen: UInt64, to counter: UInt64) -> VaultError {
        VaultError(
            .damaged,
            "the vault went back from write \(seen) to write \(counter) while this process had it open: \(path) was replaced by an older copy; nothing is served from it (start again to accept it, or restore the newer file)",
            path: path)
    }

    /// The commitment the rows read in `db`'s transaction are judged by: in a write, the one
    /// the state row held when it began; otherwise the state row's, read and checked now.
    func commitment(_ db: Database) throws -> Commitment? {
        if let scope = keyring.writeScopes.withLock({ $0[ObjectIdentifier(db)] }) {
            guard let manifest = scope.manifest, let commitments = scope.commitments else { return nil }
            return Commitment(counter: scope.counter - 1, metaCounter: scope.metaCounter, manifest: manifest, commitments: commitments)
        }
        guard let state = try StoredRecord.fetchOne(db, Self.stateSQL, table: .vaultState, path: path) else {
            throw VaultError(.damaged, "the vault's state row is missing: \(path) is damaged or was tampered with", path: path)
        }
        try check(state, remembering: true, db)
        // No floor: the transaction may have begun its snapshot before this call (the token
        // path and every write, which begin with the state, compare against one).
        return try commitment(of: state)
    }

    /// Checks the header (checked against its MAC) against the state: written at the counter
    /// the state records for it, so a header put back from an older copy (another account made
    /// active, an older key record) is refused.
    func checkHeader(_ header: StoredRecord, against commitment: Commitment) throws {
        guard let reason = Self.headerProblem(header, commitment) else { return }
        throw VaultError(
            .damaged,
            "the vault header (vault_meta) \(reason): \(path) was tampered with or partly restored from an older copy; restore it from a backup",
            path: path)
    }

    static func headerProblem(_ header: StoredRecord, _ commitment: Commitment) -> String? {
        guard let counter = counter(of: header.values, layout: header.layout) else { return "has no write counter" }
        if counter > commitment.counter { return "is newer than the vault's state (the state was put back from an older copy)" }
        if counter < commitment.metaCounter { return "is older than the vault's record of it (put back from an older copy)" }
        return counter == commitment.metaCounter ? nil : "does not match the vault's record of it"
    }

    /// Checks that the account's row of `slot` as read (nil: none; already checked against its
    /// MAC) is the one the vault last wrote: neither deleted, nor put back from an older copy,
    /// nor newer than the state (a state row put back). Throws ``VaultError/Code/damaged``
    /// naming the table, the row and the account, which the session layer then refuses; other
    /// accounts are not affected. `commitment` nil: read from `db`.
    func checkCurrent(
        _ record: StoredRecord?, _ slot: VaultManifest.Slot, account: String, _ db: Database, commitment given: Commitment? = nil
    ) throws {
        if let record, let reason = Self.foreign(record, account: account) {
            throw VaultError(
                .damaged,
                "\(slot.table.name) row \(record.layout.name(of: record.values)) read for account \(account) \(reason): \(path) was tampered with; the account is refused (restore the vault from a backup)",
                path: path)
        }
        let scope = keyring.writeScopes.withLock { $0[ObjectIdentifier(db)] }
        if let scope, scope.manifest == nil { return }  // a migration before schema 12
        if let scope {
            let counter = record.flatMap { Self.counter(of: $0.values, layout: $0.layout) }
            if counter == scope.counter || (record == nil && scope.touched[account]?.contains(slot) == true) {
                return  // written or removed by this transaction
            }
        }
        guard let commitment = try given ?? commitment(db),
            let reason = try Self.problem(record, slot, account: account, commitment)
        else { return }
        let name = record.map { $0.layout.name(of: $0.values) } ?? account
        throw VaultError(
            .damaged,
            "\(slot.table.name) row \(name) of account \(account) \(reason): \(path) was tampered with or partly restored from an older copy; the account is refused (restore the vault from a backup)",
            path: path)
    }

    /// Checks that `records` (each already checked against its MAC) are every row of `table` (a
    /// committed collection) the vault holds for `account`: their count and multiset hash are the
    /// state's commitment. A row deleted, or put back from an older copy, is caught where the
    /// rows are used (the tokens of other targets), not only by `vault verify`. Throws
    /// ``VaultError/Code/damaged`` naming the table and the account.
    func checkCollection(_ records: [StoredRecord], _ table: AuthenticatedTable, account: String, _ db: Database) throws {
        if let scope = keyring.writeScopes.withLock({ $0[ObjectIdentifier(db)] }), scope.commitments == nil { return }
        guard let commitment = try commitment(db) else { return }
        let expected = commitment.commitments.digests[VaultCommitments.Key(table: table.name, account: account)] ?? MultisetDigest()
        var held = MultisetDigest()
        if !records.isEmpty {
            let hasher = try commitmentHasher(db)
            for record in records {
                guard let index = record.layout.macIndex, case .blob(let mac) = record.values.values[index].storage else { continue }
                try hasher.insert([UInt8](mac), domain: table.name, into: &held)
            }
        }
        guard held != expected else { return }
        let difference =
            held.count == expected.count
            ? "are not the ones the vault wrote"
            : "number \(held.count) where the vault recorded \(expected.count)"
        throw VaultError(
            .damaged,
            "the \(table.name) rows of account \(account) \(difference) (a row was deleted or put back from an older copy): \(path) was tampered with or partly restored from an older copy; the account is refused (restore the vault from a backup)",
            path: path)
    }

    /// Why `record`, which a lookup by `account` found, is not that account's row; nil when it is.
    /// An index altered in the file can lead the lookup to another account's authentic row, which
    /// on equal counters (rows authenticated in one transaction, by a migration say) the
    /// manifest's checks would take for the account's own.
    static func foreign(_ record: StoredRecord, account: String) -> String? {
        Self.account(of: record.values, layout: record.layout) == account ? nil : "belongs to another account (the file's index leads to it)"
    }

    /// Why the account's row of `slot` as read (nil: none) is not the one `commitment`
    /// records; nil when it is.
    static func problem(_ record: StoredRecord?, _ slot: VaultManifest.Slot, account: String, _ commitment: Commitment) throws -> String? {
        let entry = commitment.manifest.accounts[account]
        guard let record else {
            let expected: UInt64 =
                switch slot {
                case .account: entry?.account ?? 0
                case .tokens: entry?.tokens ?? 0
                case .session: entry?.session ?? 0
                case .policy: entry?.policy ?? 0
                case .refresh: entry?.refresh ?? 0
                }
            return expected == 0 ? nil : "was deleted"
        }
        if let reason = foreign(record, account: account) { return reason }
        guard let counter = counter(of: record.values, layout: record.layout) else { return "has no write counter" }
        if counter > commitment.counter { return "is newer than the vault's state (the state was put back from an older copy)" }
        guard let entry else { return "belongs to an account the vault does not record" }
        let expected: UInt64
        switch slot {
        case .account: expected = entry.account
        case .tokens: expected = entry.tokens
        case .policy: expected = entry.policy
        case .refresh: expected = entry.refresh
        case .session:
            let id = try record.value("session_id", as: Int64.self)
            if id < entry.sessionID { return "is not the newest session (a newer one was deleted)" }
            if id > entry.sessionID { return "is a session the vault did not record" }
            expected = entry.session
        }
        if counter < expected { return "is older than the vault's record of it (put back from an older copy)" }
        return counter == expected ? nil : "does not match the vault's record of it"
    }
}

/// Ends a write transaction's ``WriteScope``: refuses to commit one that authenticated rows
/// at a counter the state row does not record (a write path that skipped
/// ``RowIntegrity/finishWrite(_:)``: its rows would look newer than the state to every reader),
/// and forgets the scope however the transaction ends.
final class ScopeEnd: TransactionObserver {
    let keyring: Keyring
    let connection: ObjectIdentifier
    let path: String

    init(keyring: Keyring, connection: ObjectIdentifier, path: String) {
        self.keyring = keyring
        self.connection = connection
        self.path = path
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}

    func databaseWillCommit() throws {
        guard let scope = keyring.writeScopes.withLock({ $0[connection] }), scope.manifest != nil, scope.wrote, !scope.finished else { return }
        throw VaultError(.storage, "a write to \(path) did not record its write counter; nothing was written", path: path)
    }

    func databaseDidCommit(_ db: Database) {
        if let scope = keyring.writeScopes.withLock({ $0[connection] }), scope.manifest != nil, scope.wrote {
            _ = keyring.observe(scope.counter, floor: 0)  // this process's own write is the newest seen
        }
        forget()
    }

    func databaseDidRollback(_ db: Database) { forget() }

    private func forget() { _ = keyring.writeScopes.withLock { $0.removeValue(forKey: connection) } }
}
