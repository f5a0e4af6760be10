import Foundation
import GRDB
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Files that are not vaults, or are vaults cut short or overwritten, are named for what
/// they are and never changed.
@Suite struct NotAVaultTests {
    enum Damage: String, CaseIterable, CustomStringConvertible {
        case emptyFile
        case hundredRandomBytes
        case randomPages
        case textFile
        case plainSQLiteDatabase
        case sqliteHeaderOnly
        case cutInsideHeader
        case vaultCutToFirst100Bytes
        case vaultCutToHalf
        case vaultLastPageCut
        case vaultCutMidPage
        case vaultPagesOverwritten
        var description: String { rawValue }

        var expected: VaultError.Code {
            switch self {
            case .emptyFile, .hundredRandomBytes, .randomPages, .textFile, .plainSQLiteDatabase, .sqliteHeaderOnly: .notAVault
            default: .damaged
            }
        }
    }

    /// A vault with some data, closed, as bytes.
    static func vaultBytes(_ test: TestVault) throws -> [UInt8] {
        let vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.fixedTokens("damage"), for: account.id, replacing: nil)
        for index in 0..<40 {
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: "n-\(index)", account: account.id, subject: String(repeating: "s", count: 200),
                    message: String(repeating: "m", count: 400), actions: [], createdAt: Times.at(index)))
        }
        vault.close()
        #expect(FileProbe.isEmpty(URL(fileURLWithPath: test.url.path + "-wal")), "closing checkpoints the WAL into the file")
        return FileProbe.bytes(test.url)
    }

    func write(_ damage: Damage, to test: TestVault) throws {
        let url = test.url
        func replace(with bytes: [UInt8]) throws {
            try? FileManager.default.removeItem(at: url)
            #expect(FileManager.default.createFile(atPath: url.path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
        }
        let sqliteMagic = Array("SQLite format 3\0".utf8)
        switch damage {
        case .emptyFile:
            try replace(with: [])
        case .hundredRandomBytes:
            try replace(with: Random.bytes(100))
        case .randomPages:
            try replace(with: Random.bytes(4096 * 4))
        case .textFile:
            try replace(with: Array("[vault]\npath = /home/alice/.local/share/credentialvault/vault.db\n".utf8))
        case .plainSQLiteDatabase:
            let queue = try DatabaseQueue(path: url.path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('hello')")
            }
            try queue.close()
            #expect(chmod(url.path, 0o600) == 0)
        case .sqliteHeaderOnly:
            try replace(with: sqliteMagic + Array(repeating: 0, count: 84))
        case .cutInsideHeader:
            try replace(with: Array(try Self.vaultBytes(test).prefix(50)))
        case .vaultCutToFirst100Bytes:
            try replace(with: Array(try Self.vaultBytes(test).prefix(100)))
        case .vaultCutToHalf:
            let bytes = try Self.vaultBytes(test)
            try replace(with: Array(bytes.prefix(bytes.count / 2)))
        case .vaultLastPageCut:
            let bytes = try Self.vaultBytes(test)
            let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
            #expect(bytes.count > 2 * pageSize)
            try replace(with: Array(bytes.dropLast(pageSize)))
        case .vaultCutMidPage:
            let bytes = try Self.vaultBytes(test)
            try replace(with: Array(bytes.dropLast(1000)))
        case .vaultPagesOverwritten:
            let bytes = try Self.vaultBytes(test)
            let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
            // A fixed pattern, not random bytes: 0xA5 is no b-tree page type, so every read is refused the same way.
            try replace(with: Array(bytes.prefix(pageSize)) + [UInt8](repeating: 0xa5, count: bytes.count - pageSize))
        }
    }

    @Test("a file that is not a whole vault is refused for what it is, and left unchanged", arguments: Damage.allCases)
    func refused(damage: Damage) throws {
        let test = try TestVault()
        try write(damage, to: test)
        let before = FileProbe.fingerprint(test.url)
        let error = expectVaultError(damage.expected) { try test.open() }
        #expect(error?.message.contains(test.url.path) == true, "the message names the file")
        #expect(FileProbe.fingerprint(test.url) == before)
        // A second attempt gives the same verdict: the first left nothing behind that hides the damage.
        expectVaultError(damage.expected) { try test.open() }
        #expect(FileProbe.fingerprint(test.url) == before)
    }

    @Test("a damaged table page found after opening is reported as damage, not as a storage failure")
    func damagedPageAfterOpen() throws {
        let test = try TestVault()
        var bytes = try Self.vaultBytes(test)
        let root = try #require(try RawDatabase.int(test.url, "SELECT rootpage FROM sqlite_master WHERE name = 'notifications'"))
        let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
        let garbage = [UInt8](repeating: 0xa5, count: pageSize)
        bytes.replaceSubrange(((root - 1) * pageSize)..<(root * pageSize), with: garbage)
        try write(bytes, to: test.url)

        let vault = try test.open()
        defer { vault.close() }
        #expect(try vault.accounts.all().count == 1, "undamaged tables still read")
        let error = expectVaultError(.damaged) { try vault.notifications.page() }
        #expect(error?.message.contains("restore") == true, "\(error.map(String.init(describing:)) ?? "")")
    }

    func write(_ bytes: [UInt8], to url: URL) throws {
        try Data(bytes).write(to: url)
        #expect(chmod(url.path, 0o600) == 0)
    }

    @Test("a directory at the vault's path is not a vault")
    func directoryIsNotAVault() throws {
        let test = try TestVault()
        try FileManager.default.createDirectory(at: test.url, withIntermediateDirectories: false)
        expectVaultError(.notAVault) { try test.open() }
    }
}
