import Foundation
import GRDB
import VaultCrypto
import VaultSync

/// What the vault header commits to (schema 12): the vault's write counter and, for every
/// account, the counter each row the session layer reads for it was last written at. A row
/// checked alone proves only that the vault once wrote it; against the manifest, a row deleted,
/// or put back from an older copy of the file, is caught where it is used.
///
/// Held in the header row (`vault_meta.manifest`), under the header's MAC: a manifest cannot be
/// deleted or put back apart from the header, and the header is rewritten by every write
/// anyway (its counter). Restoring the *whole* file from an older copy still cannot be told
/// from inside it (the security article says so).
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
        var bytes: [UInt8] = [Self.format]
        for (id, entry) in accounts.sorted(by: { $0.key < $1.key }) {
            let utf8 = Array(id.utf8)
            Self.append(UInt64(utf8.count), width: 4, to: &bytes)
            bytes += utf8
            for value in [entry.account, entry.tokens, UInt64(bitPattern: entry.sessionID), entry.session, entry.policy, entry.refresh] {
                Self.append(value, width: 8, to: &bytes)
            }
        }
        return Data(bytes)
    }

    init() {}

    /// Decodes ``encoded``; nil for bytes it did not write.
    init?(_ data: Data) {
        let bytes = [UInt8](data)
        guard bytes.first == Self.format else { return nil }
        var offset = 1
        func read(_ width: Int) -> UInt64? {
            guard offset + width <= bytes.count else { return nil }
            defer { offset += width }
            return bytes[offset..<(offset + width)].reduce(0) { $0 << 8 | UInt64($1) }
        }
        while offset < bytes.count {
            guard let length = read(4).map(Int.init), offset + length <= bytes.count,
                let id = String(bytes: bytes[offset..<(offset + length)], encoding: .utf8)
            else { return nil }
            offset += length
            guard let account = read(8), let tokens = read(8), let sessionID = read(8), let session = read(8),
                let policy = read(8), let refresh = read(8), accounts[id] == nil
            else { return nil }
            accounts[id] = Account(
                account: account, tokens: tokens, sessionID: Int64(bitPattern: sessionID), session: session, policy: policy, refresh: refresh)
        }
    }

    private static func append(_ value: UInt64, width: Int, to bytes: inout [UInt8]) {
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
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

/// What the vault header commits to for the tables that hold collections of rows (schema 13):
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
    static let tables: [AuthenticatedTable] = [.devices, .notifications, .events, .sessionTransfers]
    static let column = "commitments"
    private static let format: UInt8 = 1

    /// Format 1, then per entry sorted by table and account: the table and the account (each a
    /// 4-byte big-endian length and UTF-8), the count (8 bytes, big-endian) and the sum (32 bytes).
    /// Entries of empty collections are left out.
    var encoded: Data {
        var bytes: [UInt8] = [Self.format]
        for (key, digest) in digests.sorted(by: { $0.key < $1.key }) where digest != MultisetDigest() {
            for part in [key.table, key.account] {
                let utf8 = Array(part.utf8)
                withUnsafeBytes(of: UInt32(truncatingIfNeeded: utf8.count).bigEndian) { bytes.append(contentsOf: $0) }
                bytes += utf8
            }
            withUnsafeBytes(of: digest.count.bigEndian) { bytes.append(contentsOf: $0) }
            bytes += digest.sum
        }
        return Data(bytes)
    }

    init() {}

    /// Decodes ``encoded``; nil for bytes it did not write.
    init?(_ data: Data) {
        let bytes = [UInt8](data)
        guard bytes.first == Self.format else { return nil }
        var offset = 1
        func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, offset + count <= bytes.count else { return nil }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }
        func text() -> String? {
            guard let length = take(4)?.reduce(0, { $0 << 8 | Int($1) }), let utf8 = take(length) else { return nil }
            return String(bytes: utf8, encoding: .utf8)
        }
        while offset < bytes.count {
            guard let table = text(), let account = text(), let count = take(8)?.reduce(UInt64(0), { $0 << 8 | UInt64($1) }),
                let sum = take(MultisetDigest.sumLength), let digest = MultisetDigest(count: count, sum: Array(sum))
            else { return nil }
            let key = Key(table: table, account: account)
            guard digests[key] == nil else { return nil }
            digests[key] = digest
        }
    }
}
