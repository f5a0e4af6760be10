import CSodiumBaseline
import Foundation
import GRDB
import VaultStore

// MARK: - Notification pages

/// Builds one vault per size (reused by the maintenance figures) and times the first and the
/// deepest page of 50, newest first, against the unavoidable work of the same page (issue 16,
/// and issue 32 item 3 for the MACs): the same 50 rows read from a plaintext table of the same
/// shape through a prepared keyset statement, one keyed BLAKE2b per row over as many bytes as
/// the vault's row MAC covers, compared with the row's stored tag, plus one
/// `crypto_aead_xchacha20poly1305_ietf_decrypt` per value the vault opens for that page, of the
/// same sizes. Each size and depth against its own baseline.
func benchNotificationPages(_ report: Report, dir: URL, scale: Scale, measure: Bool = true) async throws -> [(Int, BenchVault)] {
    var vaults: [(Int, BenchVault)] = []
    for size in scale.notificationSizes {
        let start = nowNanos()
        let bench = try makeVault(in: dir, name: "history-\(size)", tokenEndpoint: unusedEndpoint, tokens: sampleTokens(expiresIn: 3600))
        try fillNotifications(bench, count: size)
        log("   generated \(size) notifications in \(fmt(Double(nowNanos() - start) / 1e9)) s")
        vaults.append((size, bench))
    }
    guard measure else { return vaults }
    log("== notification pages of 50, newest first (vs plaintext keyset page + the same decryptions + row MACs)")
    guard sodium_init() >= 0 else { throw BenchError("sodium_init failed") }
    for (size, bench) in vaults {
        let vault = try bench.open()
        defer { vault.close() }
        let plain = try PlaintextNotifications(copying: bench, in: dir, name: "history-\(size)-plain")
        defer { plain.close() }
        // The cursor just before the oldest 50: the deepest page a reader can reach.
        let deepest = try plain.deepestCursor()
        guard let deepCursor = NotificationCursor("n1.\(deepest.createdAt).\(deepest.seq)") else { throw BenchError("no deep cursor") }
        let firstWork = try plain.pageWork(after: nil)
        let deepWork = try plain.pageWork(after: deepest)
        let first = Operation(body: {
            guard try vault.notifications.page(NotificationQuery(limit: 50)).items.count == 50 else { throw BenchError("short first page") }
        })
        let deep = Operation(body: {
            guard try vault.notifications.page(NotificationQuery(limit: 50, after: deepCursor)).items.count == 50 else {
                throw BenchError("short deep page")
            }
        })
        let firstBaseline = Operation(body: { try plain.page(after: nil, work: firstWork) })
        let deepBaseline = Operation(body: { try plain.page(after: deepest, work: deepWork) })
        for (name, pair, work) in [
            ("first page", try await measurePair(warmup: 30, iterations: scale.pageIterations, block: 50, first, firstBaseline), firstWork),
            ("deepest page", try await measurePair(warmup: 30, iterations: scale.pageIterations, block: 50, deep, deepBaseline), deepWork),
        ] {
            let ratio = pair.vault.p50 / pair.baseline.p50
            report.add(
                Figure(
                    figure: "notification page of 50: \(size) rows, \(name) (vs plaintext keyset page + \(work.count) decrypts + row MACs)",
                    vault: pair.vault.p50 / 1000, baseline: pair.baseline.p50 / 1000, unit: "µs p50", ratio: ratio,
                    target: "<= 1.5", met: ratio <= 1.5,
                    detail: "p99 \(fmt(pair.vault.p99 / 1000)) vs \(fmt(pair.baseline.p99 / 1000)) µs, n=\(pair.vault.count); "
                        + "row MAC input \(plain.macInputBytes.min)–\(plain.macInputBytes.max) bytes a row, as the vault's"))
        }
    }
    return vaults
}

