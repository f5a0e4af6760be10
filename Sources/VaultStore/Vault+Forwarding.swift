import Foundation
import VaultCrypto

// MARK: - Forwarding to the stores

// The members `Vault` had before its areas moved into stores (``Vault/tokens``,
// ``Vault/sessions``…), kept so tool authors' code keeps compiling. Each only calls its store.
// They get a deprecation pointing to the store once the tests and examples that still use them
// have moved (the release after the split), and go one release later; the raw writes are already
// deprecated.

extension Vault {
    // MARK: Tokens

    /// ``TokenStore/current(for:)``.
    public func tokens(for account: AccountID) throws -> StoredTokens? { try tokens.current(for: account) }

    /// ``TokenStore/metadata(for:)``.
    public func tokenMetadata(for account: AccountID) throws -> TokenMetadata? { try tokens.metadata(for: account) }

    /// ``TokenStore/accessSnapshot(for:)``.
    public func accessSnapshot(for account: AccountID?) throws -> AccessSnapshot? { try tokens.accessSnapshot(for: account) }

    /// Stores `tokens` for `account`, replacing `generation`: a raw write.
    @available(
        *, deprecated,
        message: "a raw write (no session, no event): use SessionService.signIn; fixtures: @_spi(RawWrites) tokens.store"
    )
    @discardableResult
    public func storeTokens(_ tokens: TokenSet, for account: AccountID, replacing generation: Int64?) throws -> Int64 {
        try self.tokens.store(tokens, for: account, replacing: generation)
    }

    /// ``TokenStore/store(_:for:replacing:)``.
    @_spi(RawWrites)
    @discardableResult
    public func writeTokens(_ tokens: TokenSet, for account: AccountID, replacing generation: Int64?) throws -> Int64 {
        try self.tokens.store(tokens, for: account, replacing: generation)
    }

    /// Deletes the account's tokens (the account stays): a raw write.
    @available(
        *, deprecated,
        message: "a raw write (the session stays): use SessionService.endSession; fixtures: @_spi(RawWrites) tokens.delete"
    )
    @discardableResult
    public func wipeTokens(for account: AccountID) throws -> Bool { try tokens.delete(for: account) }

    /// ``TokenStore/delete(for:)``.
    @_spi(RawWrites)
    @discardableResult
    public func deleteTokens(for account: AccountID) throws -> Bool { try tokens.delete(for: account) }

    // MARK: Sessions and policies

    /// ``SessionStore/current(for:)``.
    public func currentSession(for account: AccountID) throws -> SessionRecord? { try sessions.current(for: account) }

    /// ``SessionStore/all(for:)``.
    public func sessions(for account: AccountID? = nil) throws -> [SessionRecord] { try sessions.all(for: account) }

    /// ``SessionStore/setPolicy(_:for:)``.
    public func setSessionPolicy(_ policy: SessionPolicy, for account: AccountID) throws { try sessions.setPolicy(policy, for: account) }

    /// ``SessionStore/policy(for:)``.
    public func sessionPolicy(for account: AccountID) throws -> SessionPolicy { try sessions.policy(for: account) }

    // MARK: Events

    /// ``EventStore/list(after:account:limit:)``.
    public func events(after seq: Int64 = 0, account: AccountID? = nil, limit: Int = 1000) throws -> [StoredEvent] {
        try events.list(after: seq, account: account, limit: limit)
    }

    /// ``EventStore/latest(account:limit:)``.
    public func latestEvents(account: AccountID? = nil, limit: Int) throws -> [StoredEvent] { try events.latest(account: account, limit: limit) }

    /// ``EventStore/lastSeq()``.
    public func lastEventSeq() throws -> Int64 { try events.lastSeq() }

    // MARK: Accounts
    // `vault.accounts()` needs no forwarding: the store is callable (``AccountStore/callAsFunction()``).

    /// Adds an account without a session: a raw write.
    @available(
        *, deprecated,
        message: "a raw write (no session, no event): use SessionService.signIn; fixtures: @_spi(RawWrites) accounts.insert"
    )
    @discardableResult
    public func addAccount(_ new: NewAccount) throws -> Account { try accounts.insert(new) }

