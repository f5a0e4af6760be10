import Foundation
import GRDB

/// What ``AccountStore/signIn(_:tokens:policy:authTime:)`` stored.
public struct SignInRecord: Sendable, Hashable {
    public var account: Account
    public var session: SessionRecord
    public var generation: Int64
    /// The account was already in the vault: its tokens were replaced and its old session ended.
    public var replacedExisting: Bool
    /// The account that was active before (nil when none).
    public var previousActive: AccountID?
    /// The tokens the sign-in replaced (``replacedExisting``), so their grant can be revoked.
    package var replacedTokens: TokenSet?
}

// MARK: - Sign-in

extension AccountStore {
    /// Stores a completed sign-in in one transaction: the account (added, or found by issuer
    /// and subject), its tokens, its session policy, a new active session with its deadlines,
    /// a clean refresh state, and the account made active. A crash leaves all of it or none.
    ///
    /// Signing in again to an account already in the vault replaces its tokens and ends its
    /// previous session ("replaced"); the account keeps its id and history, and takes the new
    /// sign-in's provider metadata, endpoints and (when stronger) subject source.
    ///
    /// `authTime` is when the user authenticated (a verified ID token's `auth_time`); nil: now.
    public func signIn(_ new: NewAccount, tokens: TokenSet, policy: SessionPolicy, authTime: Date? = nil) throws -> SignInRecord {
        try signIn(new, tokens: tokens, policy: policy, authTime: authTime, recording: nil)
    }

    /// The same, with the events that describe it written in its transaction.
    package func signIn(
        _ new: NewAccount, tokens: TokenSet, policy: SessionPolicy, authTime: Date?, recording: EventRecording<SignInRecord>?
    ) throws -> SignInRecord {
        try policy.validate()
        let now = Date(millisecondsSince1970: clock.now().millisecondsSince1970)
        let absoluteDeadline = policy.absoluteLifetime.map { now.addingTimeInterval($0.timeInterval) }
        return try write("signing in", recording: recording) { db in
            try self.storeSignIn(
                new, tokens: tokens, policy: policy, now: now, startedAt: now, absoluteDeadline: absoluteDeadline,
                authTime: authTime, db)
        }
    }

    /// The sign-in's transaction: also an import's, whose session keeps the start, the
    /// authentication time and the absolute deadline it had in the vault it came from.
    func storeSignIn(
        _ new: NewAccount, tokens: TokenSet, policy: SessionPolicy, now: Date, startedAt: Date,
        absoluteDeadline: Date?, authTime: Date?, renaming: Bool = true, _ db: Database
    ) throws -> SignInRecord {
        let idleDeadline = policy.idleTimeout.map { now.addingTimeInterval($0.timeInterval) }
        // Never later than now: a provider's clock ahead of ours must not make the authentication look fresher.
        let authenticated = Date(millisecondsSince1970: min(authTime ?? now, now).millisecondsSince1970)
        // Stored values are read through `storedValue` and `account(from:)`, so one of the wrong
        // type (a hand-edited file) is `.damaged` naming its column, never silently converted.
        let previousActive = try self.activeID(db)
        let existing = try Row.fetchOne(
            db, sql: "SELECT * FROM accounts WHERE issuer = ? AND subject = ?",
            arguments: [new.issuer, new.subject])
        if let existing { try integrity.lookedUp(existing, in: .accounts, by: ["issuer": new.issuer, "subject": new.subject]) }
        var account = try existing.map { try self.record(from: $0, db) } ?? self.insert(new, db)
        if existing != nil {
            account = try self.refreshSettings(of: account, from: new, renaming: renaming, db)
        }
        // The grant being replaced, for the caller to revoke (a sign-in on purpose ends it).
        // Tokens that no longer open (damaged) are replaced all the same, and not revoked.
        let replaced = existing == nil ? nil : (try? core.tokens.current(for: account.id, db)) ?? nil
        let current = try core.tokens.currentGeneration(for: account.id, db)
        // Tokens of other targets came from the grant this one replaces: they go with it.
        if existing != nil { try integrity.delete(from: .resourceTokens, where: "account_id = ?", [account.id.rawValue], db) }
        let generation = try core.tokens.store(tokens, for: account.id, replacing: current, db)
        try core.sessions.endOpen(of: account.id, reason: "replaced", at: now, db)
        try db.execute(
            sql: """
                INSERT INTO sessions (account_id, state, started_at, last_activity_at, idle_deadline, absolute_deadline, auth_time)
                VALUES (?, 'active', ?, ?, ?, ?, ?)
                """,
            arguments: [
                account.id.rawValue, startedAt.millisecondsSince1970, now.millisecondsSince1970,
                idleDeadline?.millisecondsSince1970, absoluteDeadline?.millisecondsSince1970,
                authenticated.millisecondsSince1970,
            ])
        try self.integrity.authenticate(.sessions, where: "session_id = ?", [db.lastInsertedRowID], db)
        let session = SessionRecord(
            id: db.lastInsertedRowID, account: account.id, state: .active, startedAt: startedAt, lastActivityAt: now,
            idleDeadline: idleDeadline, absoluteDeadline: absoluteDeadline, authTime: authenticated)
        try core.sessions.setPolicy(policy, for: account.id, db)
        try db.execute(sql: "DELETE FROM refresh_state WHERE account_id = ?", arguments: [account.id.rawValue])
        try self.integrity.removed(.refreshState, account: account.id.rawValue, db)
        try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
            try db.execute(sql: "UPDATE vault_meta SET active_account_id = ? WHERE singleton = 1", arguments: [account.id.rawValue])
        }
        return SignInRecord(
            account: account, session: session, generation: generation,
            replacedExisting: existing != nil, previousActive: previousActive,
            replacedTokens: replaced?.tokens)
    }
}

