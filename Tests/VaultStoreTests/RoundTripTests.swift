import Foundation
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Every kind of record survives closing the vault and opening it again from disk.
@Suite struct RoundTripTests {
    @Test("every record kind reads back unchanged after reopening", arguments: TestVault.Kind.allCases)
    func everyRecordKindRoundTrips(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        var vault = try test.create(clock: Times.fixedClock)

        // Accounts: a public client and a confidential one with a client secret.
        let publicAccount = try vault.accounts.insert(Samples.account("alice"))
        let confidentialClient = OAuthClientSettings(
            tokenEndpoint: try #require(URL(string: "https://corp.example.test/token")),
            revocationEndpoint: nil, clientID: "corp-cli", authentication: .clientSecretBasic,
            scopes: ["openid", "offline_access", "email"])
        let confidential = try vault.accounts.insert(
            NewAccount(
                issuer: "https://corp.example.test", subject: "bob", label: "Bob — Ops ✓", email: "bob@corp.example.test",
                client: confidentialClient, clientSecret: "client-secret-value-7f3a"))

        // Tokens: all three values, expiry, scopes, and a generation past the first.
        let first = try vault.tokens.store(Samples.fixedTokens("alice-1"), for: publicAccount.id, replacing: nil)
        let tokens = TokenSet(
            accessToken: "AT-alice-2", refreshToken: "RT-alice-2", idToken: "IDT-alice-2",
            tokenType: "DPoP", accessTokenExpiresAt: Times.at(7200), scopes: ["openid", "profile"])
        let generation = try vault.tokens.store(tokens, for: publicAccount.id, replacing: first)
        let accessOnly = TokenSet(accessToken: "AT-bob-only", tokenType: "Bearer")
        try vault.tokens.store(accessOnly, for: confidential.id, replacing: nil)

        // Sessions: start, then update every field.
        let started = try vault.sessions.start(for: publicAccount.id, idleDeadline: Times.at(900), absoluteDeadline: Times.at(86_400))
        var updated = started
        updated.state = .locked
        updated.endReason = "idle"
        updated.lastActivityAt = Times.at(60)
        updated.idleDeadline = Times.at(960)
        updated.absoluteDeadline = Times.at(43_200)
        updated.extensionsUsed = 2
        updated.backgroundEnteredAt = Times.at(30)
        updated.endedAt = Times.at(120)
        updated = try vault.sessions.update(updated)
        let second = try vault.sessions.start(for: confidential.id, idleDeadline: nil, absoluteDeadline: nil)

        // Devices: save, then update the same registration.
        var device = DeviceRegistration(
            account: publicAccount.id, deviceID: vault.deviceID, name: "Alice's laptop",
            platform: "linux", status: .pending, createdAt: Times.at(0), updatedAt: Times.at(0))
        try vault.devices.save(device)
        device.status = .active
        device.activationMethod = .verify
        device.name = "Alice's work laptop"
        device.statusReason = "approved from phone"
        device.updatedAt = Times.at(10)
        device.lastActivityAt = Times.at(11)
        try vault.devices.save(device)
        let otherDevice = DeviceRegistration(
            account: confidential.id, deviceID: "device-2", name: "Bob's desktop",
            platform: "linux", status: .rejected, activationMethod: .fallback,
            createdAt: Times.at(5), updatedAt: Times.at(5))
        try vault.devices.save(otherDevice)

        // Notifications: insert, then upsert the same uuid with an answer.
        let actions = [
            NotificationAction(label: "Approve", action: "approve", authLevel: "mfa"),
            NotificationAction(label: "Deny", action: "deny"),
        ]
        var notification = NotificationRecord(
            uuid: "0b5e0c1e-aaaa-4bbb-8ccc-000000000001", account: publicAccount.id, subject: "Sign-in request",
            message: "Approve sign-in from Lyon?", actions: actions, createdAt: Times.at(100), expiresAt: Times.at(400))
        #expect(try vault.notifications.upsert(notification))
        notification.status = .answered
        notification.actionTaken = "approve"
        notification.answeredAt = Times.at(150)
        notification.answeredByDevice = vault.deviceID
        #expect(try vault.notifications.upsert(notification) == false, "the same uuid updates, not inserts")
        let deviceID = vault.deviceID

        vault.close()
        vault = try test.open()
        defer { vault.close() }

        // Both were added at the same (fixed) time: compare regardless of order.
        let accounts = try vault.accounts.all()
        #expect(accounts.sorted { $0.subject < $1.subject } == [publicAccount, confidential])
        #expect(try vault.accounts.find(confidential.id)?.client.authentication == .clientSecretBasic)
        #expect(try vault.accounts.clientSecret(for: confidential.id) == "client-secret-value-7f3a")
        #expect(try vault.accounts.clientSecret(for: publicAccount.id) == nil)
        #expect(try vault.accounts.activeID() == publicAccount.id)
        #expect(vault.deviceID == deviceID)

        let stored = try #require(try vault.tokens.current(for: publicAccount.id))
        #expect(stored.tokens == tokens)
        #expect(stored.generation == generation)
        #expect(generation == 2)
        #expect(try vault.tokens.current(for: confidential.id)?.tokens == accessOnly)
        let metadata = try #require(try vault.tokens.metadata(for: publicAccount.id))
        #expect(metadata.generation == 2 && metadata.hasRefreshToken && metadata.hasIDToken)
        #expect(metadata.accessTokenExpiresAt == Times.at(7200) && metadata.scopes == ["openid", "profile"])

        #expect(try vault.sessions.current(for: publicAccount.id) == updated)
        #expect(try vault.sessions.all() == [second, updated])

        #expect(try vault.devices.find(device.id) == device)
        #expect(try vault.devices.all(for: publicAccount.id) == [device])
        #expect(try vault.devices.all() == [device, otherDevice])

        #expect(try vault.notifications.find(notification.uuid, account: publicAccount.id) == notification)
        #expect(try vault.notifications.count() == 1)
    }

