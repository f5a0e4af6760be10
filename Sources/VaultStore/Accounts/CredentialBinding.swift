import Foundation
import GRDB

/// One account's credential-helper hosts (`vault accounts set-host`) as the git and docker
/// helpers match them: the entries (`host[:port][/path]`), the user name the account answers
/// with, and the entries it is the default for when other accounts share them.
///
/// ```swift
/// let bindings = try vault.accounts.all().compactMap(\.credentialBinding)
/// ```
public struct CredentialBinding: Sendable, Hashable {
    public var account: AccountID
    public var hosts: [String]
    /// The user name it answers with; nil: `oauth2`.
    public var username: String?
    /// The entries of ``hosts`` whose requests without a user name it answers.
    public var defaultHosts: [String]
    /// When the account was added: among accounts sharing an entry none of which is marked its
    /// default (the default was removed), the oldest answers. Nil where unknown.
    public var createdAt: Date?
    /// What the token handed out is for (``TokenTarget/account``: the account's own).
    public var target: TokenTarget

    public init(
        account: AccountID, hosts: [String], username: String?, defaultHosts: [String], createdAt: Date?, target: TokenTarget = .account
    ) {
        self.target = target
        self.account = account
        self.hosts = hosts
        self.username = username
        self.defaultHosts = defaultHosts
        self.createdAt = createdAt
    }

    /// The user name it answers with: ``username``, else `oauth2`.
    public var effectiveUsername: String { username ?? "oauth2" }
}

extension Account {
    /// Its credential-helper binding; nil when it has no host or was upgraded into another.
    public var credentialBinding: CredentialBinding? {
        guard upgradedTo == nil, !credentialHosts.isEmpty else { return nil }
        return CredentialBinding(
            account: id, hosts: credentialHosts, username: credentialUsername, defaultHosts: credentialDefaultHosts,
            createdAt: createdAt, target: credentialTarget)
    }
}

// MARK: - The stored columns

extension CredentialBinding {
    /// The entries a `credential_hosts` or `credential_default_hosts` column holds: separated by
    /// spaces (an entry never holds one), NULL for none. The one reader of both columns.
    static func entries(stored text: String?) -> [String] {
        text?.split(separator: " ").map(String.init) ?? []
    }

    /// What those columns store for `entries`: NULL for none.
    static func stored(_ entries: [String]) -> String? {
        entries.isEmpty ? nil : entries.joined(separator: " ")
    }

    /// A binding from the stored columns of an account row.
    init(account: AccountID, storedHosts: String?, username: String?, storedDefaults: String?, createdAt: Date?) {
        self.init(
            account: account, hosts: Self.entries(stored: storedHosts), username: username,
            defaultHosts: Self.entries(stored: storedDefaults), createdAt: createdAt)
    }
}

extension CredentialBinding {
    /// Every account's binding as the file says, read without the key and so not
    /// authenticated: whoever can write the file can make it say anything. Only good for
    /// deciding that a request matches nothing (the git and docker helpers then answer "not
    /// found" without asking for a passphrase); an edited file can at most turn an answer into
    /// "not found", since a match is answered only from the authenticated rows. A value of an
    /// unexpected type is skipped, never trusted or trapped on.
    static func unverified(_ db: Database) throws -> [CredentialBinding] {
        guard try db.tableExists("accounts") else { return [] }
        let columns = Set(try db.columns(in: "accounts").map(\.name))
        guard columns.contains("credential_hosts") else { return [] }  // before schema 6
        func text(_ row: Row, _ column: String) -> String? {
            guard columns.contains(column) else { return nil }
            return String.fromDatabaseValue(row[column] as DatabaseValue)
        }
        var bindings: [CredentialBinding] = []
        for row in try Row.fetchAll(db, sql: "SELECT * FROM accounts WHERE credential_hosts IS NOT NULL") {
            guard let id = text(row, "account_id"), let hosts = text(row, "credential_hosts"), text(row, "upgraded_to") == nil else { continue }
            bindings.append(
                CredentialBinding(
                    account: AccountID(rawValue: id), storedHosts: hosts, username: text(row, "credential_username"),
                    storedDefaults: text(row, "credential_default_hosts"), createdAt: nil))
        }
        return bindings
    }
}

extension VaultFile {
    /// See ``Vault/inspectCredentialBindings(at:options:)``.
    static func credentialBindings(at url: URL, options: VaultOptions = VaultOptions()) throws -> [CredentialBinding] {
        let url = try VaultFile.checkedLocation(url)
        return try VaultConnection.withReadOnlyQueue(url, options: options) { queue in
            try queue.read { db in
                try VaultFile.checkApplicationID(db, path: url.path)
                return try CredentialBinding.unverified(db)
            }
        }
    }
}
