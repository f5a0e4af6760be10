import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

/// Passphrase and key-file key-encryption keys, and the Argon2id cost floor.
@Suite struct KeyDerivationTests {
    static let cost = TestVault.fastKDF

    func derive(_ passphrase: String, salt: [UInt8], cost: KDFParameters = cost) throws -> KeyEncryptionKey {
        let secret = try SecureBytes(copying: Array(passphrase.utf8))
        defer { secret.wipe() }
        return try KeyEncryptionKey.derive(passphrase: secret, salt: salt, cost: cost)
    }

    @Test("the same passphrase and salt give the same key; another salt or passphrase does not")
    func determinism() throws {
        let salt = try KeyEncryptionKey.newSalt()
        #expect(salt.count == KeyEncryptionKey.saltLength)
        let first = try derive("correct horse battery staple", salt: salt)
        let again = try derive("correct horse battery staple", salt: salt)
        let check = try first.keyCheck()
        #expect(check.count == KeyEncryptionKey.checkLength)
        #expect(try again.keyCheck() == check)
        #expect(try again.matches(keyCheck: check))

        // What one wraps, the other unwraps.
        let vaultKey = try SymmetricKey.generate(id: 1)
        let context = SealContext(vaultID: [1, 2, 3], table: "vault_meta", column: "wrapped_vault_key", row: "1", version: "1")
        let wrapped = try first.wrap(vaultKey, context: context)
        let unwrapped = try again.unwrap(wrapped, id: 1, context: context)
        let blob = try vaultKey.seal(Array("x".utf8), context: context)
        #expect(try unwrapped.open(blob, context: context) == Array("x".utf8))

        var otherSalt = try KeyEncryptionKey.newSalt()
        if otherSalt == salt { otherSalt[0] ^= 1 }
        let saltedElsewhere = try derive("correct horse battery staple", salt: otherSalt)
        #expect(try !saltedElsewhere.matches(keyCheck: check))
        #expect(try saltedElsewhere.keyCheck() != check)
        #expect(throws: CryptoError.self) { try saltedElsewhere.unwrap(wrapped, id: 1, context: context) }

        let otherPassphrase = try derive("correct horse battery stapler", salt: salt)
        #expect(try !otherPassphrase.matches(keyCheck: check))
    }

    @Test("the key check does not reveal the wrapping key: a check of another length never matches")
    func keyCheckLength() throws {
        let key = try KeyEncryptionKey.fromKeyFile(SecureBytes.random(count: 32))
        let check = try key.keyCheck()
        #expect(try !key.matches(keyCheck: Array(check.dropLast())))
        #expect(try !key.matches(keyCheck: []))
        #expect(try key.matches(keyCheck: check))
    }

    @Test("key files: 32 bytes derive a stable key; any other length is refused")
    func keyFiles() throws {
        let bytes = try Random.bytes(32)
        let first = try KeyEncryptionKey.fromKeyFile(SecureBytes(copying: bytes))
        let again = try KeyEncryptionKey.fromKeyFile(SecureBytes(copying: bytes))
        #expect(try first.keyCheck() == again.keyCheck())
        let other = try KeyEncryptionKey.fromKeyFile(SecureBytes.random(count: 32))
        #expect(try other.keyCheck() != first.keyCheck())
        for length in [0, 16, 31, 33, 64] {
            #expect(throws: CryptoError.self, "length \(length)") {
                try KeyEncryptionKey.fromKeyFile(SecureBytes.random(count: length))
            }
        }
    }

    @Test("a wiped key-encryption key refuses to work")
    func wipedKEK() throws {
        let kek = try KeyEncryptionKey.fromKeyFile(SecureBytes.random(count: 32))
        kek.wipe()
        let error = #expect(throws: CryptoError.self) { try kek.keyCheck() }
        #expect(error?.code == .keyWiped)
        let wrapError = #expect(throws: CryptoError.self) {
            try kek.wrap(SymmetricKey.generate(id: 1), context: SealContext(vaultID: [], table: "t", column: "c", row: "r"))
        }
        #expect(wrapError?.code == .keyWiped)
    }

    @Test("derivation refuses a salt of the wrong length and a cost outside libsodium's range")
    func derivationArguments() throws {
        let short = #expect(throws: CryptoError.self) { try derive("p", salt: [1, 2, 3]) }
        #expect(short?.code == .invalidKey)
        let tooCheap = #expect(throws: CryptoError.self) {
            try derive("p", salt: KeyEncryptionKey.newSalt(), cost: KDFParameters(opsLimit: 0, memLimitBytes: 1024))
        }
        #expect(tooCheap?.code == .weakParameters)
    }

    @Test("an empty passphrase and non-UTF-8 bytes derive without crashing, to distinct keys")
    func unusualPassphrases() throws {
        let salt = try KeyEncryptionKey.newSalt()
        let empty = try KeyEncryptionKey.derive(passphrase: SecureBytes(copying: []), salt: salt, cost: Self.cost)
        let binary = try KeyEncryptionKey.derive(passphrase: SecureBytes(copying: [0xff, 0x00, 0xfe]), salt: salt, cost: Self.cost)
        #expect(try empty.keyCheck() != binary.keyCheck())
    }

    // MARK: - Cost floor

    static let belowFloor: [KDFParameters] = [
        KDFParameters(opsLimit: 1, memLimitBytes: 19 << 20),
        KDFParameters(opsLimit: 2, memLimitBytes: 8 << 20),
        KDFParameters(opsLimit: 2, memLimitBytes: (19 << 20) - 1),
        KDFParameters(opsLimit: 0, memLimitBytes: 0),
        KDFParameters(opsLimit: 1, memLimitBytes: 1 << 30),
        KDFParameters(opsLimit: 10, memLimitBytes: 1 << 20),
        KDFParameters(opsLimit: .max, memLimitBytes: 64 << 20),
        KDFParameters(opsLimit: 2, memLimitBytes: .max),
    ]

    @Test("costs below OWASP's floor, or beyond libsodium's maximum, are refused", arguments: belowFloor)
    func weakCostIsRefused(cost: KDFParameters) {
        let error = #expect(throws: CryptoError.self) { try cost.validate() }
        #expect(error?.code == .weakParameters)
    }

    static let acceptable: [KDFParameters] = [
        .owaspFloor, .interactive, .moderate, .sensitive,
        KDFParameters(opsLimit: 2, memLimitBytes: 19 << 20),
        KDFParameters(opsLimit: 5, memLimitBytes: 46 << 20),
    ]

    @Test("the floor itself and libsodium's named levels are accepted", arguments: acceptable)
    func acceptableCost(cost: KDFParameters) throws {
        try cost.validate()
    }
}
