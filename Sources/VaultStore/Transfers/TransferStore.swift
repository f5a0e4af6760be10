import Foundation
import GRDB
import VaultCrypto

/// One export written or import stored (schema 7), remembered so a blob is taken at most once.
public struct SessionTransferRecord: Sendable, Hashable {
    public enum Direction: String, Sendable, Hashable { case export, `import` }
    /// 32 lowercase hex digits, made by the exporting vault.
    public var id: String
    public var direction: Direction
    public var mode: SessionTransferMode
    public var account: AccountID
    public var at: Date
    /// When the blob stops being importable.
    public var expiresAt: Date
    /// The other vault's recipient fingerprint: the recipient of an export, the sender of an
    /// import (as its blob claims: a sealed box does not prove who sealed it).
    public var peer: String

    public init(id: String, direction: Direction, mode: SessionTransferMode, account: AccountID, at: Date, expiresAt: Date, peer: String) {
        self.id = id
        self.direction = direction
        self.mode = mode
        self.account = account
        self.at = at
        self.expiresAt = expiresAt
        self.peer = peer
    }
}

/// Why an export or import was refused. Nothing was stored or changed when one is thrown,
/// except for ``Code-swift.struct/unfinished`` and ``Code-swift.struct/changed`` (the blob was written and must not be imported).
public struct SessionTransferError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Not a session export, or not one this build reads.
        public static let malformed = Code("malformed")
        /// Sealed to another vault's recipient key.
        public static let wrongRecipient = Code("wrongRecipient")
        /// Changed after it was sealed (or sealed to another key with this one's fingerprint).
        public static let tampered = Code("tampered")
        /// Past its expiry, or the session it carries is past its absolute deadline.
        public static let expired = Code("expired")
        /// This vault already imported it.
        public static let alreadyImported = Code("alreadyImported")
        /// The account's session is not active (locked, ended, or none): nothing to export.
        public static let sessionNotActive = Code("sessionNotActive")
        /// The session to export is locked: unlock it first.
        public static let sessionLocked = Code("sessionLocked")
        /// Not a recipient key, or one mistyped (its checksum does not match).
        public static let malformedRecipient = Code("malformedRecipient")
        /// Another process is refreshing the tokens: try again.
        public static let busy = Code("busy")
        /// The tokens changed between sealing the blob and letting go of the grant.
        public static let changed = Code("changed")
        /// The vault has an account of that issuer and subject with other client settings, or
        /// its own refresh token an access token alone would replace.
        public static let conflict = Code("conflict")
        /// The account is a client's (the client credentials grant, schema 14): it has no
        /// user's session or refresh token to hand over, and its secret or key stays here.
        public static let notTransferable = Code("notTransferable")
        /// The blob was written, but recording the export (and, for a move, letting go of the
        /// grant) failed: the blob must not be imported.
        public static let unfinished = Code("unfinished")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// An account's session as an export carries it: read under the refresh lease, so no other
/// process rotates its refresh token until the export lets go.
public struct SessionSnapshot: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var account: Account
    public var clientSecret: String?
    public var tokens: StoredTokens
    public var session: SessionRecord
    public var policy: SessionPolicy

    /// Never the client secret; the tokens' own redacting description.
    public var description: String {
        "SessionSnapshot(account: \(account.id), session: \(session.id), \(tokens), secret: \(clientSecret == nil ? "none" : "<redacted>"))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["description": description], displayStyle: .struct) }
}

/// A session to store from an import, already opened and checked.
public struct SessionImport: Sendable {
    public var account: NewAccount
    public var credentialHosts: [String]
    public var credentialUsername: String?
    public var tokens: TokenSet
    public var policy: SessionPolicy
    public var startedAt: Date
    public var authTime: Date?
    /// The original session's absolute deadline: an imported session never outlives it.
    public var absoluteDeadline: Date?
    public var transfer: SessionTransferRecord
    public var origin: AccountOrigin