/// The baseline of a notification page: a plaintext copy of a vault's `notifications` table
/// (same columns, same rows, same `created_at`/`seq`, plain text of the sealed values' plaintext
/// sizes instead of the sealed values, the same indexes), read through a prepared keyset
/// statement; per row, a row MAC as the vault's format 2 has it; plus the AEAD opens the vault
/// does for the page, on values of the same sizes.
///
/// The row MAC (issue 32 item 3: the vault must check every row's MAC, so the baseline pays
/// for one too): one keyed BLAKE2b (`crypto_generichash`, 32-byte key, 32-byte tag) per row
/// over the bytes the vault's row MAC covers for the same row (`RowIntegrity.feed`: domain,
/// vault id, table, the counter, every non-NULL column but `row_mac` sorted by name with its
/// length-prefixed name, type byte and length-prefixed value, then the length-prefixed column
/// tags), the sealed columns' bytes being sealed values of the vault's sizes (header, nonce,
/// ciphertext and tag: the same bytes the baseline then opens), and the tag compared in
/// constant time with the one stored in the row's `row_mac` (written by the baseline's own key
/// when the copy is made; the counter and column tags are the vault row's). The copy checks
/// that every row's MAC input is exactly as long as the vault's for the same row.
final class PlaintextNotifications {
    /// The AEAD overhead of a sealed value: format byte, key id, nonce, tag.
    static let sealOverhead = sealHeader + Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES) + Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    /// Format byte and key id, before the nonce.
    static let sealHeader = 5
    static let sealedColumns = ["subject", "message", "actions", "action_taken"]

    let pool: DatabasePool
    private let key = randomBytes(Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES))
    private let nonce = randomBytes(Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES))
    /// As long as the vault's associated data (domain, vault id, table, column, account, row, header).
    private let ad = randomBytes(23 + 16 + 13 + 7 + 36 + 36 + 6 * 4 + 5)
    /// A sealed value per plaintext size (the index), made once: header, nonce, ciphertext and
    /// tag, as long as the vault's sealed value of that size (empty: none made). The row MAC
    /// hashes all of it; the open reads the ciphertext after the header and nonce.
    private var sealed: [[UInt8]] = []
    private var output = [UInt8](repeating: 0, count: 4096)
    /// The row MAC's key and the vault's id (its bytes, as the vault's MAC input has them).
    private let macKey = randomBytes(Int(crypto_generichash_KEYBYTES))
    private var vaultID: [UInt8] = []
    /// The MAC input of the row being checked, reused from row to row.
    private let macInput = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
    /// Bytes of MAC input per row of the copy, as the vault's rows have them (min, max).
    private(set) var macInputBytes = (min: Int.max, max: 0)

    init(copying bench: BenchVault, in dir: URL, name: String) throws {
        let url = dir.appendingPathComponent("\(name).db")
        let queue = try DatabaseQueue(path: url.path)
        // Plain text of each sealed value's plaintext length (NULL stays NULL).
        let plainOf = { (column: String) in
            "CASE WHEN \(column) IS NULL THEN NULL ELSE substr(replace(hex(zeroblob(length(\(column)))), '0', 'a'), 1, length(\(column)) - \(Self.sealOverhead)) END"
        }
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS vault", arguments: [bench.url.path])
            try db.inTransaction {
                try db.execute(
                    sql: """
                        CREATE TABLE notifications (
                            seq                  INTEGER PRIMARY KEY,
                            account_id           TEXT    NOT NULL,
                            uuid                 TEXT    NOT NULL,
                            subject              TEXT    NOT NULL,
                            message              TEXT    NOT NULL,
                            actions              TEXT    NOT NULL,
                            created_at           INTEGER NOT NULL,
                            expires_at           INTEGER,
                            status               TEXT    NOT NULL CHECK (status IN ('pending', 'answered', 'expired', 'dismissed')),
                            action_taken         TEXT,
                            answered_at          INTEGER,
                            answered_by_device   TEXT,
                            updated_at           INTEGER NOT NULL,
                            row_mac              BLOB,
                            UNIQUE (account_id, uuid));
                        INSERT INTO notifications SELECT seq, account_id, uuid, \(plainOf("subject")), \(plainOf("message")),
                            \(plainOf("actions")), created_at, expires_at, status, \(plainOf("action_taken")), answered_at,
                            answered_by_device, updated_at, row_mac FROM vault.notifications;
                        CREATE INDEX notifications_newest         ON notifications(created_at DESC, seq DESC);
                        CREATE INDEX notifications_account_newest ON notifications(account_id, created_at DESC, seq DESC);
                        CREATE INDEX notifications_status_newest  ON notifications(status, created_at DESC, seq DESC);
                        CREATE INDEX notifications_account_status ON notifications(account_id, status, created_at DESC, seq DESC);
                        """)
                return .commit
            }
            try db.execute(sql: "DETACH DATABASE vault")
        }
        try queue.close()
        pool = try DatabasePool(path: url.path, configuration: baselineConfiguration())
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS vault", arguments: [bench.url.path])
            guard let id = try Data.fetchOne(db, sql: "SELECT vault_id FROM vault.vault_meta WHERE singleton = 1") else {
                throw BenchError("the vault has no id")
            }
            vaultID = [UInt8](id)
            try authenticateCopy(db)
            try db.execute(sql: "DETACH DATABASE vault")
        }
    }

    /// Gives every row of the copy a row MAC of the baseline's key (the vault row's counter and
    /// column tags, a tag of its own), in one transaction; checks on the way that each row's
    /// MAC input is as long as the vault's for the same row.
    private func authenticateCopy(_ db: Database) throws {
        try db.inTransaction {
            try db.execute(sql: "CREATE TEMP TABLE baseline_macs (seq INTEGER PRIMARY KEY, mac BLOB NOT NULL)")
            let insert = try db.makeStatement(sql: "INSERT INTO baseline_macs VALUES (?, ?)")
            // A sealed value of every plaintext size the copy holds.
            try makeSealed(
                Int.fetchAll(
                    db,
                    sql: """
                        SELECT length(subject) FROM main.notifications UNION SELECT length(message) FROM main.notifications
                        UNION SELECT length(actions) FROM main.notifications
                        UNION SELECT length(action_taken) FROM main.notifications WHERE action_taken IS NOT NULL
                        """))
            let rows = try Row.fetchCursor(
                db, sql: "SELECT p.*, v.* FROM main.notifications p JOIN vault.notifications v ON v.seq = p.seq ORDER BY p.seq")
            var tag = [UInt8](repeating: 0, count: Int(crypto_generichash_BYTES))
            while let row = try rows.next() {
                let plain = Self.plainNotification(row)
                guard let vaultMAC = plain.rowMAC.map({ [UInt8]($0) }), vaultMAC.count >= 45, vaultMAC[0] == 2 else {
                    throw BenchError("notification \(plain.seq) has no format-2 row MAC")
                }
                // The stored MAC: the vault row's header and column tags, the baseline's tag.
                var mac = vaultMAC
                let length = try vaultMAC.withUnsafeBytes { vaultMAC in
                    try Self.encodeMACInput(
                        plain, counter: UnsafeRawBufferPointer(rebasing: vaultMAC[5..<13]),
                        columnTags: UnsafeRawBufferPointer(rebasing: vaultMAC[45...]), vaultID: vaultID, sealed: sealed, into: macInput)
                }
                let vaultLength = Self.vaultMACInputLength(
                    Array(Array(row.databaseValues).dropFirst(14)), names: Array(Array(row.columnNames).dropFirst(14)), vaultIDLength: vaultID.count)
                guard length == vaultLength else {
                    throw BenchError("notification \(plain.seq): the baseline hashes \(length) bytes, the vault \(vaultLength)")
                }
                macInputBytes = (min(macInputBytes.min, vaultLength), max(macInputBytes.max, vaultLength))
                crypto_generichash(&tag, tag.count, macInput.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(length), macKey, macKey.count)
                mac.replaceSubrange(13..<45, with: tag)
                try insert.execute(arguments: [plain.seq, Data(mac)])
            }
            try db.execute(sql: "UPDATE main.notifications SET row_mac = (SELECT mac FROM baseline_macs m WHERE m.seq = notifications.seq)")
            try db.execute(sql: "DROP TABLE baseline_macs")
            return .commit
        }
    }

    /// How many bytes the vault's row MAC (format 2) hashes for a row of its own (`values` and
    /// `names` of a `SELECT *`): see `RowIntegrity.feed` in Sources/VaultStore.
    static func vaultMACInputLength(_ values: [DatabaseValue], names: [String], vaultIDLength: Int) -> Int {
        var length = "credentialvault.row.v2".utf8.count + 4 + vaultIDLength + 4 + "notifications".utf8.count + 8
        for (name, value) in zip(names, values) {
            switch value.storage {
            case .null: continue
            case .blob(let mac) where name == "row_mac": length += 4 + (mac.count - 45)
            case .int64, .double: length += 4 + name.utf8.count + 1 + 4 + 8
            case .string(let text): length += 4 + name.utf8.count + 1 + 4 + text.utf8.count
            case .blob(let data): length += 4 + name.utf8.count + 1 + 4 + data.count
            }
        }
        return length
    }

    func close() { try? pool.close() }

    deinit { macInput.deallocate() }

    struct Cursor {
        var createdAt: Int64
        var seq: Int64
    }

    /// The cursor just before the oldest 50 rows, as the vault's deepest page uses.
    func deepestCursor() throws -> Cursor {
        try pool.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT created_at, seq FROM notifications ORDER BY created_at ASC, seq ASC LIMIT 1 OFFSET 50")
            else { throw BenchError("no deep cursor") }
            return Cursor(createdAt: row[0], seq: row[1])
        }
    }

    /// The plaintext sizes of the values the vault opens for the page after `cursor` (in order).
    func pageWork(after cursor: Cursor?) throws -> [Int] {
        let sizes: [Int] = try pool.read { db in
            var sizes: [Int] = []
            let rows = try Row.fetchCursor(
                db.cachedStatement(sql: Self.pageSQL), arguments: [cursor?.createdAt ?? Int64.max, cursor?.seq ?? Int64.max])
            while let row = try rows.next() {
                for column in Self.sealedColumns {
                    if let text = row[column] as String? { sizes.append(text.utf8.count) }
                }
            }
            return sizes
        }
        guard !sizes.isEmpty else { throw BenchError("empty baseline page") }
        try makeSealed(sizes)
        if let largest = sizes.max(), largest > output.count { output = [UInt8](repeating: 0, count: largest) }
        return sizes
    }

    /// A sealed value of each plaintext size in `sizes` (once per size).
    private func makeSealed(_ sizes: some Sequence<Int>) throws {
        for size in Set(sizes) where !sealed.indices.contains(size) || sealed[size].isEmpty {
            let message = randomBytes(size)
            var ciphertext = [UInt8](repeating: 0, count: size + Int(crypto_aead_xchacha20poly1305_ietf_ABYTES))
            var length: UInt64 = 0
            crypto_aead_xchacha20poly1305_ietf_encrypt(&ciphertext, &length, message, UInt64(size), ad, UInt64(ad.count), nil, nonce, key)
            if sealed.count <= size { sealed += Array(repeating: [], count: size + 1 - sealed.count) }
            sealed[size] = [2, 0, 0, 0, 1] + nonce + ciphertext
        }
    }

    static let pageSQL = """
        SELECT * FROM notifications WHERE (created_at, seq) < (?, ?) ORDER BY created_at DESC, seq DESC LIMIT 50
        """

    /// The 50 rows, every column read into a value, each row's MAC checked (`macs`: the
    /// baseline before issue 32 had none), and one AEAD open per sealed value of the page.
    func page(after cursor: Cursor?, work: [Int], macs: Bool = true) throws {
        let rows: [PlainNotification] = try pool.read { db in
            var rows: [PlainNotification] = []
            rows.reserveCapacity(50)
            let cursor = try Row.fetchCursor(
                db.cachedStatement(sql: Self.pageSQL), arguments: [cursor?.createdAt ?? Int64.max, cursor?.seq ?? Int64.max])
            while let row = try cursor.next() { rows.append(Self.plainNotification(row)) }
            return rows
        }
        guard rows.count == 50 else { throw BenchError("short baseline page") }
        if macs {
            // Read once for the page (no access check per row).
            let (sealed, vaultID) = (self.sealed, self.vaultID)
            for row in rows { try checkMAC(row, sealed: sealed, vaultID: vaultID) }
        }
        let headerAndNonce = Self.sealHeader + nonce.count
        for size in work {
            guard sealed.indices.contains(size), !sealed[size].isEmpty else { throw BenchError("no sealed value of \(size) bytes") }
            let value = sealed[size]
            var written: UInt64 = 0
            let opened = value.withUnsafeBufferPointer { value -> Int32 in
                guard let base = value.baseAddress else { return -1 }
                return crypto_aead_xchacha20poly1305_ietf_decrypt(
                    &output, &written, nil, base + headerAndNonce, UInt64(value.count - headerAndNonce), ad, UInt64(ad.count), nonce, key)
            }
            guard opened == 0 else { throw BenchError("baseline open failed") }
        }
    }

    private static func plainNotification(_ row: Row) -> PlainNotification {
        PlainNotification(
            seq: row[0], account: row[1], uuid: row[2], subject: row[3], message: row[4], actions: row[5],
            createdAt: row[6], expiresAt: row[7], status: row[8], actionTaken: row[9], answeredAt: row[10],
            answeredByDevice: row[11], updatedAt: row[12], rowMAC: row[13])
    }

    /// One keyed BLAKE2b over the row's MAC input, compared with the tag its `row_mac` holds.
    private func checkMAC(_ row: PlainNotification, sealed: [[UInt8]], vaultID: [UInt8]) throws {
        guard let stored = row.rowMAC, stored.count >= 45 else { throw BenchError("notification \(row.seq) has no row MAC") }
        let matches = try stored.withUnsafeBytes { (stored: UnsafeRawBufferPointer) -> Bool in
            let length = try Self.encodeMACInput(
                row, counter: UnsafeRawBufferPointer(rebasing: stored[5..<13]), columnTags: UnsafeRawBufferPointer(rebasing: stored[45...]),
                vaultID: vaultID, sealed: sealed, into: macInput)
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(crypto_generichash_BYTES)) { tag in
                guard let tagBase = tag.baseAddress, let storedBase = stored.baseAddress,
                    let input = macInput.baseAddress?.assumingMemoryBound(to: UInt8.self)
                else { return false }
                crypto_generichash(tagBase, tag.count, input, UInt64(length), macKey, macKey.count)
                return sodium_memcmp(tagBase, storedBase + 13, tag.count) == 0
            }
        }
        guard matches else { throw BenchError("notification \(row.seq): row MAC does not match") }
    }

    /// The columns as the MAC input names them, sorted (as the vault's layout has them), each
    /// with its length prefix; `encodeMACInput` names them by position.
    private static let macNames: [[UInt8]] = [
        "account_id", "action_taken", "actions", "answered_at", "answered_by_device", "created_at", "expires_at", "message", "seq",
        "status", "subject", "updated_at", "uuid",
    ].map { lengthPrefixed(Array($0.utf8)) }
    private static let domain = Array("credentialvault.row.v2".utf8)
    private static let table = lengthPrefixed(Array("notifications".utf8))

    private static func lengthPrefixed(_ bytes: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { Array($0) } + bytes
    }

    /// `row`'s MAC input, written to `buffer`; returns its length. What the vault's
    /// `RowIntegrity.feed` hashes for the same row (format 2), the sealed columns as sealed
    /// values of their sizes. Copies into raw memory through a writer with mutating methods,
    /// as lean as a hand-written encoder gets (nested functions that mutate a captured `var`
    /// pay a dynamic exclusivity check per call; the vault's `TagInput` avoids them too).
    private static func encodeMACInput(
        _ row: PlainNotification, counter: UnsafeRawBufferPointer, columnTags: UnsafeRawBufferPointer, vaultID: [UInt8], sealed: [[UInt8]],
        into buffer: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        var out = try MACWriter(buffer)
        try out.put(domain)
        try out.length(vaultID.count)
        try out.put(vaultID)
        try out.put(table)
        try out.put(counter)
        // Sorted by name (`macNames`), as the vault's layout has them.
        try out.text(0, row.account)
        try out.sealed(1, row.actionTaken, sealed)
        try out.sealed(2, row.actions, sealed)
        try out.integer(3, row.answeredAt)
        try out.text(4, row.answeredByDevice)
        try out.integer(5, row.createdAt)
        try out.integer(6, row.expiresAt)
        try out.sealed(7, row.message, sealed)
        try out.integer(8, row.seq)
        try out.text(9, row.status)
        try out.sealed(10, row.subject, sealed)
        try out.integer(11, row.updatedAt)
        try out.text(12, row.uuid)
        try out.length(columnTags.count)
        try out.put(columnTags)
        return out.written
    }

    private struct MACWriter {
        let start: UnsafeMutableRawPointer
        let end: UnsafeMutableRawPointer
        var position: UnsafeMutableRawPointer

        init(_ buffer: UnsafeMutableRawBufferPointer) throws {
            guard let start = buffer.baseAddress else { throw BenchError("no MAC buffer") }
            self.start = start
            end = start + buffer.count
            position = start
        }

        var written: Int { position - start }

        mutating func put(_ bytes: UnsafeRawBufferPointer) throws {
            guard let base = bytes.baseAddress else { return }
            guard end - position >= bytes.count else { throw BenchError("a row MAC input over \(end - start) bytes") }
            position.copyMemory(from: base, byteCount: bytes.count)
            position += bytes.count
        }

        mutating func put(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try put($0) } }

        mutating func put(byte: UInt8) throws {
            guard end - position >= 1 else { throw BenchError("a row MAC input over \(end - start) bytes") }
            position.storeBytes(of: byte, as: UInt8.self)
            position += 1
        }

        mutating func length(_ count: Int) throws {
            try withUnsafeBytes(of: UInt32(truncatingIfNeeded: count).bigEndian) { try put($0) }
        }

        mutating func integer(_ column: Int, _ value: Int64?) throws {
            guard let value else { return }
            try put(macNames[column])
            try put(byte: 1)
            try length(8)
            try withUnsafeBytes(of: value.bigEndian) { try put($0) }
        }

        mutating func text(_ column: Int, _ value: String?) throws {
            guard var value else { return }
            try put(macNames[column])
            try put(byte: 3)
            try value.withUTF8 { utf8 in
                try length(utf8.count)
                try put(UnsafeRawBufferPointer(utf8))
            }
        }

        mutating func sealed(_ column: Int, _ plaintext: String?, _ sealed: [[UInt8]]) throws {
            guard let plaintext else { return }
            let size = plaintext.utf8.count
            guard sealed.indices.contains(size), !sealed[size].isEmpty else { throw BenchError("no sealed value of \(size) bytes") }
            try put(macNames[column])
            try put(byte: 4)
            try length(sealed[size].count)
            try put(sealed[size])
        }
    }
}

