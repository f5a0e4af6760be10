import Foundation
import GRDB
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Removing an account leaves none of its sealed values or token bytes anywhere on disk.
@Suite struct AccountRemovalTests {
    @Test(
        "a removed account leaves no sealed value or token in the vault, its WAL or its shared memory",
        arguments: TestVault.Kind.allCases)
    func removedAccountLeavesNoTrace(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        let vault = try test.create(clock: Times.fixedClock)
        defer { vault.close() }
        let alice = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.example.test", subject: "alice", label: "Alice-label-91c2", email: "alice-91c2@example.test",
                client: OAuthClientSettings(
                    tokenEndpoint: try #require(URL(string: "https://id.example.test/token")),
                    clientID: "cli", authentication: .clientSecretBasic),
                clientSecret: "alice-client-secret-91c2"))
        let bob = try vault.accounts.insert(Samples.account("bob"))

        // Several generations, so older token values were written too.
        var aliceTokens: [TokenSet] = []
        var generation: Int64? = nil
        for round in 0..<3 {
            let tokens = Samples.fixedTokens("alice-\(round)-q7w8e9")
            aliceTokens.append(tokens)
            generation = try vault.tokens.store(tokens, for: alice.id, replacing: generation)
        }
        try vault.tokens.store(Samples.fixedTokens("bob-r4t5y6"), for: bob.id, replacing: nil)
        for index in 0..<5 {
            for account in [alice.id, bob.id] {
                try vault.notifications.upsert(
                    NotificationRecord(
                        uuid: "\(account.rawValue)-\(index)", account: account, subject: "subject-\(account.rawValue.prefix(8))-\(index)",
                        // Long enough to spill into overflow pages, which are freed differently from table cells.
                        message: "message body \(index) " + String(repeating: "lorem ipsum ", count: 600),
                        actions: [NotificationAction(label: "Approve", action: "approve")],
                        createdAt: Times.at(index)))
            }
        }
        try vault.devices.save(
            DeviceRegistration(
                account: alice.id, deviceID: vault.deviceID, name: "alice-device-name",
                platform: "linux", status: .active, createdAt: Times.at(0), updatedAt: Times.at(0)))
        try vault.sessions.start(for: alice.id, idleDeadline: Times.at(900), absoluteDeadline: nil)

        let url = test.url
        let aliceID = alice.id.rawValue
        let sealed = try RawDatabase.blobs(
            url,
            """
            SELECT label FROM accounts WHERE account_id = ?1 UNION ALL
            SELECT email FROM accounts WHERE account_id = ?1 UNION ALL
            SELECT client_secret FROM accounts WHERE account_id = ?1 UNION ALL
            SELECT wrapped_data_key FROM accounts WHERE account_id = ?1 UNION ALL
            SELECT access_token FROM tokens WHERE account_id = ?1 UNION ALL
            SELECT refresh_token FROM tokens WHERE account_id = ?1 UNION ALL
            SELECT id_token FROM tokens WHERE account_id = ?1 UNION ALL
            SELECT subject FROM notifications WHERE account_id = ?1 UNION ALL
            SELECT message FROM notifications WHERE account_id = ?1 UNION ALL
            SELECT actions FROM notifications WHERE account_id = ?1 UNION ALL
            SELECT name FROM devices WHERE account_id = ?1
            """, [aliceID])
        #expect(sealed.count == 4 + 3 + 15 + 1)
        let plaintexts =
            aliceTokens.flatMap { [$0.accessToken, $0.refreshToken, $0.idToken].compactMap { $0 } }
            + ["alice-client-secret-91c2", "Alice-label-91c2", "alice-device-name"]

        // The probe sees every one of them while the account exists (so it would see leftovers).
        let scan = LeftoverScan(sealed)
        try vault.maintenance.checkpoint()
        #expect(scan.found(in: url) == Set(sealed.indices))
        #expect(FileProbe.contains(url, Array(aliceID.utf8)))

        #expect(try vault.accounts.remove(alice.id).removed)
        #expect(try vault.accounts.remove(alice.id).removed == false, "a second removal finds nothing")

        let files = ["", "-wal", "-shm"].map { URL(fileURLWithPath: url.path + $0) }
        for file in files {
            #expect(scan.found(in: file).isEmpty, "pieces of sealed values still in \(file.lastPathComponent)")
            for text in plaintexts {
                #expect(!FileProbe.contains(file, Array(text.utf8)), "plaintext still in \(file.lastPathComponent)")
            }
            #expect(!FileProbe.contains(file, Array(aliceID.utf8)), "the account id still in \(file.lastPathComponent)")
        }

        #expect(try vault.accounts.find(alice.id) == nil)
        #expect(try vault.tokens.current(for: alice.id) == nil)
        #expect(try vault.notifications.count(account: alice.id) == 0)
        #expect(try vault.devices.all(for: alice.id).isEmpty)
        #expect(try vault.sessions.all(for: alice.id).isEmpty)
        #expect(try vault.accounts.activeID() == bob.id, "the oldest remaining account took over from the removed active one")

        // Bob is untouched, before and after reopening.
        #expect(try vault.tokens.current(for: bob.id)?.tokens == Samples.fixedTokens("bob-r4t5y6"))
        #expect(try vault.notifications.count(account: bob.id) == 5)
        vault.close()
        let reopened = try test.open()
        defer { reopened.close() }
        #expect(try reopened.accounts().map(\.id) == [bob.id])
        #expect(try reopened.tokens(for: bob.id)?.tokens == Samples.fixedTokens("bob-r4t5y6"))
        #expect(try reopened.notifications(NotificationQuery(account: bob.id)).items.count == 5)
    }
}

