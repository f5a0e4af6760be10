import Foundation
import GRDB
import Testing
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Case 10 of issue 7. AccountRemovalTests (VaultStoreTests) searches the file, WAL and shared
/// memory after a removal in a vault open once. This adds the shared case: the vault also open
/// in a second connection (another process's view) that has read the account, with several
/// token rotations behind it, and checks the pages the removal freed (the free list).
@Suite struct ResidueTests {
    @Test("a removal while another connection has the vault open leaves no token or sealed value in the file, WAL, shared memory or free pages")
    func removalWithSecondConnection() throws {
        let test = try TestVault()
        let remover = try test.create()
        defer { remover.close() }
        let other = try test.open()
        defer { other.close() }
        let alice = try remover.insertAccount(Samples.account("alice")).id
        let bob = try remover.insertAccount(Samples.account("bob")).id
        var generation: Int64? = nil
        var tokenValues: [String] = []
        for round in 0..<4 {
            let tokens = Samples.steadyTokens("residue-\(round)-c1d2e3")
            tokenValues += [tokens.accessToken, tokens.refreshToken, tokens.idToken].compactMap { $0 }
            generation = try remover.writeTokens(tokens, for: alice, replacing: generation)
        }
        try remover.writeTokens(Samples.steadyTokens("residue-bob"), for: bob, replacing: nil)
        for index in 0..<20 {
            try remover.upsertNotification(
                NotificationRecord(
                    uuid: "a-\(index)", account: alice, subject: "residue subject \(index)",
                    message: "residue message \(index) " + String(repeating: "x", count: 900), actions: [], createdAt: Date()))
        }
        // The other connection reads everything of alice's (its pages are in its cache, not on disk).
        #expect(try other.tokens(for: alice)?.generation == generation)
        #expect(try other.notificationCount(account: alice) == 20)

        let url = test.url
        let sealed = try RawDatabase.blobs(
            url,
            """
            SELECT access_token FROM tokens WHERE account_id = ?1 UNION ALL SELECT refresh_token FROM tokens WHERE account_id = ?1
            UNION ALL SELECT wrapped_data_key FROM accounts WHERE account_id = ?1 UNION ALL SELECT label FROM accounts WHERE account_id = ?1
            UNION ALL SELECT message FROM notifications WHERE account_id = ?1
            """, [alice.rawValue])
        #expect(sealed.count == 24)

        #expect(try remover.removeAccount(alice).checkpoint == .completed)
        #expect(try RawDatabase.int(url, "PRAGMA freelist_count") ?? 0 > 0, "the removal freed pages")
        for suffix in ["", "-wal", "-shm"] {
            let file = URL(fileURLWithPath: url.path + suffix)
            // Any 16-byte piece of a sealed value counts as a leftover (SQLite may split a value over pages).
            var pieces = Set<Data>()
            for blob in sealed {
                for start in stride(from: 0, through: blob.count - 16, by: 16) { pieces.insert(Data(blob[start..<(start + 16)])) }
            }
            let bytes = Data(FileProbe.bytes(file))
            var found = 0
            if bytes.count >= 16 {
                for offset in 0...(bytes.count - 16) where pieces.contains(bytes[offset..<(offset + 16)]) { found += 1 }
            }
            #expect(found == 0, "\(found) pieces of the removed account's sealed values in vault.db\(suffix)")
            var plainLeft = 0
            for value in tokenValues + ["residue subject 3", alice.rawValue] {
                let left = FileProbe.contains(file, Array(value.utf8))
                if left { plainLeft += 1 }
                #expect(!left, "a value of the removed account in vault.db\(suffix)")
            }
            StressResults.record(
                StressCount(
                    case: "10 residue after a removal (file, WAL, shared memory searched)", tried: 1,
                    passed: found == 0 && plainLeft == 0 ? 1 : 0, lost: 0, leaked: found + plainLeft))
        }
        #expect(try other.account(alice) == nil, "the other connection sees the removal")
        #expect(try other.tokens(for: bob)?.tokens == Samples.steadyTokens("residue-bob"))
        LogHygiene.check(test.logs, secrets: tokenValues + LogHygiene.secrets(of: test))
    }
}
