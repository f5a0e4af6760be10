import Foundation
import GRDB
import VaultCrypto
import VaultSync

/// The manifest (schema 12): for every account, the write counter each row the session layer
/// reads for it was last written at. A row checked alone proves only that the vault once wrote
/// it; against the manifest, a row deleted, or put back from an older copy of the file, is
/// caught where it is used.
///
/// Held in the state row (`vault_state.manifest`), under its MAC, beside the write counter and
/// rewritten with it by every write: a manifest cannot be deleted or put back apart from the
/// counter. Restoring the *whole* file from an older copy still cannot be told from inside it
/// (the security article says so).
struct VaultManifest: Equatable, Sendable {
    /// The rows of one account the session layer acts on, each by the counter it was written
    /// at; 0 for a row that does not exist.
    struct Account: Equatable, Sendable {
        var account: UInt64 = 0
        var tokens: UInt64 = 0
        /// The account's newest session (the one ``AccessSnapshot`` reads), by id; 0 for none.
        var sessionID: Int64 = 0
        var session: UInt64 = 0
        var policy: UInt64 = 0
        var refresh: UInt64 = 0
    }

    /// By account id.
    var accounts: [String: Account] = [:]

    /// Which entry of an account's manifest a table's row is.
    enum Slot: CaseIterable, Sendable {
        case account, tokens, session, policy, refresh

        init?(_ table: AuthenticatedTable) {
            switch table {
            case .accounts: self = .account
            case .tokens: self = .tokens
            case .sessions: self = .session
            case .sessionPolicies: self = .policy
            case .refreshState: self = .refresh
            default: return nil
            }
        }

        var table: AuthenticatedTable {
            switch self {
            case .account: .accounts
            case .tokens: .tokens
            case .session: .sessions
            case .policy: .sessionPolicies
            case .refresh: .refreshState
            }
        }
    }

    // MARK: Encoding

    static let column = "manifest"
    private static let format: UInt8 = 1

    /// Format 1, then per account sorted by id: the id (4-byte big-endian length, UTF-8), then
    /// account, tokens, session id, session, policy and refresh counters (8 bytes each, big-endian).
    var encoded: Data {
        var writer = StateBlobWriter(format: Self.format)
        for (id, entry) in accounts.sorted(by: { $0.key < $1.key }) {
            writer.text(id)
            for value in [entry.account, entry.tokens, UInt64(bitPattern: entry.sessionID), entry.session, entry.policy, entry.refresh] {
                writer.number(value)
            }
        }
        return writer.data
    }

    init() {}

    /// Decodes ``encoded``; nil for bytes it did not write.
    init?(_ data: Data) {
        guard var reader = StateBlobReader(data, format: Self.format) else { return nil }
        while !reader.atEnd {
            guard let id = reader.text(), let account = reader.number(), let tokens = reader.number(), let sessionID = reader.number(),
                let session = reader.number(), let policy = reader.number(), let refresh = reader.number(), accounts[id] == nil
            else { return nil }
            accounts[id] = Account(
                account: account, tokens: tokens, sessionID: Int64(bitPattern: sessionID), session: session, policy: policy, refresh: refresh)
        }
    }

}

/// The state of one write transaction (``RowIntegrity/writeCounter(_:)``): its counter, the
/// manifest as the header held it when the transaction began (checked), and the rows of the
/// manifest's tables it wrote or removed, so ``RowIntegrity/finishWrite(_:)`` records exactly
/// those in the header (a row deleted or put back before, without the key, is never recorded
/// as if the vault had done it).
struct WriteScope: Sendable {
    let counter: UInt64
    /// Nil while migrations before schema 12 run: there is no state to keep.
    var manifest: VaultManifest?
    var commitments: VaultCommitments?
    var touched: [String: Set<VaultManifest.Slot>] = [:]
    /// Slots with rows deleted in this transaction (their entries are read back at the end).
    var removed: [String: Set<VaultManifest.Slot>] = [:]
    /// The newest session id of each account written in this transaction.
    var sessionsWritten: [String: Int64] = [:]
    var removedAccounts: Set<String> = []
    /// The counter the state records for the header, and whether this transaction wrote it.
    var metaCounter: UInt64 = 0
    var metaWritten = false
    /// Whether the transaction authenticated or removed any row: one that did not leaves the
    /// state (and its counter) as it was.
    var wrote = false
    var finished = false