    /// ``AccountStore/insert(_:)``.
    @_spi(RawWrites)
    @discardableResult
    public func insertAccount(_ new: NewAccount) throws -> Account { try accounts.insert(new) }

    /// ``AccountStore/ids()``.
    public func accountIDs() throws -> [AccountID] { try accounts.ids() }

    /// ``AccountStore/find(_:)``.
    public func account(_ id: AccountID) throws -> Account? { try accounts.find(id) }

    /// ``AccountStore/clientSecret(for:)``.
    public func clientSecret(for id: AccountID) throws -> String? { try accounts.clientSecret(for: id) }

    /// ``AccountStore/activeID()``.
    public func activeAccountID() throws -> AccountID? { try accounts.activeID() }

    /// ``AccountStore/setActive(_:)``.
    public func setActiveAccount(_ id: AccountID?) throws { try accounts.setActive(id) }

    /// ``AccountStore/remove(_:checkpointWait:)``.
    @discardableResult
    public func removeAccount(_ id: AccountID, checkpointWait: Duration = .seconds(1)) throws -> AccountRemoval {
        try accounts.remove(id, checkpointWait: checkpointWait)
    }

    /// ``AccountStore/setNotificationRetention(_:for:)``.
    public func setNotificationRetention(_ retention: NotificationRetention?, for id: AccountID) throws {
        try accounts.setNotificationRetention(retention, for: id)
    }

    /// ``AccountStore/setCredentialHosts(_:username:makeDefault:for:)``.
    public func setCredentialHosts(_ hosts: [String], username: String?, makeDefault: Bool = false, for id: AccountID) throws {
        try accounts.setCredentialHosts(hosts, username: username, makeDefault: makeDefault, for: id)
    }

    /// ``AccountStore/setCredentialHosts(_:keepingUsernameFor:)``.
    public func setCredentialHosts(_ hosts: [String], keepingUsernameFor id: AccountID) throws {
        try accounts.setCredentialHosts(hosts, keepingUsernameFor: id)
    }

    /// ``AccountStore/signIn(_:tokens:policy:authTime:)``.
    @discardableResult
    public func signIn(_ new: NewAccount, tokens: TokenSet, policy: SessionPolicy, authTime: Date? = nil) throws -> SignInRecord {
        try accounts.signIn(new, tokens: tokens, policy: policy, authTime: authTime)
    }

    /// ``AccountStore/upgradeGuest(_:to:)``.
    @discardableResult
    public func upgradeGuest(_ guest: AccountID, to registered: AccountID) throws -> GuestUpgrade {
        try accounts.upgradeGuest(guest, to: registered)
    }

    // MARK: Refresh leases

    /// ``LeaseStore/state(for:)``.
    public func refreshState(for account: AccountID) throws -> RefreshState { try leases.state(for: account) }

    // MARK: Devices

    /// ``DeviceStore/save(_:)``.
    public func saveDevice(_ device: DeviceRegistration) throws { try devices.save(device) }

    /// ``DeviceStore/recordPendingApproval(_:registration:)``.
    public func recordPendingApproval(_ approval: PendingApproval, registration id: String) throws -> Bool {
        try devices.recordPendingApproval(approval, registration: id)
    }

    /// ``DeviceStore/sync(_:for:goneReason:at:)``.
    public func syncDevices(
        _ listed: [DeviceRegistration], for account: AccountID, goneReason: String, at now: Date
    ) throws -> [DeviceRegistration] {
        try devices.sync(listed, for: account, goneReason: goneReason, at: now)
    }

    /// ``DeviceStore/all(for:)``.
    public func devices(for account: AccountID? = nil) throws -> [DeviceRegistration] { try devices.all(for: account) }

    /// ``DeviceStore/find(_:)``.
    public func device(_ id: String) throws -> DeviceRegistration? { try devices.find(id) }

    // MARK: Notifications

    /// ``NotificationStore/upsert(_:)-(NotificationRecord)``.
    @discardableResult
    public func upsertNotification(_ notification: NotificationRecord) throws -> Bool { try notifications.upsert(notification) }

    /// ``NotificationStore/upsert(_:)-([NotificationRecord])``.
    @discardableResult
    public func upsertNotifications(_ notifications: [NotificationRecord]) throws -> Int { try self.notifications.upsert(notifications) }

