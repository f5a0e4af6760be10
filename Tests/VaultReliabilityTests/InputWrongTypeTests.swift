import Foundation
import GRDB
import Testing
import VaultStore
import VaultTestSupport

/// Case 9 of issue 7, the part NotAVaultTests and MigrationTests (VaultStoreTests) do not
/// cover: a vault whose columns were hand-edited to hold values of the wrong type. Reading
/// one used to stop the process (GRDB's fatalError on a failed conversion); now it is
/// reported as damage naming the table, row and column.
@Suite struct InputWrongTypeTests {
    /// One hand edit and the read that meets it.
    enum Edit: String, CaseIterable, CustomStringConvertible {
        case tokenGenerationText, tokenUpdatedAtText, accessTokenInteger, tokenTypeBlob
        case sessionStartedAtText, sessionExtensionsBlob
        case accountCreatedAtText, accountDataKeyIDText, accountLabelInteger
        case notificationCreatedAtText, notificationSubjectReal
        var description: String { rawValue }

        var sql: String {
            switch self {
            case .tokenGenerationText: "UPDATE tokens SET generation = 'x'"
            case .tokenUpdatedAtText: "UPDATE tokens SET updated_at = 'yesterday'"
            case .accessTokenInteger: "UPDATE tokens SET access_token = 12345"
            case .tokenTypeBlob: "UPDATE tokens SET token_type = X'FF00FE'"
            case .sessionStartedAtText: "UPDATE sessions SET started_at = 'x'"
            case .sessionExtensionsBlob: "UPDATE sessions SET extensions_used = X'0001'"
            case .accountCreatedAtText: "UPDATE accounts SET created_at = 'x'"
            case .accountDataKeyIDText: "UPDATE accounts SET data_key_id = 'x'"
            case .accountLabelInteger: "UPDATE accounts SET label = 7"
            case .notificationCreatedAtText: "UPDATE notifications SET created_at = 'x'"
            case .notificationSubjectReal: "UPDATE notifications SET subject = 1.5"
            }
        }

        /// Whether the edit leaves a sealed value that cannot be opened (which `verify` must report).
        var breaksSealedValue: Bool {
            switch self {
            case .tokenGenerationText, .accessTokenInteger, .accountDataKeyIDText, .accountLabelInteger, .notificationSubjectReal: true
            default: false
            }
        }

        /// The table.column the error must name.
        var place: String {
            switch self {
            case .tokenGenerationText: "tokens.generation"
            case .tokenUpdatedAtText: "tokens.updated_at"
            case .accessTokenInteger: "tokens.access_token"
            case .tokenTypeBlob: "tokens.token_type"
            case .sessionStartedAtText: "sessions.started_at"
            case .sessionExtensionsBlob: "sessions.extensions_used"
            case .accountCreatedAtText: "accounts.created_at"
            case .accountDataKeyIDText: "accounts.data_key_id"
            case .accountLabelInteger: "accounts.label"
            case .notificationCreatedAtText: "notifications.created_at"
            case .notificationSubjectReal: "notifications.subject"
            }
        }
    }

    @Test("a column hand-edited to the wrong type is reported as damage naming it, never a crash", arguments: Edit.allCases)
    func wrongTypeIsDamage(edit: Edit) throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.addAccount(Samples.account())
        let tokens = Samples.steadyTokens("type-3c9d")
        try vault.storeTokens(tokens, for: account.id, replacing: nil)
        try vault.startSession(for: account.id, idleDeadline: nil, absoluteDeadline: nil)
        try vault.upsertNotification(NotificationRecord(uuid: "n-1", account: account.id, subject: "subject-3c9d",
                                                         message: "message-3c9d", actions: [], createdAt: Date()))
        vault.close()
        try RawDatabase.execute(test.url, edit.sql)

        vault = try test.open()
        defer { vault.close() }
        let read: () throws -> Any
        switch edit {
        case .tokenGenerationText, .tokenUpdatedAtText, .accessTokenInteger, .tokenTypeBlob, .accountDataKeyIDText:
            read = { try vault.tokens(for: account.id) as Any }
        case .sessionStartedAtText, .sessionExtensionsBlob:
            read = { try vault.sessions(for: account.id) as Any }
        case .accountCreatedAtText, .accountLabelInteger:
            read = { try vault.accounts() as Any }
        case .notificationCreatedAtText, .notificationSubjectReal:
            read = { try vault.notifications() as Any }
        }
        let error = expectRefusal(.damaged) { try read() }
        #expect(error?.message.contains(edit.place) == true, "\(error.map(String.init(describing:)) ?? "no error")")
        #expect(error?.message.contains(test.url.path) == true, "the message names the file")

        // verify reads every table and must report, not stop.
        let report = try vault.verify()
        #expect(report.passed == !edit.breaksSealedValue, "\(report.damaged)")

        LogHygiene.check(test.logs, texts: [error.map(String.init(describing:)) ?? ""],
                         secrets: LogHygiene.secrets(of: test) + [tokens.accessToken, tokens.refreshToken ?? "", "subject-3c9d"])
    }

    @Test("token metadata of a row whose generation is not a number is damage, not a crash")
    func tokenMetadataWrongType() throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.addAccount(Samples.account())
        try vault.storeTokens(Samples.steadyTokens("meta"), for: account.id, replacing: nil)
        vault.close()
        try RawDatabase.execute(test.url, "UPDATE tokens SET generation = 'x'")
        vault = try test.open()
        defer { vault.close() }
        let error = expectRefusal(.damaged) { try vault.tokenMetadata(for: account.id) }
        #expect(error?.message.contains("tokens.generation") == true)
        let report = try vault.verify()
        #expect(report.damaged.map(\.column).sorted() == ["access_token", "id_token", "refresh_token"])
        #expect(report.damaged.allSatisfy { $0.row == account.id.rawValue && $0.table == "tokens" })
    }

    @Test("a vault header hand-edited to the wrong type is refused as damaged and left unchanged")
    func headerWrongType() throws {
        let test = try TestVault()
        try test.create().close()
        try RawDatabase.execute(test.url, "UPDATE vault_meta SET vault_key_id = 'x'")
        try RawDatabase.execute(test.url, "PRAGMA wal_checkpoint(TRUNCATE)")
        let before = FileProbe.fingerprint(test.url)
        let error = expectRefusal(.damaged) { try test.open() }
        #expect(error?.message.contains("vault_meta.vault_key_id") == true, "\(error.map(String.init(describing:)) ?? "")")
        #expect(FileProbe.fingerprint(test.url) == before)
        LogHygiene.check(test.logs, texts: [error.map(String.init(describing:)) ?? ""], secrets: LogHygiene.secrets(of: test))
    }
}
