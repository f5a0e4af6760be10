import Foundation
import GRDB
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// A sealed value that was altered, moved or replayed is reported as damage, never returned.
@Suite struct TamperingTests {
    @Test("a flipped byte anywhere in a sealed token is reported as damage naming table and column")
    func flippedByteIsRejected() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("flip"), for: account.id, replacing: nil)
        let original = try #require(try RawDatabase.blob(test.url, "SELECT refresh_token FROM tokens"))
        // Header (version, key id), nonce, ciphertext and tag: every position.
        #expect(original.count == SealedBlob.minimumLength + Samples.fixedTokens("flip").refreshToken!.utf8.count)

        for position in original.indices {
            var altered = original
            altered[position] ^= 0x01
            try RawDatabase.execute(test.url, "UPDATE tokens SET refresh_token = ?", [Data(altered)])
            let error = expectVaultError(.damaged) { try vault.tokens.current(for: account.id) }
            #expect(error?.message.contains("tokens.refresh_token") == true, "byte \(position): \(error.map(String.init(describing:)) ?? "")")
        }
        try RawDatabase.execute(test.url, "UPDATE tokens SET refresh_token = ?", [Data(original)])
        #expect(try vault.tokens.current(for: account.id)?.tokens == Samples.fixedTokens("flip"), "the restored value opens again")
    }

    @Test("a truncated or extended sealed value is reported as damage")
    func resizedBlobIsRejected() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("size"), for: account.id, replacing: nil)
        let original = try #require(try RawDatabase.blob(test.url, "SELECT access_token FROM tokens"))
        for altered in [Array(original.dropLast()), original + [0], Array(original.prefix(10)), []] {
            try RawDatabase.execute(test.url, "UPDATE tokens SET access_token = ?", [Data(altered)])
            expectVaultError(.damaged) { try vault.tokens.current(for: account.id) }
        }
    }

    /// Where a sealed value is copied from and to.
    enum Move: String, CaseIterable, CustomStringConvertible {
        case accessTokenToOtherAccount
        case accessTokenIntoRefreshToken
        case refreshTokenIntoIDToken
        case labelIntoEmail
        case labelToOtherAccount
        case notificationSubjectToOtherNotification
        case notificationSubjectIntoMessage
        case deviceNameToOtherDevice
        var description: String { rawValue }
    }

    @Test("a sealed value moved to another row, column or account is reported as damage", arguments: Move.allCases)
    func movedBlobIsRejected(move: Move) throws {
        let test = try TestVault()
        let vault = try test.create(clock: Times.fixedClock)
        defer { vault.close() }
        let alice = try vault.accounts.insert(Samples.account("alice"))
        let bob = try vault.accounts.insert(Samples.account("bob"))
        try vault.tokens.store(Samples.fixedTokens("alice"), for: alice.id, replacing: nil)
        try vault.tokens.store(Samples.fixedTokens("bob"), for: bob.id, replacing: nil)
        let first = NotificationRecord(
            uuid: "n-1", account: alice.id, subject: "first subject", message: "first message",
            actions: [], createdAt: Times.at(1))
        let second = NotificationRecord(
            uuid: "n-2", account: alice.id, subject: "second subject", message: "second message",
            actions: [], createdAt: Times.at(2))
        try vault.notifications.upsert([first, second])
        let laptop = DeviceRegistration(
            id: "reg-1", account: alice.id, deviceID: "d-1", name: "laptop", platform: "linux",
            status: .active, createdAt: Times.at(0), updatedAt: Times.at(0))
        let phone = DeviceRegistration(
            id: "reg-2", account: alice.id, deviceID: "d-2", name: "phone", platform: "linux",
            status: .active, createdAt: Times.at(0), updatedAt: Times.at(0))
        try vault.devices.save(laptop)
        try vault.devices.save(phone)

        let url = test.url
        func copy(_ select: String, _ selectArgs: StatementArguments, into update: String, _ updateArgs: StatementArguments) throws {
            let blob = try #require(try RawDatabase.blob(url, select, selectArgs))
            try RawDatabase.execute(url, update, [Data(blob)] + updateArgs)
        }

        let read: () throws -> Any
        let expectedPlace: String
        switch move {
        case .accessTokenToOtherAccount:
            try copy(
                "SELECT access_token FROM tokens WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE tokens SET access_token = ? WHERE account_id = ?", [bob.id.rawValue])
            read = { try vault.tokens.current(for: bob.id) as Any }
            expectedPlace = "tokens.access_token"
        case .accessTokenIntoRefreshToken:
            try copy(
                "SELECT access_token FROM tokens WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE tokens SET refresh_token = ? WHERE account_id = ?", [alice.id.rawValue])
            read = { try vault.tokens.current(for: alice.id) as Any }
            expectedPlace = "tokens.refresh_token"
        case .refreshTokenIntoIDToken:
            try copy(
                "SELECT refresh_token FROM tokens WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE tokens SET id_token = ? WHERE account_id = ?", [alice.id.rawValue])
            read = { try vault.tokens.current(for: alice.id) as Any }
            expectedPlace = "tokens.id_token"
        case .labelIntoEmail:
            try copy(
                "SELECT label FROM accounts WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE accounts SET email = ? WHERE account_id = ?", [alice.id.rawValue])
            read = { try vault.accounts.find(alice.id) as Any }
            expectedPlace = "accounts.email"
        case .labelToOtherAccount:
            try copy(
                "SELECT label FROM accounts WHERE account_id = ?", [alice.id.rawValue],
                into: "UPDATE accounts SET label = ? WHERE account_id = ?", [bob.id.rawValue])
            read = { try vault.accounts.all() as Any }
            expectedPlace = "accounts.label"
        case .notificationSubjectToOtherNotification:
            try copy(
                "SELECT subject FROM notifications WHERE uuid = 'n-1'", [],
                into: "UPDATE notifications SET subject = ? WHERE uuid = 'n-2'", [])
            read = { try vault.notifications.find("n-2", account: alice.id) as Any }
            expectedPlace = "notifications.subject"
        case .notificationSubjectIntoMessage:
            try copy(
                "SELECT subject FROM notifications WHERE uuid = 'n-1'", [],
                into: "UPDATE notifications SET message = ? WHERE uuid = 'n-1'", [])
            read = { try vault.notifications.page() as Any }
            expectedPlace = "notifications.message"
        case .deviceNameToOtherDevice:
            try copy(
                "SELECT name FROM devices WHERE registration_id = 'reg-1'", [],
                into: "UPDATE devices SET name = ? WHERE registration_id = 'reg-2'", [])
            read = { try vault.devices.find("reg-2") as Any }
            expectedPlace = "devices.name"
        }
        let error = expectVaultError(.damaged) { try read() }
        #expect(error?.message.contains(expectedPlace) == true, "\(error.map(String.init(describing:)) ?? "no error")")
    }

    @Test("an older token blob replayed into its own row after a newer store is reported as damage")
    func replayedOlderGenerationIsRejected() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let account = try vault.accounts.insert(Samples.account())
        let first = try vault.tokens.store(Samples.fixedTokens("old"), for: account.id, replacing: nil)
        let oldRefresh = try #require(try RawDatabase.blob(test.url, "SELECT refresh_token FROM tokens"))
        try vault.tokens.store(Samples.fixedTokens("new"), for: account.id, replacing: first)

        try RawDatabase.execute(test.url, "UPDATE tokens SET refresh_token = ?", [Data(oldRefresh)])
        let error = expectVaultError(.damaged) { try vault.tokens.current(for: account.id) }
        #expect(error?.message.contains("tokens.refresh_token") == true)
    }

    @Test("an account's data key moved to another account does not open")
    func movedDataKeyIsRejected() throws {
        let test = try TestVault()
        var vault = try test.create()
        let alice = try vault.accounts.insert(Samples.account("alice"))
        let bob = try vault.accounts.insert(Samples.account("bob"))
        try vault.tokens.store(Samples.fixedTokens("bob"), for: bob.id, replacing: nil)
        vault.close()
        // Give bob alice's wrapped data key: it must not open as bob's key.
        try RawDatabase.execute(
            test.url,
            """
            UPDATE accounts SET wrapped_data_key = (SELECT wrapped_data_key FROM accounts WHERE account_id = ?)
            WHERE account_id = ?
            """, [alice.id.rawValue, bob.id.rawValue])
        vault = try test.open()
        defer { vault.close() }
        let error = expectVaultError(.damaged) { try vault.tokens.current(for: bob.id) }
        #expect(error?.message.contains("accounts.wrapped_data_key") == true)
    }
}
