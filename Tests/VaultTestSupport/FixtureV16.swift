import Foundation
import VaultCrypto
@_spi(RawWrites) import VaultStore

/// The records of the schema-16 fixture vault, `Tests/Fixtures/vault-v16.db`: everything in
/// ``FixtureV15`` plus two key slots, which schema 16 stores: slot 1 a key (published below, as
/// a keeper would hold it), slot 2 a key file's key. Both open the vault as its passphrase does.
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV16 {
    public static let fileName = "vault-v16.db"
    /// The fixture's passphrase (slot 0): a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v16"
    /// Slot 1's key, as the desktop keyring would hold it: published, protecting nothing.
    public static let keeperKey: [UInt8] = Array(0..<32)
    /// Slot 2's key (a key file's 32 bytes): published, protecting nothing.
    public static let keyFileKey: [UInt8] = (0..<32).map { UInt8(255 - $0) }

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-16 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV15.populate(vault)
        let unlock = try VaultCredential.passphrase(passphrase)
        try vault.keySlots.add(
            .key(try SecureBytes(copying: keeperKey), source: "the fixture"), unlocking: unlock, keeper: "secret-service",
            label: "the desktop keyring's default collection")
        try vault.keySlots.add(.key(try SecureBytes(copying: keyFileKey), source: "the fixture"), unlocking: unlock, label: "/media/usb/vault.recovery")
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    public static func differences(in vault: Vault, laterAccounts: Int = 0) throws -> [String] {
        var problems = try FixtureV15.differences(in: vault, laterAccounts: laterAccounts)
        let slots = try vault.keySlots.list()
        let shape = slots.map { "\($0.id) \($0.kind.rawValue) \($0.keeper ?? "-") \($0.label)" }
        let expected = [
            "0 argon2id13 - the vault's passphrase",
            "1 keyfile secret-service the desktop keyring's default collection",
            "2 keyfile - /media/usb/vault.recovery",
        ]
        if shape != expected { problems.append("key slots differ: \(shape)") }
        return problems
    }
}