struct PlainNotification {
    var seq: Int64
    var account: String
    var uuid: String
    var subject: String
    var message: String
    var actions: String
    var createdAt: Int64
    var expiresAt: Int64?
    var status: String
    var actionTaken: String?
    var answeredAt: Int64?
    var answeredByDevice: String?
    var updatedAt: Int64
    var rowMAC: Data?
}

// MARK: - Maintenance at scale

/// `vault verify` and `vault rotate-key` as whole processes on the two largest history vaults,
/// and `vault migrate` on schema-1 vaults of the same sizes: rows per second and peak RSS (GNU
/// time's maximum resident set size).
func benchMaintenance(_ report: Report, vaults: [(Int, BenchVault)], vaultBinary: String, dir: URL) async throws {
    // The two largest sizes, whatever the scale (quick mode's are small too).
    let largest = vaults.sorted { $0.0 < $1.0 }.suffix(2)
    guard largest.count == 2, let small = largest.first, let big = largest.last else {
        throw BenchError("the maintenance figures need two history vaults, got \(vaults.count)")
    }
    for command in ["verify", "rotate-key", "migrate"] {
        log("== vault \(command)")
        var measured: [(rows: Int, seconds: Double, peakKiB: Int)] = []
        for (size, bench) in [small, big] {
            let run: (seconds: Double, peakKiB: Int, status: Int32)
            if command == "migrate" {
                let old = try Schema1Vault.grown(to: size, in: dir)
                run = try await runVault(vaultBinary, ["migrate", "--json"] + old.arguments, dir: dir, tag: "migrate-\(size)")
                guard run.status == 0 else { throw BenchError("vault migrate exited \(run.status) on a schema-1 vault of \(size) rows") }
                try await old.checkMigrated(vaultBinary: vaultBinary, dir: dir)
                old.remove()
            } else {
                run = try await runVault(vaultBinary, [command, "--json"], bench, dir: dir, tag: "\(command)-\(size)")
                guard run.status == 0 else { throw BenchError("vault \(command) exited \(run.status) on \(size) rows") }
            }
            measured.append((size, run.seconds, run.peakKiB))
            log("   \(size) rows: \(fmt(run.seconds)) s, peak \(run.peakKiB / 1024) MiB")
        }
        let (a, b) = (measured[0], measured[1])
        let what = command == "migrate" ? "schema 1 → latest" : "notifications"
        report.add(
            Figure(
                figure: "vault \(command), \(b.rows) \(what): rows/s", vault: Double(b.rows) / b.seconds,
                baseline: nil, unit: "rows/s", ratio: nil, target: "reported", met: true,
                detail: "\(fmt(b.seconds)) s whole process; \(a.rows) rows: \(fmt(Double(a.rows) / a.seconds)) rows/s"))
        let ratio = Double(b.peakKiB) / Double(max(1, a.peakKiB))
        report.add(
            Figure(
                figure: "vault \(command) peak RSS, \(b.rows) vs \(a.rows) rows", vault: Double(b.peakKiB) / 1024,
                baseline: Double(a.peakKiB) / 1024, unit: "MiB", ratio: ratio, target: "<= 1.5", met: ratio <= 1.5,
                detail: "GNU time maximum resident set size"))
    }
}

