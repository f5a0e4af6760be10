import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// Issue 12, part 5: after a credential change, a copy of the vault made before it plus the old
/// passphrase must open nothing written afterwards: the attacker unwraps the old vault key from
/// the old copy, then tries it on every account key of the current file.
@Suite("Changing the credential against an older copy of the file")
struct CredentialChangeCopyTests {
    static let old = "the old passphrase"
    static let new = "the new passphrase"

    /// Makes a vault, copies it, changes the passphrase, writes new tokens. Returns the data keys
    /// of the current file that the old vault key (from the old copy and old passphrase) opens.
    static func attack(replacingKeys: Bool) throws -> (opened: Int, accounts: Int, tokensAfter: TokenSet) {
        let directory = try TemporaryDirectory()
        let url = directory.file("vault.db")
        let options = VaultOptions(kdf: .owaspFloor)
        var vault = try Vault.create(at: url, credential: .passphrase(old), options: options)
        let account = try vault.accounts.insert(Samples.account()).id
        let first = try vault.tokens.store(Samples.tokens("before"), for: account, replacing: nil)
        vault.close()
        let copy = directory.file("copy-before.db")
        try FileManager.default.copyItem(at: url, to: copy)

        vault = try Vault.open(at: url, credential: .passphrase(old), options: options)
        let change = try vault.maintenance.changeCredential(from: .passphrase(old), to: .passphrase(new), replacingKeys: replacingKeys)
        #expect(change.keysReplaced == replacingKeys)
        let after = Samples.tokens("after")
        try vault.tokens.store(after, for: account, replacing: try vault.tokens.current(for: account)?.generation ?? first)
        vault.close()
        #expect(throws: VaultError.self) { try Vault.open(at: url, credential: .passphrase(old), options: options) }

        // The attacker's side: the old vault key from the old copy, tried on the current file.
        let oldMeta = try #require(try RawDatabase.queue(copy).read { try VaultKeys.UnlockRecord.fetch($0) })
        let oldVaultKey = try VaultKeys.unlockVaultKey(oldMeta, credential: .passphrase(old), path: copy.path)
        let (vaultID, rows) = try RawDatabase.queue(url).read { db in
            (
                try Data.fetchOne(db, sql: "SELECT vault_id FROM vault_meta") ?? Data(),
                try Row.fetchAll(db, sql: "SELECT account_id, data_key_id, wrapped_data_key FROM accounts")
            )
        }
        var opened = 0
        for row in rows {
            let keyID = UInt32(truncatingIfNeeded: row["data_key_id"] as Int64)
            let context = SealContext(
                vaultID: [UInt8](vaultID), table: "accounts", column: "wrapped_data_key",
                account: row["account_id"], row: row["account_id"], version: "\(keyID)")
            if let key = try? oldVaultKey.openKey([UInt8](row["wrapped_data_key"] as Data), id: keyID, context: context) {
                opened += 1
                key.wipe()
            }
        }
        oldVaultKey.wipe()
        return (opened, rows.count, after)
    }

    @Test("with the keys replaced (the default), the old copy and old passphrase open no account key of the current file")
    func replacedKeysLeaveNothing() throws {
        let outcome = try Self.attack(replacingKeys: true)
        #expect(outcome.accounts == 1)
        #expect(outcome.opened == 0)
    }

    @Test("with the keys kept, they open every account key: what the command's message says")
    func keptKeysOpenEverything() throws {
        let outcome = try Self.attack(replacingKeys: false)
        #expect(outcome.opened == outcome.accounts)
    }
}
