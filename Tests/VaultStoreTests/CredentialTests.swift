import Foundation
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// What unlocks a vault, what is refused, and that a refusal never changes the file.
@Suite struct CredentialTests {
    /// A credential that must not open a vault, and how it is refused.
    enum BadCredential: String, CaseIterable, CustomStringConvertible {
        case wrongPassphrase
        case emptyPassphrase
        case nonUTF8Passphrase
        case otherKeyFile
        case keyFileTooShort
        case keyFileTooLong
        case keyFileReadableByOthers
        case missingKeyFile
        case passphraseForKeyFileVault
        case keyFileForPassphraseVault
        var description: String { rawValue }

        var vaultKind: TestVault.Kind {
            switch self {
            case .wrongPassphrase, .emptyPassphrase, .nonUTF8Passphrase, .keyFileForPassphraseVault: .passphrase
            default: .keyFile
            }
        }

        var expected: VaultError.Code {
            switch self {
            case .keyFileTooShort, .keyFileTooLong, .missingKeyFile: .invalidCredential
            case .keyFileReadableByOthers: .unsafeLocation
            default: .wrongCredential
            }
        }
    }

    static let wrongPassphrase = "a wrong passphrase that must never be echoed"

    func make(_ bad: BadCredential, in test: TestVault) throws -> VaultCredential {
        let keyURL = test.directory.file("other.key")
        switch bad {
        case .wrongPassphrase, .passphraseForKeyFileVault:
            return try .passphrase(Self.wrongPassphrase)
        case .emptyPassphrase:
            return try .passphrase("")
        case .nonUTF8Passphrase:
            return try .passphrase(bytes: [0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80])
        case .otherKeyFile, .keyFileForPassphraseVault:
            try VaultCredential.createKeyFile(at: keyURL)
        case .keyFileTooShort:
            try writeKeyFile(keyURL, bytes: [UInt8](repeating: 7, count: 31), mode: 0o600)
        case .keyFileTooLong:
            try writeKeyFile(keyURL, bytes: [UInt8](repeating: 7, count: 33), mode: 0o600)
        case .keyFileReadableByOthers:
            try VaultCredential.createKeyFile(at: keyURL)
            #expect(chmod(keyURL.path, 0o644) == 0)
        case .missingKeyFile:
            break
        }
        return .keyFile(keyURL)
    }

    func writeKeyFile(_ url: URL, bytes: [UInt8], mode: mode_t) throws {
        try Data(bytes).write(to: url)
        #expect(chmod(url.path, mode) == 0)
    }

    @Test("a wrong or unusable credential is refused and leaves the vault file unchanged", arguments: BadCredential.allCases)
    func badCredentialIsRefused(bad: BadCredential) throws {
        let test = try TestVault(bad.vaultKind)
        let vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("kept"), for: account.id, replacing: nil)
        vault.close()
        let before = FileProbe.fingerprint(test.url)

        let credential = try make(bad, in: test)
        let error = expectVaultError(bad.expected) {
            try Vault.open(at: test.url, credential: credential, options: test.options())
        }
        #expect(FileProbe.fingerprint(test.url) == before)
        for text in [error.map(String.init(describing:)), error.map { String(reflecting: $0) }].compactMap({ $0 }) {
            #expect(!text.contains(Self.wrongPassphrase))
            #expect(!text.contains(TestVault.passphrase))
        }
        #expect(!test.logs.contains(Self.wrongPassphrase))