/// `vault verify` in process on the largest history vault against a same-run baseline: every
/// row of the same tables read by a plain `SELECT *` and a keyed BLAKE2b (`crypto_generichash`)
/// computed over its values, which is the least a check of every row costs (issue 31). Verify
/// also checks the counters and the manifest, recomputes the collection commitments (a second
/// keyed hash per row) and has SQLite's `quick_check` read the file beside it. `verify --deep`
/// (reported, against that baseline plus `integrity_check`) also opens every sealed value
/// (XChaCha20-Poly1305) and runs the full `integrity_check` instead.
func benchVerify(_ report: Report, vaults: [(Int, BenchVault)], quick: Bool) async throws {
    guard let (rows, bench) = vaults.max(by: { $0.0 < $1.0 }) else { throw BenchError("verify needs a history vault") }
    log("== vault verify in process, \(rows) notifications, against keyed BLAKE2b over the same rows")
    let vault = try bench.open()
    defer { vault.close() }
    let tables = [
        "vault_meta", "accounts", "tokens", "sessions", "session_policies", "refresh_state", "devices", "notifications", "events",
        "session_transfers",
    ]
    let queue = try DatabaseQueue(path: bench.url.path)
    defer { try? queue.close() }
    var randomKey = [UInt8](repeating: 0, count: 32)
    randombytes_buf(&randomKey, randomKey.count)
    let key = randomKey
    var sink: UInt8 = 0
    let runs = quick ? 2 : 5
    var vaultSamples: [UInt64] = []
    var baselineSamples: [UInt64] = []
    var deepSamples: [UInt64] = []
    var structureSamples: [UInt64] = []
    for _ in 0..<runs {
        var start = nowNanos()
        let verified = try vault.maintenance.verify()
        vaultSamples.append(nowNanos() - start)
        guard verified.passed else { throw BenchError("the history vault does not verify: \(verified.damaged.prefix(3))") }
        start = nowNanos()
        let deep = try vault.maintenance.verify(depth: .deep)
        deepSamples.append(nowNanos() - start)
        guard deep.passed else { throw BenchError("the history vault does not verify --deep: \(deep.damaged.prefix(3))") }
        start = nowNanos()
        sink ^= try await queue.read { db -> UInt8 in
            var folded: UInt8 = 0
            var tag = [UInt8](repeating: 0, count: 32)
            for table in tables {
                let cursor = try Row.fetchCursor(db, sql: "SELECT * FROM \(table)")
                while let row = try cursor.next() {
                    var bytes: [UInt8] = []
                    for value in row.databaseValues {
                        switch value.storage {
                        case .null: bytes.append(0)
                        case .int64(let number): withUnsafeBytes(of: number.bigEndian) { bytes.append(contentsOf: $0) }
                        case .double(let number): withUnsafeBytes(of: number.bitPattern.bigEndian) { bytes.append(contentsOf: $0) }
                        case .string(let text): bytes.append(contentsOf: text.utf8)
                        case .blob(let data): bytes.append(contentsOf: data)
                        }
                    }
                    crypto_generichash(&tag, tag.count, bytes, UInt64(bytes.count), key, key.count)
                    folded ^= tag[0]
                }
            }
            return folded
        }
        baselineSamples.append(nowNanos() - start)
        // SQLite's own check of the file's structure, which verify runs beside its row pass.
        start = nowNanos()
        let structure = try await queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
        structureSamples.append(nowNanos() - start)
        guard structure == ["ok"] else { throw BenchError("integrity_check: \(structure.prefix(3))") }
    }
    let (v, b) = (Stats(vaultSamples), Stats(baselineSamples))
    let ratio = v.p50 / b.p50
    report.add(
        Figure(
            figure: "vault verify, \(rows) notifications (vs keyed BLAKE2b over the same rows)", vault: v.p50 / 1e6, baseline: b.p50 / 1e6,
            unit: "ms p50", ratio: ratio, target: "<= 1.3", met: ratio <= 1.3,
            detail:
                "\(runs) runs each, in process; verify also checks the counters, recomputes the commitments and runs quick_check beside it (sink \(sink & 1))"
        ))
    // `--deep` also opens every sealed value and has SQLite run its full structure check (on
    // another thread, beside the row pass): the same baseline with that check after it, for
    // scale (reported, not a target).
    let (d, s) = (Stats(deepSamples), Stats(structureSamples))
    report.add(
        Figure(
            figure: "vault verify --deep, \(rows) notifications (vs that baseline + PRAGMA integrity_check)", vault: d.p50 / 1e6,
            baseline: (b.p50 + s.p50) / 1e6, unit: "ms p50", ratio: d.p50 / (b.p50 + s.p50), target: "reported", met: true,
            detail: "integrity_check alone p50 \(fmt(s.p50 / 1e6)) ms, one thread; --deep runs it beside the rows on two cores"))
}

