import Foundation
import GRDB
import Synchronization
import Testing
@_spi(RawWrites) import VaultStore
import VaultTestSupport

@testable import VaultCrypto

/// Key slots (schema 16): more ways into a vault, each with a key of its own, that open exactly
/// what the vault's own credential opens, survive a key rotation, follow a credential change,
/// and cannot be edited, deleted or put back without the vault noticing.
@Suite struct KeySlotTests {
    static func key(_ seed: UInt8) throws -> VaultCredential {
        .key(try SecureBytes(copying: (0..<32).map { $0 &+ seed }), source: "test keeper \(seed)")
    }

    /// Changes the vault file with `sql`, as someone without the key could.
    static func edit(_ url: URL, _ sql: String, _ arguments: StatementArguments = []) throws {
        let queue = try DatabaseQueue(path: url.path)
        try queue.write { db in try db.execute(sql: sql, arguments: arguments) }
        try queue.close()
    }

    /// A passphrase vault with one account and slot 1 (a keeper's key).
    static func vaultWithSlot() throws -> (TestVault, Vault) {
        let test = try TestVault(.passphrase)
        let vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.tokens("one"), for: account.id, replacing: nil)
        let slot = try vault.keySlots.add(try key(1), unlocking: test.credential, keeper: "secret-service", label: "the keyring")
        #expect(slot.id == 1)
        return (test, vault)
    }

    @Test("a slot's key opens the vault with everything in it; the passphrase still does; unlockedBy says which")
    func slotOpens() throws {
        let (test, vault) = try Self.vaultWithSlot()
        vault.close()
        let bySlot = try Vault.open(at: test.url, credential: try Self.key(1))
        #expect(bySlot.unlockedBy == 1)
        #expect(try bySlot.accounts.all().count == 1)
        #expect(try bySlot.keySlots.list().map(\.id) == [0, 1])
        bySlot.close()
        let byPassphrase = try test.open()
        #expect(byPassphrase.unlockedBy == 0)
        byPassphrase.close()
    }

    @Test("a key no slot takes is a wrong credential naming the ways in, and changes nothing")
    func wrongKey() throws {
        let (test, vault) = try Self.vaultWithSlot()
        vault.close()
        let before = FileProbe.fingerprint(test.url)
        #expect {
            try Vault.open(at: test.url, credential: try Self.key(9))
        } throws: { error in
            guard let error = error as? VaultError, error.code == .wrongCredential else { return false }
            return error.message.contains("slot 0 (the vault's passphrase)") && error.message.contains("slot 1 (secret-service: the keyring)")
        }
        #expect(FileProbe.fingerprint(test.url) == before)
    }

    @Test("a key rotation leaves every slot opening the vault")
    func rotationKeepsSlots() throws {
        let (test, vault) = try Self.vaultWithSlot()
        try vault.maintenance.rotateKeys(credential: try Self.key(1))
        vault.close()
        let bySlot = try Vault.open(at: test.url, credential: try Self.key(1))
        #expect(try bySlot.accounts.all().count == 1)
        #expect(try bySlot.maintenance.verify().passed)
        bySlot.close()
    }

    @Test("passwd seals every slot again: the slot and the new passphrase open, the old one does not")
    func credentialChangeReseals() throws {
        let (test, vault) = try Self.vaultWithSlot()
        let new = try VaultCredential.passphrase("a new passphrase for the slot test")
        try vault.maintenance.changeCredential(from: test.credential, to: new, slotKeys: [1: try Self.key(1)])
        vault.close()
        try Vault.open(at: test.url, credential: try Self.key(1), options: test.options()).close()
        try Vault.open(at: test.url, credential: new, options: test.options()).close()
        #expect { try test.open() } throws: { ($0 as? VaultError)?.code == .wrongCredential }
    }

    @Test("passwd without a slot's key, or with a wrong one, is refused and changes nothing")
    func credentialChangeNeedsSlotKeys() throws {
        let (test, vault) = try Self.vaultWithSlot()
        defer { vault.close() }
        let new = try VaultCredential.passphrase("a new passphrase for the slot test")
        let before = FileProbe.fingerprint(test.url)
        #expect {
            try vault.maintenance.changeCredential(from: test.credential, to: new)
        } throws: { ($0 as? VaultError)?.message.contains("slot 1") == true }
        #expect {
            try vault.maintenance.changeCredential(from: test.credential, to: new, slotKeys: [1: try Self.key(2)])
        } throws: { ($0 as? VaultError)?.code == .wrongCredential }
        #expect(FileProbe.fingerprint(test.url) == before)
    }

    @Test("a vault has one passphrase, and a key is added once")
    func refusals() throws {
        let (test, vault) = try Self.vaultWithSlot()
        defer { vault.close() }
        #expect {
            try vault.keySlots.add(try .passphrase("second"), unlocking: test.credential, label: "second")
        } throws: { ($0 as? VaultError)?.code == .invalidArgument }
        #expect {
            try vault.keySlots.add(try Self.key(1), unlocking: test.credential, label: "again")
        } throws: { ($0 as? VaultError)?.code == .alreadyExists }
        #expect {
            try vault.keySlots.add(try Self.key(3), unlocking: try Self.key(9), label: "not proven")
        } throws: { ($0 as? VaultError)?.code == .wrongCredential }
        #expect {
            try vault.keySlots.remove(0)
        } throws: { ($0 as? VaultError)?.code == .invalidArgument }
    }

    @Test("a removed slot's key opens nothing; its row put back from an older copy is refused")
    func removedSlotPutBack() throws {
        let (test, vault) = try Self.vaultWithSlot()
        let old = try DatabaseQueue(path: test.url.path).read { db in try Row.fetchOne(db, sql: "SELECT * FROM key_slots WHERE slot_id = 1") }
        try vault.keySlots.remove(1)
        vault.close()
        #expect {
            try Vault.open(at: test.url, credential: try Self.key(1))
        } throws: { ($0 as? VaultError)?.code == .wrongCredential }
        // The row as it was, written back without the key.
        let row = try #require(old)
        try Self.edit(
            test.url,
            "INSERT INTO key_slots (\(row.columnNames.joined(separator: ", "))) VALUES (\(row.columnNames.map { _ in "?" }.joined(separator: ", ")))",
            StatementArguments(row.databaseValues))
        #expect {
            try Vault.open(at: test.url, credential: try Self.key(1))
        } throws: { error in
            guard let error = error as? VaultError else { return false }
            return error.code == .damaged && error.message.contains("key_slots")
        }
        let byPassphrase = try test.open()
        defer { byPassphrase.close() }
        #expect(try !byPassphrase.maintenance.verify().passed)
    }

    @Test("a slot's label edited without the key is refused when that slot opens the vault, and by verify")
    func editedSlot() throws {
        let (test, vault) = try Self.vaultWithSlot()
        vault.close()
        try Self.edit(test.url, "UPDATE key_slots SET label = 'something else' WHERE slot_id = 1")
        #expect {
            try Vault.open(at: test.url, credential: try Self.key(1))
        } throws: { ($0 as? VaultError)?.code == .damaged }
        let byPassphrase = try test.open()
        defer { byPassphrase.close() }
        #expect(try !byPassphrase.maintenance.verify().passed)
        #expect(throws: VaultError.self) { try byPassphrase.keySlots.list() }
    }

    @Test("a slot's sealed secret moved to another slot, or taken from another vault with the same key, opens nothing")
    func slotMoved() throws {
        let (test, vault) = try Self.vaultWithSlot()
        try vault.keySlots.add(try Self.key(2), unlocking: test.credential, label: "second")
        vault.close()
        let (other, otherVault) = try Self.vaultWithSlot()
        otherVault.close()
        let theirs = try DatabaseQueue(path: other.url.path).read { db in try Data.fetchOne(db, sql: "SELECT wrapped_secret FROM key_slots") }
        // Slot 2's sealed secret into slot 1 (both seal the same secret, under other ids).
        try Self.edit(test.url, "UPDATE key_slots SET wrapped_secret = (SELECT wrapped_secret FROM key_slots WHERE slot_id = 2) WHERE slot_id = 1")
        // Slot 1's key opens neither (slot 2's secret is bound to slot 2's id); slot 2's own key
        // still opens slot 2, and then the edit of slot 1 is caught before the vault is returned.
        #expect {
            try Vault.open(at: test.url, credential: try Self.key(1))
        } throws: { ($0 as? VaultError)?.code == .wrongCredential }
        #expect {
            try Vault.open(at: test.url, credential: try Self.key(2))
        } throws: { error in
            guard let error = error as? VaultError else { return false }
            return error.code == .damaged && error.message.contains("key_slots")
        }
        try Self.edit(test.url, "UPDATE key_slots SET wrapped_secret = ? WHERE slot_id = 1", [theirs])
        #expect {
            try Vault.open(at: test.url, credential: try Self.key(1))
        } throws: { ($0 as? VaultError)?.code == .wrongCredential }
    }

    @Test("a slot row no longer readable (a column of the wrong type) does not stand in slot 0's way; verify reports it")
    func malformedSlotRow() throws {
        let (test, vault) = try Self.vaultWithSlot()
        vault.close()
        try Self.edit(test.url, "UPDATE key_slots SET wrapped_secret = 42 WHERE slot_id = 1")
        let byPassphrase = try test.open()
        defer { byPassphrase.close() }
        #expect(try !byPassphrase.maintenance.verify().passed)
        #expect { try Vault.open(at: test.url, credential: try Self.key(1)) } throws: { ($0 as? VaultError)?.code == .wrongCredential }
    }

    @Test("a slot counter edited to the end of the range refuses a new slot; it never wraps to a removed slot's id")
    func slotCounterAtTheEnd() throws {
        let (test, vault) = try Self.vaultWithSlot()
        vault.close()
        try Self.edit(test.url, "UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = 'key_slots'")
        let reopened = try test.open()
        defer { reopened.close() }
        #expect {
            try reopened.keySlots.add(try Self.key(3), unlocking: test.credential, label: "third")
        } throws: { ($0 as? VaultError)?.code == .damaged }
        #expect(try reopened.keySlots.list().map(\.id) == [0, 1])
    }

    @Test("a locked vault unlocks again through a slot after another process replaced the keys")
    func unlockThroughSlotAfterRotation() throws {
        let (test, vault) = try Self.vaultWithSlot()
        defer { vault.close() }
        let other = try test.open()
        try other.maintenance.rotateKeys(credential: test.credential)
        other.close()
        vault.lock()
        try vault.unlock(with: try Self.key(1))
        #expect(vault.unlockedBy == 1)
        #expect(try vault.accounts.all().count == 1)
        #expect(try vault.holdsCurrentKey())
    }

    @Test("a key-file vault's passphrase slot: the right passphrase and a wrong one each cost exactly one derivation; a key costs none")
    func passphraseSlotCostsOneDerivation() throws {
        let test = try TestVault(.keyFile)
        let vault = try test.create()
        let slot = try vault.keySlots.add(try .passphrase("the slot passphrase"), unlocking: test.credential, label: "a passphrase", cost: .owaspFloor)
        vault.close()
        func derivations(opening credential: VaultCredential, through expected: Int64 = 0) -> (count: Int, error: VaultError?) {
            let counter = KeyEncryptionKey.DerivationCounter()
            var failure: VaultError?
            KeyEncryptionKey.$derivationCounter.withValue(counter) {
                do {
                    let opened = try Vault.open(at: test.url, credential: credential, options: test.options())
                    #expect(opened.unlockedBy == expected)
                    opened.close()
                } catch {
                    failure = error as? VaultError
                }
            }
            return (counter.count.load(ordering: .relaxed), failure)
        }
        #expect(derivations(opening: try .passphrase("the slot passphrase"), through: slot.id) == (1, nil))
        let wrong = derivations(opening: try .passphrase("not the slot passphrase"))
        #expect(wrong.count == 1 && wrong.error?.code == .wrongCredential)
        #expect(derivations(opening: test.credential).count == 0)
    }
}