        // The right credential still opens it, with everything in place.
        let reopened = try test.open()
        defer { reopened.close() }
        #expect(try reopened.tokens(for: account.id)?.tokens == Samples.fixedTokens("kept"))
    }

    @Test("a passphrase that is not UTF-8 protects a vault like any other")
    func nonUTF8PassphraseWorks() throws {
        let test = try TestVault(.passphrase)
        let bytes: [UInt8] = [0xff, 0x00, 0xfe, 0x80, 0xc0, 0xaf]
        let vault = try Vault.create(at: test.url, credential: .passphrase(bytes: bytes), options: test.options())
        let account = try vault.accounts.insert(Samples.account())
        vault.close()

        let reopened = try Vault.open(at: test.url, credential: .passphrase(bytes: bytes), options: test.options())
        #expect(try reopened.accounts().map(\.id) == [account.id])
        reopened.close()
        // The same bytes minus the NUL are a different passphrase.
        expectVaultError(.wrongCredential) {
            try Vault.open(at: test.url, credential: .passphrase(bytes: bytes.filter { $0 != 0 }), options: test.options())
        }
    }

    // MARK: - Changing the credential

    @Test("changing the passphrase keeps every record readable and refuses the old one; then a key file replaces it")
    func changePassphraseThenSwitchToKeyFile() throws {
        let test = try TestVault(.passphrase)
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("change"), for: account.id, replacing: nil)
        try vault.notifications.upsert(
            NotificationRecord(
                uuid: "n-1", account: account.id, subject: "s", message: "m",
                actions: [], createdAt: Times.at(0)))
        let newPassphrase = "the new passphrase for this throwaway vault"
        try vault.maintenance.changeCredential(to: .passphrase(newPassphrase), cost: TestVault.fastKDF)
        #expect(try vault.tokens.current(for: account.id)?.tokens == Samples.fixedTokens("change"), "the open vault keeps working")
        vault.close()

        expectVaultError(.wrongCredential) { try test.open() }
        vault = try Vault.open(at: test.url, credential: .passphrase(newPassphrase), options: test.options())
        #expect(try vault.tokens.current(for: account.id)?.tokens == Samples.fixedTokens("change"))
        #expect(try vault.notifications.find("n-1", account: account.id)?.subject == "s")

        let keyURL = test.directory.file("new.key")
        try VaultCredential.createKeyFile(at: keyURL)
        try vault.maintenance.changeCredential(to: .keyFile(keyURL))
        vault.close()

        expectVaultError(.wrongCredential) {
            try Vault.open(at: test.url, credential: .passphrase(newPassphrase), options: test.options())
        }
        vault = try Vault.open(at: test.url, credential: .keyFile(keyURL), options: test.options())
        defer { vault.close() }
        #expect(try vault.tokens.current(for: account.id)?.tokens == Samples.fixedTokens("change"))
    }

    @Test("a key-file vault can switch to a passphrase")
    func keyFileToPassphrase() throws {
        let test = try TestVault(.keyFile)
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        try vault.maintenance.changeCredential(to: .passphrase(TestVault.passphrase), cost: TestVault.fastKDF)
        vault.close()

        expectVaultError(.wrongCredential) { try test.open() }
        vault = try Vault.open(at: test.url, credential: .passphrase(TestVault.passphrase), options: test.options())
        defer { vault.close() }
        #expect(try vault.accounts.all().map(\.id) == [account.id])
    }

    @Test("a new passphrase is stretched at the cost the vault was opened with, not a weaker default")
    func changeUsesConfiguredCost() throws {
        let test = try TestVault(.keyFile)
        try test.create().close()
        var options = test.options()
        options.kdf = KDFParameters(opsLimit: 3, memLimitBytes: 20 << 20)
        let vault = try Vault.open(at: test.url, credential: test.credential, options: options)
        try vault.maintenance.changeCredential(to: .passphrase(TestVault.passphrase))
        vault.close()
        #expect(try RawDatabase.int(test.url, "SELECT kdf_opslimit FROM vault_meta") == 3)
        #expect(try RawDatabase.int(test.url, "SELECT kdf_memlimit FROM vault_meta") == 20 << 20)
        try Vault.open(at: test.url, credential: .passphrase(TestVault.passphrase), options: test.options()).close()
    }

    @Test("a refused credential change leaves the old credential in force")
    func refusedChangeKeepsOldCredential() throws {
        let test = try TestVault(.keyFile)
        let vault = try test.create()
        expectVaultError(.invalidCredential) { try vault.maintenance.changeCredential(to: .passphrase(""), cost: TestVault.fastKDF) }
        expectVaultError(.invalidArgument) {
            try vault.maintenance.changeCredential(to: .passphrase("long enough"), cost: KDFParameters(opsLimit: 1, memLimitBytes: 19 << 20))
        }
        let badKey = test.directory.file("short.key")
        try writeKeyFile(badKey, bytes: [1, 2, 3], mode: 0o600)
        expectVaultError(.invalidCredential) { try vault.maintenance.changeCredential(to: .keyFile(badKey)) }
        vault.close()
        try test.open().close()
    }

    // MARK: - Creating

    static let weakCosts: [KDFParameters] = [
        KDFParameters(opsLimit: 2, memLimitBytes: 8 << 20),
        KDFParameters(opsLimit: 1, memLimitBytes: 64 << 20),
        KDFParameters(opsLimit: 2, memLimitBytes: (19 << 20) - 1024),
    ]

    @Test("creating a passphrase vault below OWASP's Argon2id floor is refused", arguments: weakCosts)
    func weakKDFIsRefused(cost: KDFParameters) throws {
        let test = try TestVault(.passphrase)
        var options = test.options()
        options.kdf = cost
        expectVaultError(.invalidArgument) { try Vault.create(at: test.url, credential: test.credential, options: options) }
        #expect(!FileManager.default.fileExists(atPath: test.url.path), "no half-made vault is left behind")
    }

    @Test("creating a vault with an empty passphrase is refused")
    func emptyPassphraseIsRefusedOnCreate() throws {
        let test = try TestVault(.passphrase)
        expectVaultError(.invalidCredential) { try Vault.create(at: test.url, credential: .passphrase(""), options: test.options()) }
        #expect(!FileManager.default.fileExists(atPath: test.url.path))
    }

    @Test("creating a vault with an unusable key file is refused")
    func badKeyFileIsRefusedOnCreate() throws {
        let test = try TestVault(.keyFile)
        let keyURL = test.directory.file("loose.key")
        try VaultCredential.createKeyFile(at: keyURL)
        #expect(chmod(keyURL.path, 0o640) == 0)
        expectVaultError(.unsafeLocation) { try Vault.create(at: test.url, credential: .keyFile(keyURL), options: test.options()) }
        #expect(!FileManager.default.fileExists(atPath: test.url.path))
    }

    @Test("a key handed over in memory (a keeper's) opens what a key file with its bytes opens, and nothing else; 31 bytes are refused")
    func keyInMemory() throws {
        let test = try TestVault(.keyFile)
        let key = try VaultCredential.newKey()
        let vault = try Vault.create(at: test.url, credential: .key(key), options: test.options())
        vault.close()
        let file = test.directory.file("same.key")
        try Data(try key.withUnsafeBytes { Array($0) }).write(to: file)
        #expect(chmod(file.path, 0o600) == 0)
        try Vault.open(at: test.url, credential: .keyFile(file), options: test.options()).close()
        try Vault.open(at: test.url, credential: .key(key), options: test.options()).close()
        expectVaultError(.wrongCredential) { try Vault.open(at: test.url, credential: .key(try VaultCredential.newKey()), options: test.options()) }
        expectVaultError(.invalidCredential) {
            try Vault.open(at: test.url, credential: .key(try SecureBytes(copying: [UInt8](repeating: 7, count: 31))), options: test.options())
        }
        #expect("\(VaultCredential.key(key))" == "VaultCredential.key(<redacted>)")
    }

    @Test("a new key file holds 32 bytes, mode 0600, and is never overwritten")
    func keyFileCreation() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("vault.key")
        try VaultCredential.createKeyFile(at: url)
        let contents = FileProbe.bytes(url)
        #expect(contents.count == 32)
        #expect(FileProbe.mode(url) == 0o600)
        expectVaultError(.alreadyExists) { try VaultCredential.createKeyFile(at: url) }
        #expect(FileProbe.bytes(url) == contents)
    }
}
