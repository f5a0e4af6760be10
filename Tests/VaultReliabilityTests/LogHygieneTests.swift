import Foundation
import Testing
import VaultStore
import VaultTestSupport

/// Case 11 of issue 7. Every test of this target routes the vault's trace-level logs into a
/// ``CapturedLogs`` and hands them, with its error texts and command output, to
/// ``LogHygiene/check(_:texts:secrets:sourceLocation:)`` (tokens, passphrases, key-file bytes
/// as raw text, hex and base64). This test adds the `vault` command at its most verbose
/// level (`--verbose`, logging to standard error) through a whole session of commands.
@Suite struct LogHygieneTests {
    @Test("vault --verbose through init, accounts add, status, list, verify, passwd, wrong passphrases and export prints no secret")
    func verboseCommandsPrintNoSecret() async throws {
        let home = try TemporaryDirectory("hygiene")
        let url = home.file("vault.db")
        let passphrase = "hygiene passphrase 71c3"
        let newPassphrase = "hygiene new passphrase 0e5d"
        let wrong = "hygiene wrong passphrase a9b4"
        let access = "AT-hygiene-5f0e1d2c3b4a"
        let refresh = "RT-hygiene-a4b3c2d1e0f5"
        let idToken = "IDT-hygiene-99887766"
        let secretFile = home.file("client.secret")
        let clientSecret = "client-secret-hygiene-3e4f"
        #expect(
            FileManager.default.createFile(
                atPath: secretFile.path, contents: Data(clientSecret.utf8),
                attributes: [.posixPermissions: 0o600]))
        let environment = ["VAULT_PATH": url.path, "VAULT_PASSPHRASE": passphrase]
        func run(_ arguments: [String], stdin: String = "", env: [String: String] = environment) async throws -> VaultRun {
            try await VaultRun.run(arguments + ["--verbose"], environment: env, stdin: stdin, in: home)
        }
        var outputs: [String] = []
        let initialised = try await run(["init", "--kdf", "interactive"])
        #expect(initialised.status == 0, "\(initialised)")
        let response = #"{"access_token":"\#(access)","token_type":"Bearer","expires_in":3600,"refresh_token":"\#(refresh)","id_token":"\#(idToken)"}"#
        let added = try await run(
            [
                "accounts", "add", "--token-endpoint", "https://id.example.test/token",
                "--client-id", "cli", "--client-secret-file", secretFile.path, "--subject", "alice",
                "--label", "hygiene label",
            ], stdin: response)
        #expect(added.status == 0, "\(added)")
        outputs += [initialised.output, added.output]
        for command in [
            ["status"], ["accounts", "list"], ["accounts", "show"], ["verify"], ["export", "--redacted", "--json"],
            ["sessions", "list"], ["notifications", "list"],
        ] {
            let result = try await run(command)
            outputs.append(result.output)
        }
        let refused = try await run(["accounts", "list"], env: ["VAULT_PATH": url.path, "VAULT_PASSPHRASE": wrong])
        #expect(refused.status == 77, "\(refused)")
        outputs.append(refused.output)
        let passwd = try await run(["passwd"], env: environment.merging(["VAULT_NEW_PASSPHRASE": newPassphrase]) { $1 })
        outputs.append(passwd.output)
        #expect(!outputs.joined().isEmpty)
        #expect(outputs.contains { $0.contains("debug") || $0.contains("info") }, "verbose logging reached standard error")
        LogHygiene.check(
            CapturedLogs(), texts: outputs,
            secrets: [passphrase, newPassphrase, wrong, access, refresh, idToken, clientSecret])
    }
}
