import Foundation
import GRDB
import Testing
import VaultStore
import VaultTestSupport

@Suite("vault verify, migrate, passwd, backup, prune-notifications and export")
struct MaintenanceTests {
    /// A key-file vault filled with known values by the library; commands that unlock get --key-file.
    struct Filled {
        let cli: VaultCLI
        let key: URL
        let unlock: [String]
        let account: AccountID

        init(notifications: Int = 3) async throws {
            cli = try VaultCLI()
            key = cli.file("vault.key")
            unlock = ["--key-file", key.path]
            try #require(try await cli.run(["init", "--key-file", key.path]).status == 0)
            account = try Populate.fill(cli.vault, keyFile: key, notifications: notifications)
        }

        func run(_ arguments: [String]) async throws -> CommandResult {
            try await cli.run(arguments + unlock)
        }
    }

    @Test("verify passes on a healthy vault and records the check")
    func verifyHealthy() async throws {
        let filled = try await Filled()
        let result = try await filled.run(["verify"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("SQLite quick_check: ok"))
        #expect(result.stdout.contains("1 data keys open, the rest not opened (--deep opens them), 0 damaged"))
        #expect(result.stderr.isEmpty, "no progress bar when standard error is not a terminal: \(result.stderr)")

        let json = try await filled.run(["verify", "--json"]).jsonObject()
        #expect(json["ok"] as? Bool == true)
        #expect(json["depth"] as? String == "rows")
        #expect(json["sealed_values_opened"] as? Int == 1, "the data key")

        let deep = try await filled.run(["verify", "--deep"])
        #expect(deep.status == 0, "\(deep)")
        #expect(deep.stdout.contains("SQLite integrity_check: ok"))
        let deepJSON = try await filled.run(["verify", "--deep", "--json"]).jsonObject()
        #expect(deepJSON["depth"] as? String == "deep")
        // 1 data key, label, email, client secret, 3 tokens, 1 device name, 3 × (subject, message, actions).
        #expect(deepJSON["sealed_values_opened"] as? Int == 1 + 3 + 3 + 1 + 9)
        let check = try #require(try await filled.cli.run(["status", "--json"]).jsonObject()["last_integrity_check"] as? [String: Any])
        #expect(check["ok"] as? Bool == true)
    }

    @Test("verify opens every value with the keys that sealed it after a key rotation")
    func verifyAfterRotation() async throws {
        let filled = try await Filled()
        let vault = try Vault.open(at: filled.cli.vault, credential: .keyFile(filled.key))
        try vault.maintenance.rotateKeys(credential: .keyFile(filled.key))
        vault.close()
        let json = try await filled.run(["verify", "--deep", "--json"])
        #expect(json.status == 0, "\(json)")
        #expect(try json.jsonObject()["sealed_values_opened"] as? Int == 1 + 3 + 3 + 1 + 9)
    }

    @Test("rotate-key re-seals every value under new keys; the vault still verifies and nothing secret is printed")
    func rotateKey() async throws {
        let filled = try await Filled()
        let result = try await filled.run(["rotate-key", "--batch-size", "2", "--json"])
        #expect(result.status == 0, "\(result)")
        let json = try result.jsonObject()
        #expect(json["resumed"] as? Bool == false)
        #expect(json["values_resealed"] as? Int == 3 + 3 + 1 + 9)
        #expect(result.stderr.isEmpty, "no progress bar when standard error is not a terminal")
        let verified = try await filled.run(["verify", "--json"])
        #expect(verified.status == 0, "\(verified)")
        let token = try await filled.run(["token"])
        #expect(token.status == 0, "tokens still open after the rotation: \(token)")
        #expect(!result.stdout.contains(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @Test("verify names the table, row and column of a sealed value with one flipped byte, and exits 65")
    func verifyTampered() async throws {
        let filled = try await Filled()
        let uuid = "00000000-0000-4000-8000-000000000001"
        try Self.flipLastByte(in: filled.cli.vault, table: "notifications", column: "message", keyColumn: "uuid", key: uuid)

        let result = try await filled.run(["verify"])
        #expect(result.status == Exit.damaged, "\(result)")
        #expect(result.stdout.contains("notifications row \(uuid) column message"), "the row's MAC covers the sealed bytes")
        #expect(result.stderr.contains("damaged"))
        let deep = try await filled.run(["verify", "--deep"])
        #expect(deep.status == Exit.damaged, "\(deep)")
        #expect(deep.stdout.contains("notifications row \(uuid) column message: does not open"))

        let json = try await filled.run(["verify", "--json"])
        #expect(json.status == Exit.damaged)
        let damaged = try #require(try json.jsonObject()["damaged"] as? [[String: Any]])
        #expect(damaged.count == 1)
        #expect(damaged.first?["table"] as? String == "notifications")
        #expect(damaged.first?["row"] as? String == uuid)
        #expect(damaged.first?["column"] as? String == "message")
        let check = try #require(try await filled.cli.run(["status", "--json"]).jsonObject()["last_integrity_check"] as? [String: Any])
        #expect(check["ok"] as? Bool == false)
    }

    @Test("migrate --dry-run on a current vault finds nothing to do")
    func migrateCurrent() async throws {
        let filled = try await Filled()
        let result = try await filled.cli.run(["migrate", "--dry-run"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("Nothing to migrate"))
        let json = try await filled.cli.run(["migrate", "--dry-run", "--json"]).jsonObject()
        #expect((json["migrations"] as? [Any])?.isEmpty == true)
        #expect(json["applied"] as? Bool == false)
    }

    @Test("an older fixture vault: other commands refuse it, migrate --dry-run shows steps 2 to the latest, migrate backs up and applies them")
    func migrateFixture() async throws {
        let cli = try VaultCLI(environment: ["VAULT_PASSPHRASE": FixtureV1.passphrase])
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: "Fixtures").appending(path: FixtureV1.fileName)
        try FileManager.default.copyItem(at: fixture, to: cli.vault)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: cli.vault.path)
        let original = FileProbe.fingerprint(cli.vault)

        let refused = try await cli.run(["accounts", "list"])
        #expect(refused.status == Exit.migrationNeeded, "\(refused)")
        #expect(refused.stderr.contains("vault migrate"))

        let plan = try await cli.run(["migrate", "--dry-run"], environment: ["VAULT_PASSPHRASE": ""])
        #expect(plan.status == 0, "\(plan)")
        #expect(plan.stdout.contains("0002_session_service"))
        let planJSON = try await cli.run(["migrate", "--dry-run", "--json"]).jsonObject()
        #expect((planJSON["migrations"] as? [[String: Any]])?.map { $0["version"] as? Int } == (2...17).map { Optional($0) })
        #expect(planJSON["from_version"] as? Int == 1)
        #expect(FileProbe.fingerprint(cli.vault) == original, "a dry run changes nothing")

        let wrong = try await cli.run(["migrate"], environment: ["VAULT_PASSPHRASE": "not the fixture passphrase"])
        #expect(wrong.status == Exit.wrongCredential, "\(wrong)")
        #expect(FileProbe.fingerprint(cli.vault) == original)

        let applied = try await cli.run(["migrate", "--json"])
        #expect(applied.status == 0, "\(applied)")
        let report = try applied.jsonObject()
        #expect(report["applied"] as? Bool == true)
        #expect(report["to_version"] as? Int == 17)
        let backup = try #require(report["backup"] as? String)
        #expect(FileProbe.mode(URL(fileURLWithPath: backup)) == 0o600)
        let backedUp = try await cli.run(["status", "--json", "--vault", backup]).jsonObject()
        #expect(backedUp["schema_version"] as? Int == 1, "the backup is the vault as it was")
        #expect(backedUp["accounts"] as? Int == 2)

        #expect(try await cli.run(["status", "--json"]).jsonObject()["schema_version"] as? Int == 17)
        let accounts = try await cli.run(["accounts", "list", "--json"])
        #expect(accounts.status == 0, "\(accounts)")
        #expect(try accounts.jsonArray().compactMap { $0["subject"] as? String }.sorted() == ["alice", "bob"])
    }

    @Test("passwd changes the passphrase: the old one is refused with exit 77, the new one opens")
    func passwd() async throws {
        let cli = try VaultCLI(environment: ["VAULT_PASSPHRASE": "old passphrase"])
        try #require(try await cli.run(["init"]).status == 0)
        let changed = try await cli.run(["passwd"], environment: ["VAULT_NEW_PASSPHRASE": "new passphrase"])
        #expect(changed.status == 0, "\(changed)")
        let old = try await cli.run(["accounts", "list"])
        #expect(old.status == Exit.wrongCredential, "\(old)")
        #expect(old.stderr.contains("wrong passphrase"))
        #expect(try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "new passphrase"]).status == 0)
    }

    @Test("backup writes a 0600 copy that opens with the same key and holds the same records, and never overwrites")
    func backup() async throws {
        let filled = try await Filled()
        try FileManager.default.createDirectory(
            at: filled.cli.file("copies"), withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
        let target = filled.cli.file("copies/vault-backup.db")
        let result = try await filled.cli.run(["backup", target.path])
        #expect(result.status == 0, "\(result)")
        #expect(FileProbe.mode(target) == 0o600)

        let original = try await filled.run(["accounts", "list", "--json"]).jsonArray()
        let copy = try await filled.cli.run(["accounts", "list", "--json", "--vault", target.path] + filled.unlock)
        #expect(copy.status == 0, "\(copy)")
        #expect(try copy.jsonArray().map { $0["id"] as? String } == original.map { $0["id"] as? String })
        let notifications = try await filled.cli.run(["notifications", "list", "--json", "--vault", target.path] + filled.unlock)
        #expect((try notifications.jsonObject()["notifications"] as? [Any])?.count == 3)

        let again = try await filled.cli.run(["backup", target.path])
        #expect(again.status == Exit.alreadyExists, "\(again)")
    }

    @Test("notifications list pages with a cursor, and prune-notifications deletes old history")
    func notificationsAndPrune() async throws {
        let filled = try await Filled(notifications: 5)
        let first = try await filled.run(["notifications", "list", "--json", "--limit", "2"]).jsonObject()
        #expect((first["notifications"] as? [Any])?.count == 2)
        let cursor = try #require(first["next_cursor"] as? String)
        let second = try await filled.run(["notifications", "list", "--json", "--limit", "10", "--after", cursor]).jsonObject()
        #expect((second["notifications"] as? [Any])?.count == 3)
        #expect(second["next_cursor"] is NSNull)
        let text = try await filled.run(["notifications", "list", "--limit", "2"])
        #expect(text.stdout.contains("Approve deploy?: Deploy 42 to prod"))
        #expect(text.stdout.contains("More: --after n1."))

        let refused = try await filled.run(["prune-notifications"])
        #expect(refused.status == Exit.usage)
        let pruned = try await filled.run(["prune-notifications", "--older-than", "36h"])
        #expect(pruned.status == 0, "\(pruned)")
        #expect(pruned.stdout.contains("Removed 3 notifications"))
        let kept = try await filled.run(["notifications", "list", "--json"]).jsonObject()
        #expect((kept["notifications"] as? [Any])?.count == 2)
        #expect(try await filled.run(["prune-notifications", "--keep", "1", "--account", "carol"]).stdout.contains("Removed 1 notification."))
    }

    @Test("export --redacted --json holds every record but no secret or personal value, and needs no passphrase")
    func export() async throws {
        let filled = try await Filled()
        let result = try await filled.cli.run(["export", "--redacted", "--json"])
        #expect(result.status == 0, "\(result)")
        for value in Populate.secrets + Populate.personal {
            #expect(!result.allOutput.contains(value), "export leaked \(value)")
        }
        let json = try result.jsonObject()
        #expect(Set(json.keys) == ["format", "format_version", "generated_at", "vault", "accounts", "sessions", "devices", "notifications"])
        let account = try #require((json["accounts"] as? [[String: Any]])?.first)
        #expect(account["id"] as? String == filled.account.rawValue)
        #expect(account["has_client_secret"] as? Bool == true)
        #expect(((account["tokens"] as? [String: Any])?["refresh_token"] as? [String: Any])?["present"] as? Bool == true)
        #expect((json["notifications"] as? [Any])?.count == 3)
        #expect((json["devices"] as? [[String: Any]])?.first?["name"] == nil)

        #expect(try await filled.cli.run(["export", "--json"]).status == Exit.usage, "an unredacted export does not exist")

        // The other read commands show personal values (that is their job) but never a secret.
        for arguments in [
            ["accounts", "list", "--json"], ["accounts", "show"], ["devices", "list", "--json"],
            ["notifications", "list", "--json"],
        ] {
            let output = try await filled.run(arguments)
            #expect(output.status == 0, "\(output)")
            for secret in Populate.secrets { #expect(!output.allOutput.contains(secret), "vault \(arguments) leaked a secret") }
        }
        let token = try await filled.run(["token"])
        #expect(token.stdout == "AT-cli-0123456789abcdef\n")
    }

    @Test("devices list and revoke")
    func devices() async throws {
        let filled = try await Filled()
        let listed = try await filled.run(["devices", "list", "--json"]).jsonArray()
        #expect(listed.first?["name"] as? String == "carol's build box")
        #expect(listed.first?["this_device"] as? Bool == true)
        let revoked = try await filled.run(["devices", "revoke", "--local", "registration-carol", "--reason", "laptop lost"])
        #expect(revoked.status == 0, "\(revoked)")
        let after = try await filled.run(["devices", "list", "--json"]).jsonArray()
        #expect(after.first?["status"] as? String == "revoked")
        #expect(after.first?["status_reason"] as? String == "laptop lost")
        #expect(try await filled.run(["devices", "revoke", "--local", "no-such-registration"]).status == Exit.noRecord)
    }

    /// Changes the last byte of one sealed value with raw SQL, as damage or an edit would.
    static func flipLastByte(in vault: URL, table: String, column: String, keyColumn: String, key: String) throws {
        let queue = try DatabaseQueue(path: vault.path)
        try queue.write { db in
            let blob = try #require(try Data.fetchOne(db, sql: "SELECT \(column) FROM \(table) WHERE \(keyColumn) = ?", arguments: [key]))
            var bytes = [UInt8](blob)
            bytes[bytes.count - 1] ^= 0x01
            try db.execute(sql: "UPDATE \(table) SET \(column) = ? WHERE \(keyColumn) = ?", arguments: [Data(bytes), key])
        }
        try queue.close()
    }
}