/// Removing an account while another connection holds a read transaction: the removal
/// completes in full (account gone, next account active), the blocked checkpoint is reported,
/// and `compact` clears what it left on disk once the reader is done.
@Suite struct RemovalUnderReaderTests {
    @Test("a reader blocks only the checkpoint: the account is gone, the other active, and compact finishes later")
    func removalUnderLongReader() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try vault.accounts.insert(Samples.account("alice")).id
        let bob = try vault.accounts.insert(Samples.account("bob")).id
        try vault.tokens.store(Samples.fixedTokens("alice-reader-5e6f"), for: alice, replacing: nil)
        try vault.tokens.store(Samples.fixedTokens("bob-reader-5e6f"), for: bob, replacing: nil)
        #expect(try vault.accounts.activeID() == alice)
        let sealed = try RawDatabase.blobs(
            test.url,
            """
            SELECT access_token FROM tokens WHERE account_id = ?1 UNION ALL SELECT refresh_token FROM tokens WHERE account_id = ?1
            UNION ALL SELECT wrapped_data_key FROM accounts WHERE account_id = ?1
            """, [alice.rawValue])
        try vault.maintenance.checkpoint()  // alice's values are in the database file itself now
        let scan = LeftoverScan(sealed)
        #expect(scan.found(in: test.url) == Set(sealed.indices))

        let reader = try LongReader(test.url)
        let removal = try vault.accounts.remove(alice, checkpointWait: .zero)
        #expect(removal.removed)
        #expect(removal.previousActive == alice && removal.active == bob, "bob became active in the removal's transaction")
        guard case .blockedByReader? = removal.checkpoint else {
            Issue.record("the checkpoint was not reported blocked: \(String(describing: removal.checkpoint))")
            return
        }
        #expect(try vault.accounts.find(alice) == nil)
        #expect(try vault.accounts.activeID() == bob)
        #expect(test.logs.lines.contains { $0.contains("stays on disk until a checkpoint completes") })
        // The reader's snapshot still needs the old pages: the removed values are still on disk.
        #expect(!scan.found(in: test.url).isEmpty, "the reader kept the old pages in the file")
        #expect(
            try Vault.compact(at: test.url, options: test.options().with(busyTimeout: .zero)) != .completed,
            "compact cannot finish while the reader is there either")

        try reader.finish()
        #expect(try Vault.compact(at: test.url, options: test.options()) == .completed)
        for suffix in ["", "-wal", "-shm"] {
            #expect(scan.found(in: URL(fileURLWithPath: test.url.path + suffix)).isEmpty, "removed values left in vault.db\(suffix)")
        }
        #expect(try vault.tokens.current(for: bob)?.tokens == Samples.fixedTokens("bob-reader-5e6f"))
    }
}

extension VaultOptions {
    func with(busyTimeout: Duration) -> VaultOptions {
        var options = self
        options.busyTimeout = busyTimeout
        return options
    }
}