    @Test("a vault works end to end: create, use, close, refuse use when closed, reopen", arguments: TestVault.Kind.allCases)
    func endToEnd(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        let vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        let generation = try vault.tokens.store(Samples.fixedTokens("e2e"), for: account.id, replacing: nil)
        vault.close()

        #expect(vault.isClosed)
        expectVaultError(.closed) { try vault.tokens.current(for: account.id) }
        expectVaultError(.closed) { try vault.accounts.insert(Samples.account("carol")) }

        let reopened = try test.open()
        defer { reopened.close() }
        #expect(!reopened.isClosed)
        #expect(try reopened.tokens(for: account.id)?.tokens.accessToken == Samples.fixedTokens("e2e").accessToken)
        let next = try reopened.writeTokens(Samples.fixedTokens("e2e-2"), for: account.id, replacing: generation)
        #expect(try reopened.tokens(for: account.id)?.generation == next)
        #expect(try reopened.removeAccount(account.id).removed)
        #expect(try reopened.accounts().isEmpty)
    }

    @Test("a second process can open a vault its creator still holds open", arguments: TestVault.Kind.allCases)
    func secondHandleWhileCreatorIsOpen(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        let creator = try test.create()
        defer { creator.close() }
        let account = try creator.insertAccount(Samples.account())
        try creator.writeTokens(Samples.fixedTokens("shared"), for: account.id, replacing: nil)

        // Nothing was checkpointed yet: the newest commits are only in the WAL.
        let second = try test.open()
        defer { second.close() }
        #expect(try second.tokens(for: account.id)?.tokens == Samples.fixedTokens("shared"))
        try second.upsertNotification(
            NotificationRecord(
                uuid: "n-1", account: account.id, subject: "from the second",
                message: "m", actions: [], createdAt: Times.at(0)))
        #expect(try creator.notification("n-1", account: account.id)?.subject == "from the second")
    }
}
