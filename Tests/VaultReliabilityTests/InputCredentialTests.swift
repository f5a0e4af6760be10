import Foundation
import Synchronization
import Testing
@_spi(RawWrites) import VaultStore
import VaultTestSupport

@testable import VaultCrypto

/// Case 6 of issue 7: wrong, empty, 1 MiB and non-UTF-8 passphrases, a wrong key file and key
/// files of the wrong size are refused with a typed error, in at most one key derivation's time,
/// without a write, and with nothing secret in the message or the logs. (CredentialTests in
/// VaultStoreTests covers the refusal itself; this adds the time bound, the 1 MiB passphrase,
/// the WAL and key-file bytes, and runs every attempt against one vault.)
@Suite struct InputCredentialTests {
    enum Attempt: String, CaseIterable, CustomStringConvertible {
        case wrongPassphrase, emptyPassphrase, oneMebibytePassphrase, nonUTF8Passphrase
        case otherKeyFile, emptyKeyFile, keyFile31Bytes, keyFile33Bytes, keyFile1MiB
        var description: String { rawValue }

        /// Passphrases are stretched (one key derivation at most); key files are not.
        var isPassphrase: Bool { rawValue.hasSuffix("Passphrase") }

        var expected: VaultError.Code {
            switch self {
            case .emptyKeyFile, .keyFile31Bytes, .keyFile33Bytes, .keyFile1MiB: .invalidCredential
            default: .wrongCredential
            }
        }
    }

    static let wrongPassphrase = "wrong passphrase 4f7c-never-echoed"
    static let bigPassphrase = String(repeating: "big passphrase 9d2e ", count: (1 << 20) / 20 + 1)

    /// The credential to try, and the secret forms it brings.
    func credential(_ attempt: Attempt, in test: TestVault) throws -> (VaultCredential, [String]) {
        let keyURL = test.directory.file("attempt-\(attempt).key")
        func keyFile(_ bytes: [UInt8]) throws -> (VaultCredential, [String]) {
            #expect(FileManager.default.createFile(atPath: keyURL.path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
            return (.keyFile(keyURL), LogHygiene.forms(ofBytes: Array(bytes.prefix(64))))
        }
        switch attempt {
        case .wrongPassphrase: return (try .passphrase(Self.wrongPassphrase), [Self.wrongPassphrase])
        case .emptyPassphrase: return (try .passphrase(""), [])
        case .oneMebibytePassphrase: return (try .passphrase(Self.bigPassphrase), [String(Self.bigPassphrase.prefix(40))])
        case .nonUTF8Passphrase:
            let bytes: [UInt8] = [0xff, 0xfe, 0x41, 0x42, 0xc3, 0x28, 0x80, 0x43, 0x44, 0x45, 0x00, 0x46]
            return (try .passphrase(bytes: bytes), LogHygiene.forms(ofBytes: bytes))
        case .otherKeyFile:
            try VaultCredential.createKeyFile(at: keyURL)
            return (.keyFile(keyURL), LogHygiene.forms(ofKeyFile: keyURL))
        case .emptyKeyFile: return try keyFile([])
        case .keyFile31Bytes: return try keyFile((0..<31).map { UInt8($0 * 7 + 1) })
        case .keyFile33Bytes: return try keyFile((0..<33).map { UInt8($0 * 5 + 3) })
        case .keyFile1MiB: return try keyFile([UInt8](repeating: 0x5a, count: 1 << 20))
        }
    }

    @Test(
        "a bad passphrase or key file is refused with a typed error within one key derivation, writes nothing, leaks nothing",
        arguments: Attempt.allCases)
    func refused(attempt: Attempt) throws {
        let test = try TestVault(attempt.isPassphrase ? .passphrase : .keyFile)
        let vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        let tokens = Samples.steadyTokens("cred-6a1b")
        try vault.tokens.store(tokens, for: account.id, replacing: nil)
        vault.close()
        // The shared-memory file is SQLite's WAL index, rewritten by every reader: only the
        // database and its WAL hold the vault.
        let files = ["", "-wal"].map { URL(fileURLWithPath: test.url.path + $0) }
        let before = files.map(FileProbe.fingerprint)

        let (credential, secrets) = try credential(attempt, in: test)
        // "In at most one key derivation's time", counted rather than timed: the derivations
        // this task makes while the open is refused. A passphrase costs exactly one; a key
        // file none.
        let derivations = KeyEncryptionKey.DerivationCounter()
        var error: VaultError?
        KeyEncryptionKey.$derivationCounter.withValue(derivations) {
            error = expectRefusal(attempt.expected) {
                try Vault.open(at: test.url, credential: credential, options: test.options())
            }
        }
        let untouched = files.map(FileProbe.fingerprint) == before
        #expect(untouched, "the vault and its WAL are unchanged")
        #expect(
            derivations.count.load(ordering: .relaxed) == (attempt.isPassphrase ? 1 : 0),
            "Argon2id derivations made while refusing")

        let message = error.map { "\($0) \(String(reflecting: $0))" } ?? ""
        LogHygiene.check(
            test.logs, texts: [message],
            secrets: secrets + LogHygiene.secrets(of: test)
                + [tokens.accessToken, tokens.refreshToken ?? ""])

        // The right credential still opens it, with everything in place.
        let reopened = try test.open()
        defer { reopened.close() }
        let survived = try reopened.tokens(for: account.id)?.tokens == tokens
        #expect(survived)
        StressResults.record(
            StressCount(
                case: "6 bad passphrases and key files", tried: 1,
                passed: error?.code == attempt.expected && untouched && survived ? 1 : 0,
                lost: survived ? 0 : 1, leaked: error?.code == attempt.expected && untouched ? 0 : 1))
    }
}
