import Foundation
import GRDB
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Case 7 of issue 7: every byte of a sealed value flipped in turn (header, nonce, ciphertext,
/// tag) is rejected as damage with no plaintext anywhere, and `verify` (the library call and
/// the `vault verify` command) names the table, row and column. TamperingTests in
/// VaultStoreTests proves the read path for one column; this adds verify and the command.
@Suite struct TamperEveryByteTests {
    /// A vault with one account's tokens and one notification, closed.
    struct Scene {
        let test: TestVault
        let account: AccountID
        let tokens = Samples.steadyTokens("flip-8e2a")
        static let subject = "subject-8e2a-plaintext"
        static let message = "message-8e2a-plaintext"

        init() throws {
            test = try TestVault()
            let vault = try test.create()
            defer { vault.close() }
            account = try vault.accounts.insert(Samples.account()).id
            try vault.tokens.store(tokens, for: account, replacing: nil)
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: "n-flip", account: account, subject: Self.subject,
                    message: Self.message, actions: [], createdAt: Date()))
        }

        var plaintexts: [String] {
            [tokens.accessToken, tokens.refreshToken ?? "", tokens.idToken ?? "", Self.subject, Self.message]
        }
    }

    /// Where each region of a sealed value lies (SealedBlob's layout).
    static func region(_ position: Int, count: Int) -> String {
        switch position {
        case ..<SealedBlob.headerLength: "header"
        case ..<(SealedBlob.headerLength + SealedBlob.nonceLength): "nonce"
        case (count - SealedBlob.tagLength)...: "tag"
        default: "ciphertext"
        }
    }

    /// A sealed column and the row it is read by.
    struct Target: Sendable, CustomStringConvertible {
        var table: String
        var column: String
        var whereClause: String
        var description: String { "\(table).\(column)" }
    }

    static let targets = [
        Target(table: "tokens", column: "refresh_token", whereClause: "1 = 1"),
        Target(table: "notifications", column: "message", whereClause: "uuid = 'n-flip'"),
    ]

    @Test(
        "every byte of a sealed value flipped: the read refuses it as damage, verify names exactly that row and column",
        arguments: targets)
    func everyByteFlipped(target: Target) throws {
        let scene = try Scene()
        let url = scene.test.url
        let vault = try scene.test.open()
        defer { vault.close() }
        let select = "SELECT \(target.column) FROM \(target.table) WHERE \(target.whereClause)"
        let update = "UPDATE \(target.table) SET \(target.column) = ? WHERE \(target.whereClause)"
        let original = try #require(try RawDatabase.blob(url, select))
        let rowKey = target.table == "tokens" ? scene.account.rawValue : "n-flip"
        var regions: Set<String> = []
        var texts: [String] = []
        var (tried, passed) = (0, 0)

        for position in original.indices {
            tried += 1
            var altered = original
            altered[position] ^= 0x80
            try RawDatabase.execute(url, update, [Data(altered)])
            regions.insert(Self.region(position, count: original.count))

            let error = expectRefusal(.damaged) {
                target.table == "tokens"
                    ? try vault.tokens.current(for: scene.account) as Any
                    : try vault.notifications.find("n-flip", account: scene.account) as Any
            }
            #expect(error?.message.contains("\(target.table).\(target.column)") == true, "byte \(position)")
            texts.append(error.map(String.init(describing:)) ?? "")

            let report = try vault.maintenance.verify()
            #expect(
                report.damaged.map { "\($0.table) \($0.row) \($0.column)" } == ["\(target.table) \(rowKey) \(target.column)"],
                "byte \(position) (\(Self.region(position, count: original.count))): \(report.damaged)")
            #expect(report.databaseProblems.isEmpty)
            texts += report.damaged.map(\.description)
            if error?.message.contains("\(target.table).\(target.column)") == true,
                report.damaged.map({ "\($0.table) \($0.row) \($0.column)" }) == ["\(target.table) \(rowKey) \(target.column)"]
            {
                passed += 1
            }
        }
        StressResults.record(
            StressCount(
                case: "7 every byte of a sealed value flipped", tried: tried, passed: passed,
                lost: 0, leaked: tried - passed))
        #expect(regions == ["header", "nonce", "ciphertext", "tag"])

        try RawDatabase.execute(url, update, [Data(original)])
        #expect(try vault.maintenance.verify().passed, "the restored value opens again")
        LogHygiene.check(scene.test.logs, texts: texts, secrets: scene.plaintexts + LogHygiene.secrets(of: scene.test))
    }

    @Test("vault verify names the table, row and column of a value flipped in its header, nonce, ciphertext or tag, exits 65, prints no plaintext")
    func commandNamesTheRow() async throws {
        let scene = try Scene()
        let url = scene.test.url
        guard case .keyFile(let keyFile) = scene.test.credential else { return }
        let original = try #require(try RawDatabase.blob(url, "SELECT refresh_token FROM tokens"))
        let environment = ["VAULT_PATH": url.path, "VAULT_KEY_FILE": keyFile.path]
        var outputs: [String] = []

        for position in [0, 3, SealedBlob.headerLength + 7, SealedBlob.headerLength + SealedBlob.nonceLength + 2, original.count - 1] {
            var altered = original
            altered[position] ^= 0x01
            try RawDatabase.execute(url, "UPDATE tokens SET refresh_token = ?", [Data(altered)])
            let region = Self.region(position, count: original.count)

            let text = try await VaultRun.run(["verify", "--verbose"], environment: environment, in: scene.test.directory)
            #expect(text.status == 65, "\(region): \(text)")
            #expect(text.stdout.contains("damaged: tokens row \(scene.account.rawValue) column refresh_token"), "\(region): \(text)")

            let json = try await VaultRun.run(["verify", "--json"], environment: environment, in: scene.test.directory)
            #expect(json.status == 65)
            let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
            let damaged = object?["damaged"] as? [[String: Any]]
            #expect(damaged?.count == 1, "\(region): \(json)")
            #expect(damaged?.first?["table"] as? String == "tokens")
            #expect(damaged?.first?["row"] as? String == scene.account.rawValue)
            #expect(damaged?.first?["column"] as? String == "refresh_token")
            outputs += [text.output, json.output]
        }
        LogHygiene.check(scene.test.logs, texts: outputs, secrets: scene.plaintexts + LogHygiene.secrets(of: scene.test))
    }
}