    public init(
        account: NewAccount, credentialHosts: [String], credentialUsername: String?, tokens: TokenSet,
        policy: SessionPolicy, startedAt: Date, authTime: Date?, absoluteDeadline: Date?,
        transfer: SessionTransferRecord, origin: AccountOrigin
    ) {
        self.account = account
        self.credentialHosts = credentialHosts
        self.credentialUsername = credentialUsername
        self.tokens = tokens
        self.policy = policy
        self.startedAt = startedAt
        self.authTime = authTime
        self.absoluteDeadline = absoluteDeadline
        self.transfer = transfer
        self.origin = origin
    }
}

/// What ``TransferStore/importSession(_:eventOrigin:)`` stored.
public struct SessionImportRecord: Sendable {
    public var signIn: SignInRecord
    /// Credential hosts the blob named that another account of this vault already has (not set).
    public var skippedHosts: [String]
}

/// Sessions moved between vaults: this vault's recipient key, the export lease that keeps an
/// exported session from being used in two places, the import, and the remembered transfers
/// that refuse the same envelope twice.
///
/// ```swift
/// for transfer in try vault.transfers.all() { print(transfer.direction, transfer.account, transfer.peer) }
/// ```
public struct TransferStore: VaultArea {
    let core: VaultCore

    /// This vault's recipient key pair, derived from the vault key (a new key, a new pair).
    public func recipientKey() throws -> RecipientKeyPair {
        try RecipientKeyPair(derivedFrom: keyring.vaultKey())
    }

