import Foundation
import Testing
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// A vault reached through a symbolic link is judged, and opened, where it really is.
@Suite struct SymlinkTests {
    /// A private temporary directory with a vault in `real/` (mode `realMode`) and, in
    /// `private/` (0700), a link `vault.db` to it.
    struct LinkedVault {
        let test: TestVault
        let realDirectory: URL
        let realVault: URL
        let link: URL

        init(realMode: mode_t) throws {
            test = try TestVault()
            realDirectory = test.directory.file("real")
            let privateDirectory = test.directory.file("private")
            for directory in [realDirectory, privateDirectory] {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
                #expect(chmod(directory.path, 0o700) == 0)
            }
            realVault = realDirectory.appending(path: "vault.db")
            let vault = try Vault.create(at: realVault, credential: test.credential, options: test.options())
            try vault.accounts.insert(Samples.account())
            vault.close()
            link = privateDirectory.appending(path: "vault.db")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: realVault)
            #expect(chmod(realDirectory.path, realMode) == 0)
        }

        func open() throws -> Vault {
            try Vault.open(at: link, credential: test.credential, options: test.options())
        }

        /// The -wal and -shm files next to the link and next to the real file.
        func companions() -> (byLink: [String], byRealFile: [String]) {
            func present(_ base: URL) -> [String] {
                ["-wal", "-shm"].filter { FileManager.default.fileExists(atPath: base.path + $0) }
            }
            return (present(link), present(realVault))
        }
    }

    @Test(
        "a link in a private directory to a vault in a directory others can write is refused, and nothing is created there",
        arguments: [0o777, 0o770, 0o707].map(FileMode.init))
    func linkIntoSharedDirectoryIsRefused(mode: FileMode) throws {
        let linked = try LinkedVault(realMode: mode.bits)
        defer { chmod(linked.realDirectory.path, 0o700) }
        let before = FileProbe.fingerprint(linked.realVault)
        let companionsBefore = linked.companions()
        let error = expectVaultError(.unsafeLocation) { try linked.open() }
        #expect(
            error?.message.contains(linked.realDirectory.resolvingSymlinksInPath().path) == true,
            "the message names the real directory: \(error?.message ?? "")")
        expectVaultError(.unsafeLocation) { try Vault.inspect(at: linked.link, options: linked.test.options()) }
        expectVaultError(.unsafeLocation) { try Vault.migrate(at: linked.link, credential: linked.test.credential, options: linked.test.options()) }
        #expect(FileProbe.fingerprint(linked.realVault) == before)
        #expect(linked.companions().byRealFile == companionsBefore.byRealFile, "no -wal or -shm was created there")
        #expect(linked.companions().byLink.isEmpty)
    }

    @Test("a link to a vault in a private directory opens the real file, with -wal and -shm next to it")
    func linkToPrivateVaultOpensTheRealFile() throws {
        let linked = try LinkedVault(realMode: 0o700)
        let vault = try linked.open()
        #expect(vault.url.path == linked.realVault.resolvingSymlinksInPath().path)
        #expect(try vault.accounts.all().count == 1)
        try vault.accounts.insert(Samples.account("bob"))
        #expect(linked.companions().byRealFile == ["-wal", "-shm"])
        #expect(linked.companions().byLink.isEmpty, "nothing is created next to the link")
        vault.close()
        let facts = try Vault.inspect(at: linked.link, options: linked.test.options())
        #expect(facts.url.path == linked.realVault.resolvingSymlinksInPath().path)
        #expect(facts.counts.accounts == 2)
    }

    @Test("a vault is not created through a linked directory that others can write")
    func createThroughLinkedSharedDirectoryIsRefused() throws {
        let test = try TestVault()
        let shared = test.directory.file("shared")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: false)
        #expect(chmod(shared.path, 0o777) == 0)
        defer { chmod(shared.path, 0o700) }
        let linkedDirectory = test.directory.file("looks-private")
        try FileManager.default.createSymbolicLink(at: linkedDirectory, withDestinationURL: shared)
        expectVaultError(.unsafeLocation) {
            try Vault.create(at: linkedDirectory.appending(path: "vault.db"), credential: test.credential, options: test.options())
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: shared.path).isEmpty)
    }

    @Test("a dangling link is no vault, and create does not follow it")
    func danglingLink() throws {
        let test = try TestVault()
        let target = test.directory.file("elsewhere.db")
        try FileManager.default.createSymbolicLink(at: test.url, withDestinationURL: target)
        expectVaultError(.notFound) { try test.open() }
        expectVaultError(.alreadyExists) { try test.create() }
        #expect(!FileManager.default.fileExists(atPath: target.path), "nothing was created at the link's target")
    }

    @Test("a vault file that belongs to another user is refused", .enabled(if: geteuid() == 0, "needs root to give the file away"))
    func fileOfAnotherUser() throws {
        let test = try TestVault()
        try test.create().close()
        #expect(chown(test.url.path, 65534, 65534) == 0)
        let error = expectVaultError(.unsafeLocation) { try test.open() }
        #expect(error?.message.contains("another user") == true)
    }
}