    init(counter: UInt64, manifest: VaultManifest?, commitments: VaultCommitments?) {
        self.counter = counter
        self.manifest = manifest
        self.commitments = commitments
    }
}

/// What the state row commits to for the tables that hold collections of rows (schema 12):
/// for each table and account, the rows' count and a keyed multiset hash of their MACs
/// (``MultisetDigest``), updated in the same transaction as every row added, changed or
/// removed. `vault verify` recomputes each from the rows and names the table and account that
/// disagree: a device, notification, event or transfer record deleted, or put back from an older
/// copy, no longer goes unnoticed. Events of the whole vault (no account) are under account "".
struct VaultCommitments: Equatable, Sendable {
    struct Key: Hashable, Comparable, Sendable {
        var table: String
        var account: String
        static func < (a: Key, b: Key) -> Bool { (a.table, a.account) < (b.table, b.account) }
    }

    var digests: [Key: MultisetDigest] = [:]

    /// The tables committed to this way.
    static let tables: [AuthenticatedTable] = schema12Tables + [.resourceTokens, .keySlots]
    /// Those of schema 12 (its migration computes their commitments; later tables do not exist then).
    static let schema12Tables: [AuthenticatedTable] = [.devices, .notifications, .events, .sessionTransfers]
    static let column = "commitments"
    private static let format: UInt8 = 1

    /// Format 1, then per entry sorted by table and account: the table and the account (each a
    /// 4-byte big-endian length and UTF-8), the count (8 bytes, big-endian) and the sum (32 bytes).
    /// Entries of empty collections are left out.
    var encoded: Data {
        var writer = StateBlobWriter(format: Self.format)
        for (key, digest) in digests.sorted(by: { $0.key < $1.key }) where digest != MultisetDigest() {
            writer.text(key.table)
            writer.text(key.account)
            writer.number(digest.count)
            writer.bytes(digest.sum)
        }
        return writer.data
    }

    init() {}

    /// Decodes ``encoded``; nil for bytes it did not write.
    init?(_ data: Data) {
        guard var reader = StateBlobReader(data, format: Self.format) else { return nil }
        while !reader.atEnd {
            guard let table = reader.text(), let account = reader.text(), let count = reader.number(),
                let sum = reader.bytes(MultisetDigest.sumLength), let digest = MultisetDigest(count: count, sum: sum)
            else { return nil }
            let key = Key(table: table, account: account)
            guard digests[key] == nil else { return nil }
            digests[key] = digest
        }
    }
}

/// Writes the state row's blobs: a format byte, then texts (4-byte big-endian length, UTF-8),
/// numbers (8 bytes, big-endian) and fixed-length bytes.
struct StateBlobWriter {
    private(set) var bytes: [UInt8]

    init(format: UInt8) { bytes = [format] }

    var data: Data { Data(bytes) }

    mutating func text(_ text: String) {
        let utf8 = Array(text.utf8)
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: utf8.count).bigEndian) { bytes.append(contentsOf: $0) }
        bytes += utf8
    }

    mutating func number(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func bytes(_ more: [UInt8]) { bytes += more }
}

/// Reads what ``StateBlobWriter`` wrote; every read is nil past the end.
struct StateBlobReader {
    private let bytes: [UInt8]
    private var offset = 1

    /// Nil unless `data` starts with `format`.
    init?(_ data: Data, format: UInt8) {
        bytes = [UInt8](data)
        guard bytes.first == format else { return nil }
    }

    var atEnd: Bool { offset >= bytes.count }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, offset + count <= bytes.count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    mutating func number() -> UInt64? { bytes(8)?.reduce(0) { $0 << 8 | UInt64($1) } }

    mutating func text() -> String? {
        guard let length = bytes(4)?.reduce(0, { $0 << 8 | Int($1) }), let utf8 = bytes(length) else { return nil }
        return String(bytes: utf8, encoding: .utf8)
    }
}