    /// ``NotificationStore/find(_:account:)``.
    public func notification(_ uuid: String, account: AccountID) throws -> NotificationRecord? {
        try notifications.find(uuid, account: account)
    }

    /// ``NotificationStore/page(_:)``.
    public func notifications(_ query: NotificationQuery = NotificationQuery()) throws -> NotificationPage {
        try notifications.page(query)
    }

    /// ``NotificationStore/recordAnswer(to:account:action:byDevice:at:)``.
    public func recordAnswer(to uuid: String, account: AccountID, action: String, byDevice device: String, at time: Date) throws -> Bool {
        try notifications.recordAnswer(to: uuid, account: account, action: action, byDevice: device, at: time)
    }

    /// ``NotificationStore/prune(olderThan:keepNewest:account:)``.
    @discardableResult
    public func pruneNotifications(olderThan: Date? = nil, keepNewest: Int? = nil, account: AccountID? = nil) throws -> Int {
        try notifications.prune(olderThan: olderThan, keepNewest: keepNewest, account: account)
    }

    /// ``NotificationStore/count(account:)``.
    public func notificationCount(account: AccountID? = nil) throws -> Int { try notifications.count(account: account) }

    // MARK: Session transfers

    /// ``TransferStore/recipientKey()``.
    public func recipientKey() throws -> RecipientKeyPair { try transfers.recipientKey() }

    /// ``TransferStore/importSession(_:eventOrigin:)``.
    public func importSession(_ imported: SessionImport, eventOrigin: String) throws -> SessionImportRecord {
        try transfers.importSession(imported, eventOrigin: eventOrigin)
    }

    /// ``TransferStore/all()``.
    public func sessionTransfers() throws -> [SessionTransferRecord] { try transfers.all() }

    // MARK: Maintenance

    /// ``MaintenanceStore/verify(depth:progress:)``.
    @discardableResult
    public func verify(depth: VerifyDepth = .rows, progress: ((MaintenanceProgress) -> Void)? = nil) throws -> IntegrityReport {
        try maintenance.verify(depth: depth, progress: progress)
    }

    /// ``MaintenanceStore/backup(to:progress:)``.
    public func backup(to destination: URL, progress: ((MaintenanceProgress) -> Void)? = nil) throws {
        try maintenance.backup(to: destination, progress: progress)
    }

    /// ``MaintenanceStore/rotateKeys(credential:batchSize:progress:)``.
    @discardableResult
    public func rotateKeys(
        credential: VaultCredential, batchSize: Int = 500, progress: (KeyRotationProgress) -> Void = { _ in }
    ) throws -> KeyRotationReport {
        try maintenance.rotateKeys(credential: credential, batchSize: batchSize, progress: progress)
    }

    /// ``MaintenanceStore/keyRotationPending()``.
    public func keyRotationPending() throws -> Bool { try maintenance.keyRotationPending() }

    /// ``MaintenanceStore/changeCredential(from:to:cost:replacingKeys:slotKeys:progress:)``.
    @discardableResult
    public func changeCredential(
        from current: VaultCredential, to new: VaultCredential, cost: KDFParameters? = nil, replacingKeys: Bool = true,
        slotKeys: [Int64: VaultCredential] = [:], progress: (KeyRotationProgress) -> Void = { _ in }
    ) throws -> CredentialChange {
        try maintenance.changeCredential(from: current, to: new, cost: cost, replacingKeys: replacingKeys, slotKeys: slotKeys, progress: progress)
    }

    /// ``MaintenanceStore/changeCredential(to:cost:slotKeys:)``.
    public func changeCredential(to credential: VaultCredential, cost: KDFParameters? = nil, slotKeys: [Int64: VaultCredential] = [:]) throws {
        try maintenance.changeCredential(to: credential, cost: cost, slotKeys: slotKeys)
    }

    /// ``MaintenanceStore/attemptCheckpoint(waitingAtMost:)``.
    public func attemptCheckpoint(waitingAtMost wait: Duration? = nil) throws -> WALCheckpoint {
        try maintenance.attemptCheckpoint(waitingAtMost: wait)
    }

    /// ``MaintenanceStore/checkpoint()``.
    public func checkpoint() throws { try maintenance.checkpoint() }
}
