import Foundation
import GRDB
import Logging
import VaultCrypto

// MARK: - Accounts

/// The accounts a vault signs in to: each with its issuer, subject and client settings, a data key
/// of its own that seals its secrets, and the hosts its tokens may be given to. One of them is the
/// active account.
///
/// ```swift
/// for account in try vault.accounts.all() { print(account.id, account.issuer) }
/// let active = try vault.accounts.activeID()
/// ```
public struct AccountStore: VaultArea {
    let core: VaultCore

    /// Adds an account without the session layer (no session, no event; for test fixtures,
    /// benchmarks and tools) with a fresh data key, sealing its label, e-mail and client secret.
    /// The first account added becomes the active one.
    ///
    /// Throws ``VaultError/Code/alreadyExists`` when the vault already holds an account with
    /// the same issuer and subject.
    @_spi(RawWrites)
    @discardableResult
    public func insert(_ new: NewAccount) throws -> Account {
        try write("adding an account") { db in try self.insert(new, db) }
    }

    func insert(_ new: NewAccount, _ db: Database) throws -> Account {
        try Self.checkCredentials(of: new, path: path)
        let vaultKey = try keyring.vaultKey()
        let id = AccountID.random()
        let now = clock.now()
        do {
            if try Bool.fetchOne(
                db, sql: "SELECT 1 FROM accounts WHERE issuer = ? AND subject = ?",
                arguments: [new.issuer, new.subject]) ?? false
            {
                throw VaultError(.alreadyExists, "an account for \(new.subject) at \(new.issuer) is already in the vault", path: self.path)
            }
            let keyID = try self.allocateKeyID(db)
            let dataKey = try SymmetricKey.generate(id: keyID)
            let wrapped = try vaultKey.wrap(dataKey, context: self.dataKeyContext(account: id, keyID: keyID))
            let seal = { (column: String, value: String?) throws -> Data? in
                try value.map { try self.seal($0, with: dataKey, table: "accounts", column: column, account: id, row: id.rawValue) }
            }
            try db.execute(
                sql: """
                    INSERT INTO accounts (account_id, issuer, subject, label, email, token_endpoint, revocation_endpoint,
                        client_id, client_auth, client_secret, scopes, pins, data_key_id, wrapped_data_key, created_at,
                        provider_metadata, subject_source, kind, redirect_uri, ca_file,
                        grant_type, client_auth_method, client_signing_key, dpop_key)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    id.rawValue, new.issuer, new.subject, try seal("label", new.label), try seal("email", new.email),
                    new.client.tokenEndpoint.absoluteString, new.client.revocationEndpoint?.absoluteString,
                    new.client.clientID, new.client.authentication.storedClientAuth, try seal("client_secret", new.clientSecret),
                    new.client.scopes.joined(separator: " "), new.client.pins.isEmpty ? nil : new.client.pins.joined(separator: " "),
                    Int64(keyID), Data(wrapped), now.millisecondsSince1970,
                    new.providerMetadata, new.subjectSource?.rawValue, new.kind == .guest ? "guest" : nil,
                    new.client.redirectURI, new.client.caFile,
                    new.grant == .delegated ? nil : new.grant.rawValue, new.client.authentication.storedMethod,
                    try seal("client_signing_key", new.clientSigningKey), try seal("dpop_key", new.dpopKey),
                ])
            try self.integrity.authenticate(.accounts, where: "account_id = ?", [id.rawValue], db)
            try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
                try db.execute(
                    sql: "UPDATE vault_meta SET active_account_id = ? WHERE singleton = 1 AND active_account_id IS NULL",
                    arguments: [id.rawValue])
            }
            self.keyring.remember(dataKey, for: id.rawValue)
            self.logger.info("added account", metadata: ["account": "\(id)", "issuer": "\(new.issuer)"])
            return Account(
                id: id, issuer: new.issuer, subject: new.subject, label: new.label, email: new.email,
                client: new.client, hasClientSecret: new.clientSecret != nil, hasClientSigningKey: new.clientSigningKey != nil,
                hasDPoPKey: new.dpopKey != nil, createdAt: Date(millisecondsSince1970: now.millisecondsSince1970),
                providerMetadata: new.providerMetadata, subjectSource: new.subjectSource, kind: new.kind, grant: new.grant)
        }
    }

    /// Every account, oldest first (in the order they were added).
    public func all() throws -> [Account] {
        try read("listing accounts") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM accounts ORDER BY created_at, rowid").map { try self.record(from: $0, db) }
        }
    }

    /// Every account, as ``all()``: what `vault.accounts()` read before the accounts had a store
    /// of their own, so that call keeps working.
    public func callAsFunction() throws -> [Account] { try all() }

    /// The ids of every account, oldest first. Needs no key: works while the vault is locked.
    public func ids() throws -> [AccountID] {
        try read("listing account ids") { db in
            try Row.fetchAll(db, sql: "SELECT account_id FROM accounts ORDER BY created_at, rowid").map { row in
                AccountID(rawValue: try row.stored("account_id", table: "accounts", row: row.storedKey("account_id"), path: self.path))
            }
        }
    }

    /// One account, or nil if the vault has no account with that id.
    public func find(_ id: AccountID) throws -> Account? {
        try read("reading an account") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [id.rawValue]) else {
                try self.integrity.checkCurrent(nil, .account, account: id.rawValue, db)
                return nil
            }
            return try self.record(from: row, db)
        }
    }

    /// The stored client secret of a confidential client.
    public func clientSecret(for id: AccountID) throws -> String? {
        try read("reading a client secret") { db in try self.credential("client_secret", of: id, db) }
    }

    /// The stored signing key (PEM) of a `private_key_jwt` client; nil when none is stored.
    public func clientSigningKey(for id: AccountID) throws -> String? {
        try read("reading a client signing key") { db in try self.credential("client_signing_key", of: id, db) }
    }

    /// The private key (PEM) the account's tokens are bound to (DPoP); nil for bearer tokens.
    public func dpopKey(for id: AccountID) throws -> String? {
        try read("reading a DPoP key") { db in try self.credential("dpop_key", of: id, db) }
    }

    /// One of the account's sealed credentials (`client_secret`, `client_signing_key`,
    /// `dpop_key`), opened from a row checked against its MAC; nil when none is stored.
    func credential(_ column: String, of id: AccountID, _ db: Database) throws -> String? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [id.rawValue]) else {
            throw accountNotFound(id)
        }
        try integrity.check(row, in: .accounts, db)
        return try open(
            row.storedIfPresent(column, table: "accounts", row: id.rawValue, path: path), table: "accounts", column: column, account: id,
            row: id.rawValue, db)
    }

    /// Throws ``VaultError/Code/invalidArgument`` unless the account's client authentication
    /// has what it needs: a secret for the secret methods, a signing key for `private_key_jwt`,
    /// and a confidential client for the client credentials grant.
    static func checkCredentials(of new: NewAccount, path: String?) throws {
        let method = new.client.authentication
        if method.usesSecret && new.clientSecret == nil {
            throw VaultError(.invalidArgument, "a \(method.rawValue) client needs a client secret", path: path)
        }
        if method == .privateKeyJWT && new.clientSigningKey == nil {
            throw VaultError(.invalidArgument, "a private_key_jwt client needs a signing key", path: path)
        }
        if new.grant == .clientCredentials && method == .none {
            throw VaultError(.invalidArgument, "the client credentials grant needs a confidential client (a secret or a signing key)", path: path)
        }
    }

    /// The active account, persisted in the vault so every process sees the same one.
    public func activeID() throws -> AccountID? {
        try read("reading the active account") { db in try self.activeID(db) }
    }

    /// Makes `id` the active account (nil: none).
    public func setActive(_ id: AccountID?) throws {
        _ = try setActive(id, recording: nil)
    }

    /// The same, returning the account that was active (read in the transaction), with the
    /// events that describe the switch written in it.
    package func setActive(_ id: AccountID?, recording: EventRecording<AccountID?>?) throws -> AccountID? {
        try write("switching the active account", recording: recording) { db in
            if let id, try !(Bool.fetchOne(db, sql: "SELECT 1 FROM accounts WHERE account_id = ?", arguments: [id.rawValue]) ?? false) {
                throw self.accountNotFound(id)
            }
            let previous = try self.activeID(db)
            try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
                try db.execute(sql: "UPDATE vault_meta SET active_account_id = ? WHERE singleton = 1", arguments: [id?.rawValue])
            }
            return previous
        }
    }

    /// Removes the account and every record of it (tokens, sessions, devices, notifications,
    /// its data key) and, when it was the active account, makes the oldest remaining account
    /// active, all in one transaction. Then checkpoints the WAL so none of its ciphertext or
    /// its wrapped key remains in the database file or the WAL.
    ///
    /// Never stops half-way: once the transaction committed, the removal is reported as done
    /// even when the checkpoint is blocked by another connection's read transaction (waiting
    /// at most `checkpointWait` for it) or fails; ``AccountRemoval/checkpoint`` says so, and the
    /// data is cleared by a later checkpoint (``Vault/compact(at:options:)``, `vault compact`).
    ///
    /// ```swift
    /// let removal = try vault.accounts.remove(id)
    /// ```
    @discardableResult
    public func remove(_ id: AccountID, checkpointWait: Duration = .seconds(1)) throws -> AccountRemoval {
        try remove(id, checkpointWait: checkpointWait, recording: nil)
    }

    /// The same, with the events that describe the removal written in its transaction (made
    /// of what it removed: whether the account was there, the active account before and after).
    package func remove(
        _ id: AccountID, checkpointWait: Duration = .seconds(1),
        recording: EventRecording<(removed: Bool, previousActive: AccountID?, active: AccountID?)>?
    ) throws -> AccountRemoval {
        let outcome = try write("removing an account", recording: recording) { db -> (removed: Bool, previousActive: AccountID?, active: AccountID?) in
            let (removed, previous, active) = try self.deleteAccount(id, db)
            return (removed, previous.map(AccountID.init(rawValue:)), active.map(AccountID.init(rawValue:)))
        }
        let (removed, previous, active) = (outcome.removed, outcome.previousActive?.rawValue, outcome.active?.rawValue)
        return try finishRemoval(id, removed: removed, previous: previous, active: active, checkpointWait: checkpointWait)
    }

    /// The removal's transaction: the account deleted, its events with it, another made active.
    private func deleteAccount(_ id: AccountID, _ db: Database) throws -> (Bool, String?, String?) {
        // The header is checked before it is read, and authenticated again after the delete
        // (which clears `active_account_id` through ON DELETE SET NULL) and the new choice.
        try self.integrity.rewrite(.vaultMeta, where: "singleton = 1", [], db) {
            let previous = try self.activeID(db)?.rawValue
            try db.execute(sql: "DELETE FROM accounts WHERE account_id = ?", arguments: [id.rawValue])
            guard db.changesCount > 0 else { return (false, previous, previous) }
            try self.integrity.removedAccount(id.rawValue, db)
            // Its events go with it (their sealed details could no longer be opened).
            try self.integrity.delete(from: .events, where: "account_id = ?", [id.rawValue], db)
            guard previous == id.rawValue else { return (true, previous, previous) }
            // Like removing the active user in the reference apps, the oldest remaining
            // account takes over, in this transaction.
            let next = try String.fetchOne(db, sql: "SELECT account_id FROM accounts ORDER BY created_at, rowid LIMIT 1")
            try db.execute(sql: "UPDATE vault_meta SET active_account_id = ? WHERE singleton = 1", arguments: [next])
            return (true, previous, next)
        }
    }

    /// After the removal committed: the keys forgotten, the WAL checkpointed (reported, never thrown).
    private func finishRemoval(
        _ id: AccountID, removed: Bool, previous: String?, active: String?, checkpointWait: Duration
    ) throws -> AccountRemoval {
        keyring.forget(account: id.rawValue)
        var removal = AccountRemoval(
            account: id, removed: removed, previousActive: previous.map(AccountID.init(rawValue:)),
            active: active.map(AccountID.init(rawValue:)), checkpoint: nil)
        guard removed else { return removal }
        logger.info("removed account", metadata: ["account": "\(id)", "active": "\(active ?? "none")"])
        let checkpoint = try core.attemptCheckpoint(waitingAtMost: checkpointWait)
        if !checkpoint.isComplete {
            logger.warning(
                "the removed account's encrypted data stays on disk until a checkpoint completes",
                metadata: ["account": "\(id)", "checkpoint": "\(checkpoint)"])
        }
        removal.checkpoint = checkpoint
        return removal
    }

    // MARK: Internals

    func record(from row: Row, _ db: Database) throws -> Account {
        let key = row.storedKey("account_id")
        let stored = StoredRecord(row, table: .accounts, path: path)
        try integrity.check(stored, db)
        try integrity.checkCurrent(stored, .account, account: key, db)
        func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
            try row.stored(column, table: "accounts", row: key, path: path)
        }
        func optional<T: DatabaseValueConvertible>(_ column: String) throws -> T? {
            try row.storedIfPresent(column, table: "accounts", row: key, path: path)
        }
        let id = AccountID(rawValue: try value("account_id"))
        guard let tokenEndpoint = URL(string: try value("token_endpoint")) else {
            throw VaultError(.damaged, "account \(id) has an unreadable token endpoint", path: path)
        }
        let scopes: String = try value("scopes")
        // Schema 14's methods are named in client_auth_method (NULL before, and for the others).
        let clientAuth: String = try optional("client_auth_method") ?? value("client_auth")
        guard let authentication = ClientAuthentication(rawValue: clientAuth) else {
            throw VaultError(.damaged, "account \(id) has an unknown client authentication", path: path)
        }
        let grant: String? = try optional("grant_type")
        let revocationEndpoint: String? = try optional("revocation_endpoint")
        let pins: String? = try optional("pins")
        return Account(
            id: id, issuer: try value("issuer"), subject: try value("subject"),
            label: try open(optional("label"), table: "accounts", column: "label", account: id, row: id.rawValue, db),
            email: try open(optional("email"), table: "accounts", column: "email", account: id, row: id.rawValue, db),
            client: OAuthClientSettings(
                tokenEndpoint: tokenEndpoint,
                revocationEndpoint: revocationEndpoint.flatMap(URL.init(string:)),
                clientID: try value("client_id"),
                authentication: authentication,
                scopes: scopes.split(separator: " ").map(String.init),
                pins: pins?.split(separator: " ").map(String.init) ?? [],
                // NULL in rows written before schema 10, and where the default is used.
                redirectURI: try optional("redirect_uri"), caFile: try optional("ca_file")),
            hasClientSecret: !(row["client_secret"] as DatabaseValue).isNull,
            // NULL in rows written before schema 14, and in accounts that sign no assertions.
            hasClientSigningKey: row.holdsValue("client_signing_key"),
            // NULL in rows written before schema 15, and in accounts with bearer tokens.
            hasDPoPKey: row.holdsValue("dpop_key"),
            createdAt: try row.storedDate("created_at", table: "accounts", row: key, path: path),
            // The columns below are NULL in rows written before schema 5.
            providerMetadata: try optional("provider_metadata"),
            subjectSource: try (optional("subject_source") as String?).map { text in
                guard let source = SubjectSource(rawValue: text) else {
                    throw VaultError(.damaged, "account \(id) has an unknown subject source", path: path)
                }
                return source
            },
            kind: (try optional("kind") as String?) == "guest" ? .guest : .registered,
            // NULL in rows written before schema 14, and in a user's accounts.
            grant: try grant.map { text in
                guard let grant = AccountGrant(rawValue: text) else {
                    throw VaultError(.damaged, "account \(id) has an unknown grant type", path: path)
                }
                return grant
            } ?? .delegated,
            upgradedTo: (try optional("upgraded_to") as String?).map(AccountID.init(rawValue:)),
            // NULL in rows written before schema 6.
            credentialHosts: CredentialBinding.entries(stored: try optional("credential_hosts")),
            credentialUsername: try optional("credential_username"),
            // NULL in rows written before schema 11, and in accounts that are no entry's default.
            credentialDefaultHosts: CredentialBinding.entries(stored: try optional("credential_default_hosts")),
            // NULL in rows written before schema 13, and where the account's own token is handed.
            credentialTarget: try Self.credentialTarget(resources: optional("credential_resources"), scopes: optional("credential_scopes"), of: id),
            // NULL in rows written before schema 7, and in accounts not imported.
            origin: try (optional("origin") as String?).map { json in
                do {
                    return try JSONDecoder().decode(AccountOrigin.self, from: Data(json.utf8))
                } catch {
                    throw VaultError(.damaged, "account \(id) has an unreadable origin", path: path)
                }
            },
            // NULL in rows written before schema 8, and while no policy is set.
            notificationRetention: try (optional("notification_retention") as String?).map { json in
                do {
                    return try JSONDecoder().decode(NotificationRetention.self, from: Data(json.utf8))
                } catch {
                    throw VaultError(.damaged, "account \(id) has an unreadable notification retention", path: path)
                }
            })
    }
}

extension AccountStore {
    /// The credential-helper bindings of accounts other than `id` (upgraded ones included: they
    /// keep their entries until removed): every row checked against its MAC, and only those
    /// columns read (no sealed value opened).
    func otherCredentialBindings(except id: AccountID, _ db: Database) throws -> [CredentialBinding] {
        var bindings: [CredentialBinding] = []
        for row in try Row.fetchAll(
            db, sql: "SELECT * FROM accounts WHERE account_id <> ? AND credential_hosts IS NOT NULL",
            arguments: [id.rawValue])
        {
            try integrity.check(row, in: .accounts, db)
            let key = row.storedKey("account_id")
            let hosts: String = try row.stored("credential_hosts", table: "accounts", row: key, path: path)
            let username: String? = try row.storedIfPresent("credential_username", table: "accounts", row: key, path: path)
            let defaults: String? = try row.storedIfPresent("credential_default_hosts", table: "accounts", row: key, path: path)
            bindings.append(
                CredentialBinding(account: AccountID(rawValue: key), storedHosts: hosts, username: username, storedDefaults: defaults, createdAt: nil))
        }
        return bindings
    }

    /// The binding among `others` that already has `host` with `username`: two accounts on one
    /// entry must answer with different user names, or a request could not tell them apart.
    static func clash(_ host: String, username: String?, among others: [CredentialBinding]) -> CredentialBinding? {
        others.first { $0.hosts.contains(host) && $0.effectiveUsername == (username ?? "oauth2") }
    }
}

// MARK: - Notification retention

extension AccountStore {
    /// Sets (nil: removes) how much notification history the account keeps; applied by every
    /// notification sync.
    public func setNotificationRetention(_ retention: NotificationRetention?, for id: AccountID) throws {
        try retention?.validate()
        let json = try retention.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        try write("setting notification retention") { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM accounts WHERE account_id = ?", arguments: [id.rawValue]) ?? false else {
                throw VaultError(.recordNotFound, "no account \(id) in the vault", path: self.path)
            }
            try self.integrity.rewrite(.accounts, matching: ["account_id": id.rawValue], db) {
                try db.execute(sql: "UPDATE accounts SET notification_retention = ? WHERE account_id = ?", arguments: [json, id.rawValue])
            }
        }
    }
}

// MARK: - Credential helper hosts

extension AccountStore {
    /// Sets the hosts (`host[:port][/path]`) whose git and docker credential requests get this
    /// account's token, and the user name they answer with (nil: `oauth2`). An empty list
    /// removes them all.
    ///
    /// Several accounts may share an entry when their user names differ (a request naming a
    /// user name gets that account); an entry another account has with the same user name is
    /// refused (`.alreadyExists`), so a token never goes to a host chosen by a guess. The first
    /// account on an entry is its default (it answers a request without a user name);
    /// `makeDefault` makes this account the default of every entry given.
    ///
    /// With `target`, the helpers hand a token for it (another API, fewer scopes) instead of the
    /// account's own (``TokenTarget/account``); nil keeps what the account has.
    public func setCredentialHosts(
        _ hosts: [String], username: String?, makeDefault: Bool = false, target: TokenTarget? = nil, for id: AccountID
    ) throws {
        try setCredentialHosts(hosts, username: username, keepingUsername: false, makeDefault: makeDefault, target: target, for: id)
    }

    /// The target the `credential_resources` and `credential_scopes` columns name; `.damaged`
    /// when they are not in the stored form.
    static func credentialTarget(resources: String?, scopes: String?, of id: AccountID) throws -> TokenTarget {
        guard resources != nil || scopes != nil else { return .account }
        guard let target = TokenTarget(storedResources: resources ?? "", storedScopes: scopes ?? "") else {
            throw VaultError(.damaged, "account \(id) names no valid target for its credential hosts")
        }
        return target
    }

    /// The same, keeping the username the account has: read and written in one transaction, so
    /// one another process sets meanwhile is never overwritten (a sign-in again with `--host`).
    public func setCredentialHosts(_ hosts: [String], keepingUsernameFor id: AccountID) throws {
        try setCredentialHosts(hosts, username: nil, keepingUsername: true, makeDefault: false, target: nil, for: id)
    }

    private func setCredentialHosts(
        _ hosts: [String], username: String?, keepingUsername: Bool, makeDefault: Bool, target: TokenTarget?, for id: AccountID
    ) throws {
        try write("setting credential hosts") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE account_id = ?", arguments: [id.rawValue]) else {
                throw self.accountNotFound(id)
            }
            try self.integrity.check(row, in: .accounts, db)
            let key = row.storedKey("account_id")
            let username: String? =
                keepingUsername ? try row.storedIfPresent("credential_username", table: "accounts", row: key, path: self.path) : username
            let currentDefaults: String? = try row.storedIfPresent("credential_default_hosts", table: "accounts", row: key, path: self.path)
            let others = try self.otherCredentialBindings(except: id, db)
            for host in hosts {
                if let other = Self.clash(host, username: username, among: others) {
                    throw VaultError(
                        .alreadyExists,
                        "\(host) is already handed to account \(other.account) as \(other.effectiveUsername): give this account another user name",
                        path: self.path)
                }
            }
            // Its defaults: those it keeps, every entry no other account has, and with
            // makeDefault every entry given (taken from the accounts that had them).
            var defaults = Set(CredentialBinding.entries(stored: currentDefaults)).intersection(hosts)
            for host in hosts where makeDefault || !others.contains(where: { $0.hosts.contains(host) }) { defaults.insert(host) }
            if makeDefault {
                for other in others where other.defaultHosts.contains(where: hosts.contains) {
                    let kept = other.defaultHosts.filter { !hosts.contains($0) }
                    try self.integrity.rewrite(.accounts, matching: ["account_id": other.account.rawValue], db) {
                        try db.execute(
                            sql: "UPDATE accounts SET credential_default_hosts = ? WHERE account_id = ?",
                            arguments: [CredentialBinding.stored(kept), other.account.rawValue])
                    }
                }
            }
            try self.integrity.rewrite(.accounts, matching: ["account_id": id.rawValue], db) {
                try db.execute(
                    sql: "UPDATE accounts SET credential_hosts = ?, credential_username = ?, credential_default_hosts = ? WHERE account_id = ?",
                    arguments: [
                        CredentialBinding.stored(hosts), username, CredentialBinding.stored(hosts.filter(defaults.contains)), id.rawValue,
                    ])
                if let target {
                    try db.execute(
                        sql: "UPDATE accounts SET credential_resources = ?, credential_scopes = ? WHERE account_id = ?",
                        arguments: [
                            target.resources.isEmpty ? nil : target.storedResources, target.scopes.isEmpty ? nil : target.storedScopes,
                            id.rawValue,
                        ])
                }
            }
        }
    }
}

extension AccountStore {
    /// The active account as the authenticated header row names it.
    func activeID(_ db: Database) throws -> AccountID? {
        try header(db).optional("active_account_id", as: String.self).map(AccountID.init(rawValue:))
    }

    /// The header row (`vault_meta`), checked against its MAC (its check remembered: every
    /// token request that misses the cache reads it).
    func header(_ db: Database) throws -> StoredRecord {
        guard
            let record = try StoredRecord.fetchOne(db, "SELECT * FROM vault_meta WHERE singleton = 1", table: .vaultMeta, path: path)
        else {
            throw VaultError(.damaged, "\(path) has no vault header row", path: path)
        }
        try integrity.check(record, remembering: true, db)
        return record
    }
}

extension VaultCore {
    /// This vault's accounts (see ``AccountStore``).
    var accounts: AccountStore { AccountStore(core: self) }
}
