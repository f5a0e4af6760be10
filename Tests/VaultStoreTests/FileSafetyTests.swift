import Foundation
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// File modes and locations: a vault is private to its owner, or refused.
@Suite struct FileSafetyTests {
    /// The umask is process-wide: these run one at a time and restore it.
    @Suite(.serialized) struct UnderUmask022 {
        @Test("the vault and its -wal and -shm are 0600 under a umask of 022")
        func filesArePrivate() throws {
            let previous = umask(0o022)
            defer { umask(previous) }
            let test = try TestVault()
            let vault = try test.create()
            defer { vault.close() }
            let account = try vault.accounts.insert(Samples.account())
            try vault.tokens.store(Samples.fixedTokens("modes"), for: account.id, replacing: nil)

            for suffix in ["", "-wal", "-shm"] {
                let url = URL(fileURLWithPath: test.url.path + suffix)
                #expect(FileProbe.mode(url) == 0o600, "\(url.lastPathComponent)")
            }
        }

        @Test("a missing parent directory is created 0700")
        func parentDirectoryIsCreatedPrivate() throws {
            let previous = umask(0o022)
            defer { umask(previous) }
            let test = try TestVault()
            let url = test.directory.file("nested/vault.db")
            let vault = try Vault.create(at: url, credential: test.credential, options: test.options())
            vault.close()
            #expect(FileProbe.mode(url.deletingLastPathComponent()) == 0o700)
            #expect(FileProbe.mode(url) == 0o600)
        }
    }

    static let unsafeDirectoryModes = [0o770, 0o707, 0o777, 0o730].map(FileMode.init)

    @Test("a vault is not created in a directory other users can write", arguments: unsafeDirectoryModes)
    func createRefusesUnsafeDirectory(mode: FileMode) throws {
        let test = try TestVault()
        let directory = test.directory.file("shared")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        #expect(chmod(directory.path, mode.bits) == 0)
        let url = directory.appending(path: "vault.db")
        expectVaultError(.unsafeLocation) { try Vault.create(at: url, credential: test.credential, options: test.options()) }
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test("a vault is not opened from a directory other users can write, and is left unchanged", arguments: unsafeDirectoryModes)
    func openRefusesUnsafeDirectory(mode: FileMode) throws {
        let test = try TestVault()
        try test.create().close()
        let before = FileProbe.fingerprint(test.url)
        #expect(chmod(test.directory.url.path, mode.bits) == 0)
        defer { chmod(test.directory.url.path, 0o700) }
        expectVaultError(.unsafeLocation) { try test.open() }
        #expect(FileProbe.fingerprint(test.url) == before)
    }

    static let unsafeFileModes = [0o644, 0o640, 0o604, 0o660, 0o606].map(FileMode.init)

    @Test("a vault file others can access is not opened", arguments: unsafeFileModes)
    func openRefusesLooseFileMode(mode: FileMode) throws {
        let test = try TestVault()
        try test.create().close()
        #expect(chmod(test.url.path, mode.bits) == 0)
        let before = FileProbe.fingerprint(test.url)
        let error = expectVaultError(.unsafeLocation) { try test.open() }
        #expect(error?.message.contains("chmod 600") == true)
        #expect(FileProbe.fingerprint(test.url) == before)
        #expect(FileProbe.mode(test.url) == Int(mode.bits), "the vault does not change modes behind the user's back")
    }

    @Test("creating a vault where a file exists is refused and the file is left alone")
    func createDoesNotOverwrite() throws {
        let test = try TestVault()
        let vault = try test.create()
        try vault.accounts.insert(Samples.account())
        vault.close()
        let before = FileProbe.fingerprint(test.url)
        expectVaultError(.alreadyExists) { try test.create() }
        #expect(FileProbe.fingerprint(test.url) == before)
        let reopened = try test.open()
        defer { reopened.close() }
        #expect(try reopened.accounts().count == 1)
    }

    @Test("opening a path with no vault says so")
    func openMissingVault() throws {
        let test = try TestVault()
        expectVaultError(.notFound) { try test.open() }
        #expect(!FileManager.default.fileExists(atPath: test.url.path), "opening never creates a vault")
    }
}