extension AccountStore {
    /// A sign-in into an existing account brings what it learned: the provider metadata and
    /// endpoints it used, and a subject source that is stronger than the stored one; with
    /// `renaming`, the label it was given (`vault login --label`).
    func refreshSettings(of account: Account, from new: NewAccount, renaming: Bool = true, _ db: Database) throws -> Account {
        var updated = account
        var assignments: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if renaming, let label = new.label, label != account.label {
            assignments.append("label = ?")
            arguments.append(try seal(label, table: "accounts", column: "label", account: account.id, row: account.id.rawValue, db))
            updated.label = label
        }
        if let metadata = new.providerMetadata, metadata != account.providerMetadata {
            assignments += ["provider_metadata = ?", "token_endpoint = ?", "revocation_endpoint = ?"]
            arguments += [metadata, new.client.tokenEndpoint.absoluteString, new.client.revocationEndpoint?.absoluteString]
            updated.providerMetadata = metadata
            updated.client.tokenEndpoint = new.client.tokenEndpoint
            updated.client.revocationEndpoint = new.client.revocationEndpoint
        }
        if let redirect = new.client.redirectURI, redirect != account.client.redirectURI {
            assignments.append("redirect_uri = ?")
            arguments.append(redirect)
            updated.client.redirectURI = redirect
        }
        if let caFile = new.client.caFile, caFile != account.client.caFile {
            assignments.append("ca_file = ?")
            arguments.append(caFile)
            updated.client.caFile = caFile
        }
        if let source = new.subjectSource, source != account.subjectSource,
            source == .verified || account.subjectSource == nil
        {
            assignments.append("subject_source = ?")
            arguments.append(source.rawValue)
            updated.subjectSource = source
        }
        // A sign-in that brings the client's credentials (a new secret, a new key, another
        // method: `vault login --client-credentials --account A` after a rotation at the
        // provider) replaces the stored ones; one that brings none keeps them.
        if new.clientSecret != nil || new.clientSigningKey != nil {
            try Self.checkCredentials(of: new, path: path)
            let seal = { (column: String, value: String?) throws -> Data? in
                try self.seal(value, table: "accounts", column: column, account: account.id, row: account.id.rawValue, db)
            }
            assignments += ["client_auth = ?", "client_auth_method = ?", "client_secret = ?", "client_signing_key = ?", "grant_type = ?"]
            arguments += [
                new.client.authentication.storedClientAuth, new.client.authentication.storedMethod,
                try seal("client_secret", new.clientSecret), try seal("client_signing_key", new.clientSigningKey),
                new.grant == .delegated ? nil : new.grant.rawValue,
            ]
            updated.client.authentication = new.client.authentication
            updated.hasClientSecret = new.clientSecret != nil
            updated.hasClientSigningKey = new.clientSigningKey != nil
            updated.grant = new.grant
        }
        // A sign-in with DPoP binds the new tokens to its key; one without keeps the account's.
        if let key = new.dpopKey {
            assignments.append("dpop_key = ?")
            arguments.append(try seal(key, table: "accounts", column: "dpop_key", account: account.id, row: account.id.rawValue, db))
            updated.hasDPoPKey = true
        }
        guard !assignments.isEmpty else { return account }
        try integrity.rewrite(.accounts, matching: ["account_id": account.id.rawValue], db) {
            try db.execute(
                sql: "UPDATE accounts SET \(assignments.joined(separator: ", ")) WHERE account_id = ?",
                arguments: StatementArguments(arguments + [account.id.rawValue]))
        }
        return updated
    }
}
