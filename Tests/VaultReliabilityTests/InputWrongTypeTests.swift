import Foundation
import GRDB
import Testing
@_spi(RawWrites) import VaultStore
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
        case policyWarningText, policyIdleActionBlob
        case refreshFailuresText, refreshFailuresReal, refreshFailuresNull, refreshLeaseHolderBlob, refreshNextAttemptText
        case deviceCreatedAtText, devicePlatformBlob, deviceLastActivityText, deviceNameInteger, deviceStatusBlob
        case metaActiveAccountBlob, metaCreatedAtText, metaIntegrityOKText
        case signInGenerationText, metaNextKeyIDText, activeAccountIDBlob
        var description: String { rawValue }

        var sql: String {
            switch self {
            case .tokenGenerationText, .signInGenerationText: "UPDATE tokens SET generation = 'x'"
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
            case .policyWarningText: "UPDATE session_policies SET warning_ms = 'x'"
            // An editor that ignores CHECK constraints (not a valid UTF-8 text either).
            case .policyIdleActionBlob: "PRAGMA ignore_check_constraints = ON; UPDATE session_policies SET idle_action = X'FF00'"
            case .refreshFailuresText: "UPDATE refresh_state SET failures = 'x'"
            // A real no integer can hold.
            case .refreshFailuresReal: "UPDATE refresh_state SET failures = 1e300"
            case .refreshFailuresNull: "UPDATE refresh_state SET failures = NULL"
            case .refreshLeaseHolderBlob: "UPDATE refresh_state SET lease_holder = X'FF'"
            case .refreshNextAttemptText: "UPDATE refresh_state SET next_attempt_at = 'soon'"
            case .deviceCreatedAtText: "UPDATE devices SET created_at = 'x'"
            case .devicePlatformBlob: "UPDATE devices SET platform = X'FF'"
            case .deviceLastActivityText: "UPDATE devices SET last_activity_at = 'x'"
            case .deviceNameInteger: "UPDATE devices SET name = 42"
            case .deviceStatusBlob: "PRAGMA ignore_check_constraints = ON; UPDATE devices SET status = X'FF'"
            case .metaActiveAccountBlob, .activeAccountIDBlob: "PRAGMA foreign_keys = OFF; UPDATE vault_meta SET active_account_id = X'FF'"
            case .metaNextKeyIDText: "UPDATE vault_meta SET next_key_id = 'x'"
            case .metaCreatedAtText: "UPDATE vault_meta SET created_at = 'x'"
            case .metaIntegrityOKText: "UPDATE vault_meta SET last_integrity_check_at = 1, last_integrity_check_ok = 'x'"
            }
        }

        /// Run first, on its own connection: a schema edit the value edit needs (a NOT NULL dropped,
        /// as a file rebuilt by another tool may have it).
        var schemaEdit: String? {
            switch self {
            case .refreshFailuresNull:
                """
                PRAGMA writable_schema = ON;
                UPDATE sqlite_schema SET sql = replace(sql, 'failures                INTEGER NOT NULL', 'failures                INTEGER')
                WHERE name = 'refresh_state';
                PRAGMA writable_schema = OFF;
                """
            default: nil
            }
        }

        /// Whether the edit is in the header row, which opening the vault checks against its MAC.
        var inHeader: Bool { place.hasPrefix("vault_meta.") }

        /// Whether ``Vault/metadata(at:options:includeNotifications:)`` reads the column as a plain
        /// value (and so must report it); it only notes whether a sealed column holds something.
        var readByMetadata: Bool {
            switch self {
            case .accessTokenInteger, .accountDataKeyIDText, .accountLabelInteger, .notificationSubjectReal, .deviceNameInteger,
                .metaNextKeyIDText:
                false
            default: true
            }
        }

        /// The table.column the error must name.
        var place: String {
            switch self {
            case .tokenGenerationText, .signInGenerationText: "tokens.generation"
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
            case .policyWarningText: "session_policies.warning_ms"
            case .policyIdleActionBlob: "session_policies.idle_action"
            case .refreshFailuresText, .refreshFailuresReal, .refreshFailuresNull: "refresh_state.failures"
            case .refreshLeaseHolderBlob: "refresh_state.lease_holder"
            case .refreshNextAttemptText: "refresh_state.next_attempt_at"
            case .deviceCreatedAtText: "devices.created_at"
            case .devicePlatformBlob: "devices.platform"
            case .deviceLastActivityText: "devices.last_activity_at"
            case .deviceNameInteger: "devices.name"
            case .deviceStatusBlob: "devices.status"
            case .metaActiveAccountBlob, .activeAccountIDBlob: "vault_meta.active_account_id"
            case .metaNextKeyIDText: "vault_meta.next_key_id"
            case .metaCreatedAtText: "vault_meta.created_at"
            case .metaIntegrityOKText: "vault_meta.last_integrity_check_ok"
            }
        }
    }

    @Test("a column hand-edited to the wrong type is reported as damage naming it, never a crash", arguments: Edit.allCases)
    func wrongTypeIsDamage(edit: Edit) throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        let tokens = Samples.steadyTokens("type-3c9d")
        try vault.tokens.store(tokens, for: account.id, replacing: nil)
        try vault.sessions.start(for: account.id, idleDeadline: nil, absoluteDeadline: nil)
        try vault.notifications.upsert(
            NotificationRecord(
                uuid: "n-1", account: account.id, subject: "subject-3c9d",
                message: "message-3c9d", actions: [], createdAt: Date()))
        try vault.sessions.setPolicy(SessionPolicy(), for: account.id)
        guard case .acquired = try vault.leases.begin(for: account.id, holder: "h-1", seenGeneration: 1, leaseDuration: .seconds(60)) else {
            Issue.record("the refresh lease was not taken")
            return
        }
        try vault.leases.fail(for: account.id, holder: "h-1", failure: "timeout", nextAttemptAt: nil)
        let device = DeviceRegistration(
            account: account.id, deviceID: "device-1", name: "name-3c9d", platform: "linux",
            status: .active, createdAt: Date(), updatedAt: Date(), lastActivityAt: Date())
        try vault.devices.save(device)
        vault.close()
        if let schemaEdit = edit.schemaEdit { try RawDatabase.execute(test.url, schemaEdit) }
        try RawDatabase.execute(test.url, edit.sql)

        if edit.inHeader {
            // The header names the active account and this install's device id: it is checked
            // when the vault opens, and an edited one refuses to open, naming the column.
            let error = expectRefusal(.damaged) { try test.open() }
            #expect(error?.message.contains(edit.place) == true, "\(error.map(String.init(describing:)) ?? "no error")")
            StressResults.record(
                StressCount(
                    case: "9 files hand-edited to wrong types", tried: 1,
                    passed: error?.message.contains(edit.place) == true ? 1 : 0,
                    lost: 0, leaked: error == nil ? 1 : 0))
            #expect(error?.message.contains(test.url.path) == true, "the message names the file")
            if edit.readByMetadata {
                expectRefusal(.damaged) { try Vault.metadata(at: test.url, options: test.options()) }
            }
            LogHygiene.check(
                test.logs, texts: [error.map(String.init(describing:)) ?? ""],
                secrets: LogHygiene.secrets(of: test) + [tokens.accessToken, tokens.refreshToken ?? "", "subject-3c9d", "name-3c9d"])
            return
        }
        vault = try test.open()
        defer { vault.close() }
        let read: () throws -> Any
        switch edit {
        case .tokenGenerationText, .tokenUpdatedAtText, .accessTokenInteger, .tokenTypeBlob, .accountDataKeyIDText:
            read = { try vault.tokens.current(for: account.id) as Any }
        case .sessionStartedAtText, .sessionExtensionsBlob:
            read = { try vault.sessions.all(for: account.id) as Any }
        case .accountCreatedAtText, .accountLabelInteger:
            read = { try vault.accounts.all() as Any }
        case .notificationCreatedAtText, .notificationSubjectReal:
            read = { try vault.notifications.page() as Any }
        case .policyWarningText, .policyIdleActionBlob:
            read = { try vault.sessions.policy(for: account.id) as Any }
        case .refreshFailuresText, .refreshFailuresReal, .refreshFailuresNull, .refreshLeaseHolderBlob:
            read = { try vault.leases.state(for: account.id) as Any }
        case .refreshNextAttemptText:
            read = { try vault.leases.begin(for: account.id, holder: "h-2", seenGeneration: 1, leaseDuration: .seconds(60)) as Any }
        case .deviceCreatedAtText, .deviceNameInteger:
            read = { try vault.devices.all(for: account.id) as Any }
        case .devicePlatformBlob, .deviceLastActivityText:
            read = { try vault.devices.find(device.id) as Any }
        case .metaActiveAccountBlob, .signInGenerationText:
            read = { try vault.accounts.signIn(Samples.account(), tokens: tokens, policy: SessionPolicy()) as Any }
        case .metaNextKeyIDText:
            read = { try vault.accounts.insert(Samples.account("bob")) as Any }
        case .activeAccountIDBlob:
            read = { try vault.accounts.activeID() as Any }
        case .metaCreatedAtText, .metaIntegrityOKText, .deviceStatusBlob:
            // The plain facts: the header, and the number of devices in each status.
            read = { try Vault.inspect(at: test.url, options: test.options()) as Any }
        }
        let error = expectRefusal(.damaged) { try read() }
        #expect(error?.message.contains(edit.place) == true, "\(error.map(String.init(describing:)) ?? "no error")")
        #expect(error?.message.contains(test.url.path) == true, "the message names the file")

        // The plain metadata (for a support ticket) reports a plain column, and only notes a sealed one.
        let metadata = Result { try Vault.metadata(at: test.url, options: test.options()) }
        if edit.readByMetadata {
            let metadataError = expectRefusal(.damaged) { try metadata.get() }
            #expect(metadataError?.message.contains(edit.place) == true, "\(metadataError.map(String.init(describing:)) ?? "no error")")
        } else {
            let read = try metadata.get()
            #expect(read.accounts.map(\.id) == [account.id])
            #expect(read.devices.map(\.id) == [device.id])
        }

        // verify reads every table and must report, not stop: every edit changed an
        // authenticated row, and the row's MAC names the column.
        let report = try vault.maintenance.verify()
        #expect(!report.passed)
        let named = report.damaged.contains { "\($0.table).\($0.column)" == edit.place }
        #expect(named, "\(report.damaged) \(report.databaseProblems)")
        StressResults.record(
            StressCount(
                case: "9 files hand-edited to wrong types", tried: 1,
                passed: error?.message.contains(edit.place) == true && named ? 1 : 0,
                lost: 0, leaked: named ? 0 : 1))

        LogHygiene.check(
            test.logs, texts: [error.map(String.init(describing:)) ?? ""],
            secrets: LogHygiene.secrets(of: test) + [tokens.accessToken, tokens.refreshToken ?? "", "subject-3c9d", "name-3c9d"])
    }

    @Test("a value outside its column's CHECK (an editor that ignored constraints) fails verify naming the table; reads fail closed")
    func outsideCheckFailsVerify() throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        try vault.sessions.start(for: account.id, idleDeadline: nil, absoluteDeadline: nil)
        vault.close()
        try RawDatabase.execute(test.url, "PRAGMA ignore_check_constraints = ON; UPDATE sessions SET state = 'bogus'")
        vault = try test.open()
        defer { vault.close() }

        let report = try vault.maintenance.verify()
        #expect(!report.passed)
        #expect(report.databaseProblems.contains { $0.contains("CHECK constraint failed in sessions") }, "\(report.databaseProblems)")
        #expect(report.damaged.map { "\($0.table).\($0.column)" } == ["sessions.state"])
        // A read refuses the edited session: it is never taken for an active one.
        let error = expectRefusal(.damaged) { try vault.sessions.all(for: account.id) }
        #expect(error?.message.contains("sessions.state") == true)
    }

    @Test("a refused sign-in or refresh on a hand-edited vault changes nothing")
    func refusedWritesChangeNothing() throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        let tokens = Samples.steadyTokens("write-7e21")
        try vault.tokens.store(tokens, for: account.id, replacing: nil)
        try vault.sessions.start(for: account.id, idleDeadline: nil, absoluteDeadline: nil)
        try vault.sessions.setPolicy(SessionPolicy(), for: account.id)
        vault.close()
        try RawDatabase.execute(test.url, "UPDATE tokens SET generation = 'x'")
        try RawDatabase.execute(test.url, "UPDATE refresh_state SET failures = 0")
        vault = try test.open()
        defer { vault.close() }
        let sessionsBefore = try vault.sessions.all(for: account.id)
        let policy = SessionPolicy(idleTimeout: .seconds(60), warningBefore: .seconds(10))

        let signIn = expectRefusal(.damaged) { try vault.accounts.signIn(Samples.account(), tokens: tokens, policy: policy) }
        #expect(signIn?.message.contains("tokens.generation") == true)
        let refresh = expectRefusal(.damaged) {
            try vault.leases.begin(for: account.id, holder: "h-1", seenGeneration: 1, leaseDuration: .seconds(60))
        }
        #expect(refresh?.message.contains("tokens.generation") == true)

        // Neither wrote a session, a policy or a lease.
        #expect(try vault.sessions.all(for: account.id) == sessionsBefore)
        #expect(try vault.sessions.policy(for: account.id) == SessionPolicy())
        #expect(try vault.leases.state(for: account.id) == .none)
        #expect(try RawDatabase.int(test.url, "SELECT count(*) FROM refresh_state") == 0)
        LogHygiene.check(
            test.logs, texts: [signIn, refresh].compactMap { $0.map(String.init(describing:)) },
            secrets: LogHygiene.secrets(of: test) + [tokens.accessToken, tokens.refreshToken ?? ""])
    }

    /// A sealed column (or the version bound into it) hand-edited to the wrong type, met by a key rotation.
    enum RotationEdit: String, CaseIterable, CustomStringConvertible {
        case tokenGenerationText, accessTokenInteger, accountLabelInteger, deviceNameInteger, notificationSubjectReal
        var description: String { rawValue }

        var sql: String {
            switch self {
            case .tokenGenerationText: "UPDATE tokens SET generation = 'x'"
            case .accessTokenInteger: "UPDATE tokens SET access_token = 12345"
            case .accountLabelInteger: "UPDATE accounts SET label = 7"
            case .deviceNameInteger: "UPDATE devices SET name = 42"
            case .notificationSubjectReal: "UPDATE notifications SET subject = 1.5"
            }
        }

        var place: String {
            switch self {
            case .tokenGenerationText: "tokens.generation"
            case .accessTokenInteger: "tokens.access_token"
            case .accountLabelInteger: "accounts.label"
            case .deviceNameInteger: "devices.name"
            case .notificationSubjectReal: "notifications.subject"
            }
        }
    }

    @Test(
        "a key rotation that meets a value of the wrong type stops with damage naming it, never a crash",
        arguments: RotationEdit.allCases)
    func rotationMeetsWrongType(edit: RotationEdit) throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        let tokens = Samples.steadyTokens("rotate-51af")
        try vault.tokens.store(tokens, for: account.id, replacing: nil)
        try vault.devices.save(
            DeviceRegistration(
                account: account.id, deviceID: "device-1", name: "name-51af", platform: "linux",
                status: .active, createdAt: Date(), updatedAt: Date()))
        try vault.notifications.upsert(
            NotificationRecord(
                uuid: "n-1", account: account.id, subject: "subject-51af",
                message: "message-51af", actions: [], createdAt: Date()))
        vault.close()
        try RawDatabase.execute(test.url, edit.sql)

        vault = try test.open()
        defer { vault.close() }
        let error = expectRefusal(.damaged) { try vault.maintenance.rotateKeys(credential: test.credential) }
        #expect(error?.message.contains(edit.place) == true, "\(error.map(String.init(describing:)) ?? "no error")")
        #expect(error?.message.contains(test.url.path) == true, "the message names the file")
        // An edited account row stops the rotation before it starts (preparing the account's next
        // key rewrites the row); any other stops it midway, pending and resumable once the file
        // is restored. The vault still answers.
        #expect(try vault.maintenance.keyRotationPending() == (edit != .accountLabelInteger))
        #expect(try vault.accounts.ids() == [account.id])
        LogHygiene.check(
            test.logs, texts: [error.map(String.init(describing:)) ?? ""],
            secrets: LogHygiene.secrets(of: test) + [tokens.accessToken, tokens.refreshToken ?? "", "subject-51af", "name-51af"])
    }

    @Test("token metadata of a row whose generation is not a number is damage, not a crash")
    func tokenMetadataWrongType() throws {
        let test = try TestVault()
        var vault = try test.create()
        let account = try vault.accounts.insert(Samples.account())
        try vault.tokens.store(Samples.steadyTokens("meta"), for: account.id, replacing: nil)
        vault.close()
        try RawDatabase.execute(test.url, "UPDATE tokens SET generation = 'x'")
        vault = try test.open()
        defer { vault.close() }
        let error = expectRefusal(.damaged) { try vault.tokens.metadata(for: account.id) }
        #expect(error?.message.contains("tokens.generation") == true)
        let report = try vault.maintenance.verify()
        #expect(report.damaged.map(\.column) == ["generation"], "the row's MAC names the edited column")
        #expect(report.damaged.allSatisfy { $0.row == account.id.rawValue && $0.table == "tokens" })
        // --deep also tries to open the tokens, which the generation names: none can be.
        let deep = try vault.maintenance.verify(depth: .deep)
        #expect(deep.damaged.map(\.column).sorted() == ["access_token", "generation", "id_token", "refresh_token"])
        #expect(deep.damaged.allSatisfy { $0.row == account.id.rawValue && $0.table == "tokens" })
    }

    /// A column of the vault header that opening or unlocking reads, hand-edited to the wrong type.
    enum HeaderEdit: String, CaseIterable, CustomStringConvertible {
        case vaultKeyIDText, deviceIDBlob, keyCheckInteger, wrappedVaultKeyReal, pendingVaultKeyIDText, kdfSaltInteger
        var description: String { rawValue }

        var sql: String {
            switch self {
            case .vaultKeyIDText: "UPDATE vault_meta SET vault_key_id = 'x'"
            case .deviceIDBlob: "UPDATE vault_meta SET device_id = X'FF'"
            case .keyCheckInteger: "UPDATE vault_meta SET key_check = 7"
            case .wrappedVaultKeyReal: "UPDATE vault_meta SET wrapped_vault_key = 2.5"
            case .pendingVaultKeyIDText: "UPDATE vault_meta SET pending_vault_key_id = 'x'"
            case .kdfSaltInteger: "UPDATE vault_meta SET kdf_salt = 5"
            }
        }

        var place: String {
            switch self {
            case .vaultKeyIDText: "vault_meta.vault_key_id"
            case .deviceIDBlob: "vault_meta.device_id"
            case .keyCheckInteger: "vault_meta.key_check"
            case .wrappedVaultKeyReal: "vault_meta.wrapped_vault_key"
            case .pendingVaultKeyIDText: "vault_meta.pending_vault_key_id"
            case .kdfSaltInteger: "vault_meta.kdf_salt"
            }
        }
    }

    @Test("a vault header hand-edited to the wrong type is refused as damaged and left unchanged", arguments: HeaderEdit.allCases)
    func headerWrongType(edit: HeaderEdit) throws {
        let test = try TestVault()
        try test.create().close()
        try RawDatabase.execute(test.url, edit.sql)
        try RawDatabase.execute(test.url, "PRAGMA wal_checkpoint(TRUNCATE)")
        let before = FileProbe.fingerprint(test.url)
        let error = expectRefusal(.damaged) { try test.open() }
        #expect(error?.message.contains(edit.place) == true, "\(error.map(String.init(describing:)) ?? "")")
        #expect(error?.message.contains(test.url.path) == true, "the message names the file")
        #expect(FileProbe.fingerprint(test.url) == before)
        LogHygiene.check(test.logs, texts: [error.map(String.init(describing:)) ?? ""], secrets: LogHygiene.secrets(of: test))
    }

    @Test("unlocking a vault whose header was hand-edited meanwhile is refused as damaged", arguments: HeaderEdit.allCases)
    func unlockMeetsHeaderWrongType(edit: HeaderEdit) throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        vault.lock()
        try RawDatabase.execute(test.url, edit.sql)
        let error = expectRefusal(.damaged) { try vault.unlock(with: test.credential) }
        #expect(error?.message.contains(edit.place) == true, "\(error.map(String.init(describing:)) ?? "")")
        #expect(error?.message.contains(test.url.path) == true, "the message names the file")
        #expect(vault.isLocked, "a refused unlock loads no key")
        if edit == .pendingVaultKeyIDText {
            let pending = expectRefusal(.damaged) { try vault.maintenance.keyRotationPending() }
            #expect(pending?.message.contains(edit.place) == true)
        }
        LogHygiene.check(test.logs, texts: [error.map(String.init(describing:)) ?? ""], secrets: LogHygiene.secrets(of: test))
    }

    @Test(
        "a migration record hand-edited to the wrong type is refused as damaged at open and inspect, file unchanged",
        arguments: [
            ("UPDATE vault_migrations SET applied_at = 'x'", "vault_migrations.applied_at"),
            ("UPDATE vault_migrations SET checksum = X'FF00'", "vault_migrations.checksum"),
            ("UPDATE vault_migrations SET name = X'FF'", "vault_migrations.name"),
        ])
    func migrationRecordWrongType(sql: String, place: String) throws {
        let test = try TestVault()
        try test.create().close()
        try RawDatabase.execute(test.url, sql)
        try RawDatabase.execute(test.url, "PRAGMA wal_checkpoint(TRUNCATE)")
        let before = FileProbe.fingerprint(test.url)
        for attempt: () throws -> Any in [{ try test.open() }, { try Vault.inspect(at: test.url, options: test.options()) }] {
            let error = expectRefusal(.damaged) { _ = try attempt() }
            #expect(error?.message.contains(place) == true, "\(error.map(String.init(describing:)) ?? "")")
            #expect(error?.message.contains(test.url.path) == true, "the message names the file")
        }
        #expect(FileProbe.fingerprint(test.url) == before)
    }
}
