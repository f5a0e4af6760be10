import Foundation
import Testing
import VaultStore
import VaultTestSupport

@Suite("vault init and status")
struct InitAndStatusTests {
    @Test("init with a passphrase creates a 0600 vault and refuses to overwrite it")
    func initWithPassphrase() async throws {
        let cli = try VaultCLI(environment: ["VAULT_PASSPHRASE": "first passphrase"])
        let created = try await cli.run(["init"])
        #expect(created.status == 0, "\(created)")
        #expect(FileProbe.mode(cli.vault) == 0o600)

        let before = FileProbe.fingerprint(cli.vault)
        let again = try await cli.run(["init"])
        #expect(again.status == Exit.alreadyExists, "\(again)")
        #expect(again.stderr.contains("already exists"))
        #expect(FileProbe.fingerprint(cli.vault) == before)

        let status = try await cli.run(["status", "--json"]).jsonObject()
        let credential = try #require(status["credential"] as? [String: Any])
        #expect(credential["kind"] as? String == "passphrase")
        #expect((credential["kdf"] as? [String: Any])?["level"] as? String == "interactive")
    }

    @Test("init --key-file writes a new key file and the vault opens only with it")
    func initWithKeyFile() async throws {
        let cli = try VaultCLI()
        let key = cli.file("vault.key")
        let created = try await cli.run(["init", "--key-file", key.path])
        #expect(created.status == 0, "\(created)")
        #expect(FileProbe.mode(key) == 0o600)
        #expect(FileProbe.bytes(key).count == 32)
        #expect(created.stdout.contains("keep a copy"))

        let status = try await cli.run(["status", "--json"]).jsonObject()
        #expect((status["credential"] as? [String: Any])?["kind"] as? String == "key_file")
        #expect(try await cli.run(["accounts", "list", "--key-file", key.path]).status == 0)

        let withoutKey = try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "a guess"])
        #expect(withoutKey.status == Exit.usage, "\(withoutKey)")
        #expect(withoutKey.stderr.contains("--key-file"))
    }

    @Test("--kdf moderate is recorded, and a passphrase file's trailing newline is not part of the passphrase")
    func initWithModerateCost() async throws {
        let cli = try VaultCLI()
        let passphraseFile = cli.file("passphrase.txt")
        try Data("correct horse\n".utf8).write(to: passphraseFile)
        let created = try await cli.run(["init", "--kdf", "moderate", "--passphrase-file", passphraseFile.path])
        #expect(created.status == 0, "\(created)")

        let kdf = try #require(((try await cli.run(["status", "--json"]).jsonObject())["credential"] as? [String: Any])?["kdf"] as? [String: Any])
        #expect(kdf["level"] as? String == "moderate")
        #expect(kdf["ops_limit"] as? Int == 3)
        #expect(kdf["mem_limit_bytes"] as? Int == 256 * 1024 * 1024)

        let opened = try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "correct horse"])
        #expect(opened.status == 0, "\(opened)")
    }

    @Test("a passphrase file that is a pipe is read to its end, past the first 4 KiB")
    func passphraseFromAPipe() async throws {
        let cli = try VaultCLI()
        // Longer than the first read, so the buffer grows; made up, as every test value.
        let passphrase = String(repeating: "made up pipe passphrase ", count: 300)
        let passphraseFile = cli.file("passphrase.txt")
        try Data((passphrase + "\n").utf8).write(to: passphraseFile)
        #expect(try await cli.run(["init", "--passphrase-file", passphraseFile.path]).status == 0)

        let child = try ChildProgram(
            try BuiltProgram.url(named: "vault"), ["accounts", "list", "--passphrase-file", "/dev/stdin"],
            environment: ["PATH": "/usr/bin:/bin", "HOME": cli.directory.url.path, "VAULT_PATH": cli.vault.path])
        child.write(passphrase + "\n")
        child.closeInput()
        let lines = try await child.finish()
        #expect(lines.first?.hasPrefix("No accounts") == true, "\(lines)")
    }

    @Test("init refuses --kdf with a key file")
    func kdfNeedsAPassphrase() async throws {
        let cli = try VaultCLI()
        let result = try await cli.run(["init", "--key-file", cli.file("k").path, "--kdf", "sensitive"])
        #expect(result.status == Exit.usage)
        #expect(!FileManager.default.fileExists(atPath: cli.vault.path))
    }

    @Test("status needs no passphrase and shows counts, in text and in every documented JSON key")
    func statusWithoutPassphrase() async throws {
        let cli = try VaultCLI()
        let key = cli.file("vault.key")
        try #require(try await cli.run(["init", "--key-file", key.path]).status == 0)
        let account = try Populate.fill(cli.vault, keyFile: key, notifications: 2)

        let text = try await cli.run(["status"])
        #expect(text.status == 0, "\(text)")
        for label in [
            "Vault", "Size", "Schema", "Unlocked by", "Accounts", "Active account", "Account states", "Sessions", "Devices",
            "Notifications", "Integrity check",
        ] {
            #expect(text.stdout.contains(label), "missing \(label) in \(text.stdout)")
        }
        #expect(text.stdout.contains(account.rawValue))
        #expect(text.stdout.contains("2 (2 pending)"))

        let json = try await cli.run(["status", "--json"]).jsonObject()
        #expect(
            Set(json.keys) == [
                "path", "file_size_bytes", "wal_size_bytes", "schema_version", "latest_schema_version", "pending_migrations",
                "credential", "vault_id", "device_id", "created_at", "accounts", "active_account_id", "sessions", "devices",
                "notifications", "last_integrity_check", "key_slots", "expiring_refresh_tokens", "account_states", "active_account_state",
            ])
        // Populate's account is signed in on an active device registration.
        #expect(json["active_account_state"] as? String == "active_signed_in", "\(json)")
        #expect((json["account_states"] as? [String: Any])?["active_signed_in"] as? Int == 1)
        #expect((json["account_states"] as? [String: Any])?["locked"] as? Int == 0)
        #expect(text.stdout.contains("\(account.rawValue) (active_signed_in)"), "\(text.stdout)")
        #expect(json["path"] as? String == cli.vault.path)
        #expect(json["accounts"] as? Int == 1)
        #expect(json["active_account_id"] as? String == account.rawValue)
        #expect((json["sessions"] as? [String: Any])?["active"] as? Int == 1)
        #expect((json["devices"] as? [String: Any])?["total"] as? Int == 1)
        #expect((json["notifications"] as? [String: Any])?["pending"] as? Int == 2)
        #expect(json["last_integrity_check"] is NSNull)
        #expect((json["created_at"] as? String)?.hasSuffix("Z") == true)
    }

    @Test("no vault at the path exits 66 and says how to create one")
    func noVault() async throws {
        let cli = try VaultCLI()
        let result = try await cli.run(["status"])
        #expect(result.status == Exit.noVault, "\(result)")
        #expect(result.stderr.contains("vault init"))
    }
}