    /// Reads the account's session for an export and takes its refresh lease as `holder`, in one
    /// transaction. Refused unless the session is active and has tokens, and while another
    /// live process holds the lease (it is refreshing).
    package func beginExport(of id: AccountID, holder: String, leaseDuration: Duration) throws -> SessionSnapshot {
        let now = clock.now()
        let latestLease = now.addingTimeInterval(leaseDuration.timeInterval + 1)
        return try write("preparing a session export") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [id.rawValue]) else {
                throw self.accountNotFound(id)
            }
            let account = try core.accounts.record(from: row, db)
            guard let session = try core.sessions.current(for: id, db), session.state == .active else {
                let state = try core.sessions.current(for: id, db).map { "\($0.state.rawValue)" + ($0.endReason.map { " (\($0))" } ?? "") }
                let locked = state?.hasPrefix("locked") == true
                throw SessionTransferError(
                    locked ? .sessionLocked : .sessionNotActive,
                    "the session of account \(id) is \(state ?? "not started")" + (locked ? "; unlock it first" : "; nothing to export"))
            }
            guard let tokens = try core.tokens.current(for: id, db) else {
                throw SessionTransferError(.sessionNotActive, "account \(id) has no tokens; nothing to export")
            }
            let state = try core.leases.state(for: id, db)
            let holderGone = try core.leases.leaseProcess(for: id, db).flatMap(LeaseProcess.init)?.isGone ?? false
            if let other = state.leaseHolder, other != holder, let until = state.leaseExpiresAt, until > now, until <= latestLease, !holderGone {
                throw SessionTransferError(.busy, "another process is refreshing the tokens of account \(id); try again in a moment")
            }
            try core.leases.writeLease(for: id, holder: holder, generation: tokens.generation, now: now, leaseDuration: leaseDuration, interrupted: false, db)
            let clientSecret = try self.open(
                row.storedIfPresent("client_secret", table: "accounts", row: id.rawValue, path: self.path, as: Data.self),
                table: "accounts", column: "client_secret", account: id, row: id.rawValue, db)
            return SessionSnapshot(
                account: account, clientSecret: clientSecret, tokens: tokens, session: session,
                policy: try core.sessions.policy(for: id, db))
        }
    }

    /// Records an export once its blob was written, in one transaction: with `.move` the tokens
    /// are wiped and the session ends (`exported`), so the refresh token has one holder; the
    /// lease `holder` took is released; the transfer and an event are recorded. Throws
    /// `.changed` (and changes nothing) when the lease was lost or the tokens changed since
    /// the snapshot: the blob written then holds a refresh token that is no longer current.
    /// Returns the session it ended (nil for `.accessOnly`).
    package func finishExport(
        _ snapshot: SessionSnapshot, holder: String?, transfer: SessionTransferRecord,
        eventOrigin: String, recording: EventRecording<SessionRecord?>? = nil
    ) throws -> SessionRecord? {
        let id = snapshot.account.id
        let now = Date(millisecondsSince1970: clock.now().millisecondsSince1970)
        return try write("recording a session export", recording: recording) { db in
            var ended: SessionRecord?
            if let holder {
                if transfer.mode == .move {
                    // The blob holds the refresh token of the snapshot: it must still be the current one.
                    let state = try core.leases.state(for: id, db)
                    guard state.leaseHolder == holder, try core.tokens.currentGeneration(for: id, db) == snapshot.tokens.generation else {
                        throw SessionTransferError(
                            .changed,
                            "the tokens of account \(id) changed while the export was written (another process refreshed them): do not import it; export again")
                    }
                    try core.tokens.wipe(for: id, db)
                    let open = try core.sessions.current(for: id, db)
                    try self.integrity.rewrite(.sessions, where: "account_id = ? AND state IN ('active', 'locked')", [id.rawValue], db) {
                        try db.execute(
                            sql: """
                                UPDATE sessions SET state = 'expired', end_reason = 'exported', ended_at = ?, version = coalesce(version, 0) + 1,
                                    extension_holder = NULL, extension_deadline = NULL
                                WHERE account_id = ? AND state IN ('active', 'locked')
                                """, arguments: [now.millisecondsSince1970, id.rawValue])
                    }
                    ended = try open.flatMap { try core.sessions.session(id: $0.id, account: id, db) }
                }
                try self.releaseLease(for: id, holder: holder, db)
            }
            try self.insertTransfer(transfer, after: try self.rememberedTransferCount(db), db)
            try core.events.insert(
                kind: "session_exported", account: id,
                data: [
                    "transfer": transfer.id, "mode": transfer.mode.rawValue, "recipient": transfer.peer,
                    "expires_at": String(transfer.expiresAt.millisecondsSince1970),
                ], origin: eventOrigin, at: now, db)
            return ended
        }
    }

    /// Releases the lease an export took, when its blob could not be written. Changes nothing else.
    package func abandonExport(of id: AccountID, holder: String) throws {
        try write("abandoning a session export") { db in try self.releaseLease(for: id, holder: holder, db) }
    }

    /// Stores an imported session in one transaction: the account (added, or the one of that
    /// issuer and subject, whose client and endpoints must match and which keeps its own
    /// settings), its tokens and policy, a session keeping the original start, authentication
    /// time and absolute deadline, the account made active, the transfer remembered and an
    /// event recorded. Refused (nothing stored) when the transfer was already imported, when
    /// a remembered transfer was deleted from the file (``VaultError/Code/damaged``), and when
    /// an access token alone would replace the account's own refresh token.
    public func importSession(_ imported: SessionImport, eventOrigin: String) throws -> SessionImportRecord {
        try importSession(imported, eventOrigin: eventOrigin, recording: nil)
    }

    /// The same, with the events that describe the import written in its transaction.
    package func importSession(
        _ imported: SessionImport, eventOrigin: String, recording: EventRecording<SessionImportRecord>?
    ) throws -> SessionImportRecord {
        try imported.policy.validate()
        let now = Date(millisecondsSince1970: clock.now().millisecondsSince1970)
        return try write("importing a session", recording: recording) { db in
            let count = try self.rememberedTransferCount(db)
            if let earlier = try self.rememberedTransfer(imported.transfer.id, db) {
                throw SessionTransferError(
                    .alreadyImported,
                    earlier == .import
                        ? "this export (\(imported.transfer.id)) was already imported; ask for a new one"
                        : "this export (\(imported.transfer.id)) was made by this vault; import it into the vault whose recipient key it was sealed to")
            }
            var new = imported.account
            // A CA file is a path on the exporting machine: an import never brings one (an
            // existing account keeps its own, below).
            new.client.caFile = nil
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE issuer = ? AND subject = ?", arguments: [new.issuer, new.subject]) {
                try self.integrity.lookedUp(row, in: .accounts, by: ["issuer": new.issuer, "subject": new.subject])
                // An existing account keeps its own settings: a blob (anyone can seal one to a
                // public recipient key) never re-points where this vault sends its credentials.
                let existing = try core.accounts.record(from: row, db)
                guard existing.client.clientID == new.client.clientID, existing.client.tokenEndpoint == new.client.tokenEndpoint,
                    existing.client.revocationEndpoint == new.client.revocationEndpoint, existing.client.pins == new.client.pins,
                    existing.client.authentication == new.client.authentication
                else {
                    throw SessionTransferError(
                        .conflict,
                        "account \(existing.id) has the same issuer and subject but another client or other endpoints; remove it first to import this session"
                    )
                }
                new.providerMetadata = existing.providerMetadata
                new.subjectSource = existing.subjectSource
                new.client.redirectURI = existing.client.redirectURI
                new.client.caFile = existing.client.caFile
                let held = try Row.fetchOne(db, sql: "SELECT * FROM tokens WHERE account_id = ?", arguments: [existing.id.rawValue])
                if let held { try self.integrity.check(held, in: .tokens, db) }
                if imported.tokens.refreshToken == nil, held?.holdsValue("refresh_token") == true {
                    throw SessionTransferError(
                        .conflict, "account \(existing.id) holds its own refresh token here; importing an access token alone would drop it")
                }
            }
            let absolute = imported.absoluteDeadline.map { Date(millisecondsSince1970: $0.millisecondsSince1970) }
            let record = try core.accounts.storeSignIn(
                new, tokens: imported.tokens, policy: imported.policy, now: now,
                startedAt: Date(millisecondsSince1970: imported.startedAt.millisecondsSince1970),
                // An account this vault has keeps its own label: the sender's names it there.
                absoluteDeadline: absolute, authTime: imported.authTime, renaming: false, db)
            let id = record.account.id
            let origin = String(decoding: try JSONEncoder().encode(imported.origin), as: UTF8.self)
            // A new account takes the helper hosts the blob names, but never one another account
            // of this vault has with the same user name (a request could not tell them apart),
            // and is the default only of entries no other account has; an existing account
            // keeps its own.
            var skipped: [String] = []
            var hosts: [String] = []
            var defaults: [String] = []
            if !record.replacedExisting, !imported.credentialHosts.isEmpty {
                let others = try core.accounts.otherCredentialBindings(except: id, db)
                for host in imported.credentialHosts where !hosts.contains(host) && !skipped.contains(host) {
                    if AccountStore.clash(host, username: imported.credentialUsername, among: others) != nil {
                        skipped.append(host)
                    } else {
                        hosts.append(host)
                        if !others.contains(where: { $0.hosts.contains(host) }) { defaults.append(host) }
                    }
                }
            }
            try self.integrity.rewrite(.accounts, matching: ["account_id": id.rawValue], db) {
                if record.replacedExisting {
                    try db.execute(sql: "UPDATE accounts SET origin = ? WHERE account_id = ?", arguments: [origin, id.rawValue])
                } else {
                    try db.execute(
                        sql: """
                            UPDATE accounts SET origin = ?, credential_hosts = ?, credential_username = ?, credential_default_hosts = ?
                            WHERE account_id = ?
                            """,
                        arguments: [
                            origin, CredentialBinding.stored(hosts), imported.credentialUsername,
                            CredentialBinding.stored(defaults), id.rawValue,
                        ])
                }
            }
            var transfer = imported.transfer
            transfer.account = id
            try self.insertTransfer(transfer, after: count, db)
            try core.events.insert(
                kind: "session_imported", account: id,
                data: [
                    "transfer": transfer.id, "mode": transfer.mode.rawValue, "sender": transfer.peer,
                    "replaced": String(record.replacedExisting),
                ], origin: eventOrigin, at: now, db)
            var stored = record
            stored.account =
                try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [id.rawValue])
                .map { try core.accounts.record(from: $0, db) } ?? record.account
            return SessionImportRecord(signIn: stored, skippedHosts: skipped)
        }
    }

    /// Every export and import this vault remembers, newest first.
    public func all() throws -> [SessionTransferRecord] {
        try read("reading session transfers") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM session_transfers ORDER BY at DESC, transfer_id").map { row in
                try self.integrity.check(row, in: .sessionTransfers, db)
                let key = row.storedKey("transfer_id")
                func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
                    try row.stored(column, table: "session_transfers", row: key, path: self.path)
                }
                let direction: String = try value("direction")
                let mode: String = try value("mode")
                return SessionTransferRecord(
                    id: try value("transfer_id"), direction: direction == "import" ? .import : .export,
                    mode: SessionTransferMode(rawValue: mode) ?? .move, account: AccountID(rawValue: try value("account_id")),
                    at: try row.storedDate("at", table: "session_transfers", row: key, path: self.path),
                    expiresAt: try row.storedDate("expires_at", table: "session_transfers", row: key, path: self.path),
                    peer: try value("peer"))
            }
        }
    }

    // MARK: Pieces

    /// How many transfers are remembered, every row checked against its MAC and their number
    /// against the header's count (which its MAC covers): a row deleted from the file (to
    /// import a captured blob again), or one swapped for a forged one, is
    /// ``VaultError/Code/damaged``, never a second import. One pass per transaction.
    private func rememberedTransferCount(_ db: Database) throws -> Int {
        var rows = 0
        let cursor = try Row.fetchCursor(db, sql: "SELECT * FROM session_transfers")
        while let row = try cursor.next() {
            try integrity.check(row, in: .sessionTransfers, db)
            rows += 1
        }
        let expected = try core.accounts.header(db).optional("session_transfers", as: Int64.self) ?? 0
        guard Int64(rows) == expected else {
            throw VaultError(
                .damaged,
                "session_transfers holds \(rows) rows where the vault header counts \(expected): a remembered session export or import was deleted from \(path); restore it from a backup",
                path: path)
        }
        return rows
    }

    /// The direction of the remembered transfer `id`, its row checked against its MAC; nil when none.
    private func rememberedTransfer(_ id: String, _ db: Database) throws -> SessionTransferRecord.Direction? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM session_transfers WHERE transfer_id = ?", arguments: [id]) else { return nil }
        try integrity.lookedUp(row, in: .sessionTransfers, by: ["transfer_id": id])
        try integrity.check(row, in: .sessionTransfers, db)
        let direction: String = try row.stored("direction", table: "session_transfers", row: id, path: path)
        return direction == "import" ? .import : .export
    }

    /// Remembers a transfer (authenticated) and counts it in the header (`count` rows, checked
    /// by ``rememberedTransferCount(_:)``, were there before).
    private func insertTransfer(_ transfer: SessionTransferRecord, after count: Int, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO session_transfers (transfer_id, direction, mode, account_id, at, expires_at, peer) VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                transfer.id, transfer.direction.rawValue, transfer.mode.rawValue, transfer.account.rawValue,
                transfer.at.millisecondsSince1970, transfer.expiresAt.millisecondsSince1970, transfer.peer,
            ])
        try integrity.authenticate(.sessionTransfers, where: "transfer_id = ?", [transfer.id], db)
        try integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
            try db.execute(sql: "UPDATE vault_meta SET session_transfers = ? WHERE singleton = 1", arguments: [count + 1])
        }
    }

    /// Drops `holder`'s refresh lease, if it still holds it.
    private func releaseLease(for id: AccountID, holder: String, _ db: Database) throws {
        try integrity.rewrite(.refreshState, matching: ["account_id": id.rawValue, "lease_holder": holder], db) {
            try db.execute(
                sql: """
                    UPDATE refresh_state SET lease_holder = NULL, lease_generation = NULL, lease_acquired_at = NULL,
                        lease_expires_at = NULL, lease_process = NULL WHERE account_id = ? AND lease_holder = ?
                    """, arguments: [id.rawValue, holder])
        }
    }
}

extension VaultCore {
    /// This vault's transfers (see ``TransferStore``).
    var transfers: TransferStore { TransferStore(core: self) }
}