/// A real schema-1 vault of a given size for `vault migrate`: the schema-1 fixture
/// (`Tests/Fixtures/vault-v1.db`, written by schema 1's own code: its schema, its key wrapping,
/// its three notifications) grown by `rows` notifications of its account alice.
///
/// The rows are sealed by today's code in a migrated copy of the same fixture (same vault id,
/// same account data key) and copied, column for column of schema 1, into an untouched copy:
/// a sealed value's associated data names the vault, table, column, account and row, none of
/// which the copy changes, so they open there as they would have had schema 1 written them.
/// `vault migrate` then takes the vault through every step, schema 3's first authentication of
/// every row included, and `checkMigrated` holds the result to every row being authentic.
struct Schema1Vault {
    let url: URL
    let passphraseFile: URL
    let rows: Int

    static let passphrase = "fixture passphrase v1"
    /// The fixture's own notifications (`FixtureV1` in Tests/VaultTestSupport).
    static let fixtureNotifications = 3
    static let notificationColumns = """
        seq, account_id, uuid, subject, message, actions, created_at, expires_at, status, action_taken,
        answered_at, answered_by_device, updated_at
        """

    /// Tests/Fixtures/vault-v1.db of this checkout (this file is Benchmarks/Sources/VaultBench/History.swift).
    static var fixture: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/vault-v1.db")
    }

    var arguments: [String] { ["--vault", url.path, "--passphrase-file", passphraseFile.path] }

    static func grown(to rows: Int, in dir: URL) throws -> Schema1Vault {
        let start = nowNanos()
        let files = FileManager.default
        let url = dir.appendingPathComponent("schema1-\(rows).db")
        let donor = dir.appendingPathComponent("schema1-\(rows)-donor.db")
        let passphraseFile = dir.appendingPathComponent("schema1.passphrase")
        for file in [url, donor] {
            try? files.removeItem(at: file)
            try files.copyItem(at: fixture, to: file)
            try files.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        }
        defer { for suffix in ["", "-wal", "-shm"] { try? files.removeItem(atPath: donor.path + suffix) } }
        guard files.createFile(atPath: passphraseFile.path, contents: Data(passphrase.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw BenchError("cannot write \(passphraseFile.path)")
        }
        // The donor: opened (so migrated) by today's code, which seals the new rows.
        let vault = try Vault.open(at: donor, credential: .passphrase(passphrase), options: quietOptions())
        guard let alice = try vault.accounts.all().first(where: { $0.subject == "alice" }) else {
            vault.close()
            throw BenchError("the schema-1 fixture has no account alice")
        }
        do {
            try fillNotifications(vault, account: alice.id, count: rows, uuidPrefix: "b0000000")
            vault.close()
        } catch {
            vault.close()
            throw error
        }
        // The copy stays as schema 1 wrote it; only notifications rows are added.
        let queue = try DatabaseQueue(path: url.path)
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS donor", arguments: [donor.path])
            try db.inTransaction {
                try db.execute(
                    sql: """
                        INSERT INTO main.notifications (\(notificationColumns))
                        SELECT \(notificationColumns) FROM donor.notifications WHERE uuid LIKE 'b0000000-%'
                        """)
                return .commit
            }
            try db.execute(sql: "DETACH DATABASE donor")
            let version = try Int.fetchOne(db, sql: "PRAGMA user_version")
            let applied = try Int.fetchAll(db, sql: "SELECT version FROM vault_migrations ORDER BY version")
            let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications") ?? 0
            guard version == 1, applied == [1], count == rows + fixtureNotifications else {
                throw BenchError(
                    "the grown vault is not schema 1 with \(rows + fixtureNotifications) notifications "
                        + "(user_version \(version ?? -1), migrations \(applied), \(count) rows)")
            }
        }
        log("   grew the schema-1 fixture to \(rows + fixtureNotifications) notifications in \(fmt(Double(nowNanos() - start) / 1e9)) s")
        return Schema1Vault(url: url, passphraseFile: passphraseFile, rows: rows)
    }

    /// The migrated vault is at the latest schema, holds every notification, and `vault verify`
    /// finds every sealed value opening and every row authentic.
    func checkMigrated(vaultBinary: String, dir: URL) async throws {
        let facts = try Vault.inspect(at: url, options: quietOptions())
        guard facts.schemaVersion == facts.latestSchemaVersion, facts.pendingMigrations.isEmpty else {
            throw BenchError("vault migrate left schema \(facts.schemaVersion) of \(facts.latestSchemaVersion)")
        }
        let verified = try await runVault(vaultBinary, ["verify", "--json"] + arguments, dir: dir, tag: "migrated-verify-\(rows)")
        guard verified.status == 0 else { throw BenchError("vault verify exited \(verified.status) on the migrated schema-1 vault of \(rows) rows") }
        let queue = try DatabaseQueue(path: url.path, configuration: baselineConfiguration())
        defer { try? queue.close() }
        let count = try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications") ?? 0 }
        guard count == rows + Self.fixtureNotifications else {
            throw BenchError("the migrated vault holds \(count) notifications, not \(rows + Self.fixtureNotifications)")
        }
    }

    func remove() {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
        // The pre-migration backup `vault migrate` leaves next to the vault.
        let dir = url.deletingLastPathComponent()
        let name = url.lastPathComponent
        for file in (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] where file.hasPrefix(name + ".v") {
            try? FileManager.default.removeItem(at: dir.appendingPathComponent(file))
        }
    }
}
