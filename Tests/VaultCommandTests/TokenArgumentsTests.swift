import Foundation
import Testing
import VaultTestSupport

/// `vault token` parses its own arguments first (see `VaultCommand.parse`): whatever form the
/// options take, it prints the same token, and anything unusual gets the full parser's message.
@Suite("vault token arguments")
struct TokenArgumentsTests {
    static let accessToken = "AT-arguments-0123456789"

    /// A key-file vault with one account whose access token is valid for an hour: no request is sent.
    static func fixture() async throws -> (cli: VaultCLI, key: String) {
        let cli = try VaultCLI()
        let key = cli.file("vault.key").path
        try #require(try await cli.run(["init", "--key-file", key]).status == 0)
        let response = #"{"access_token": "\#(accessToken)", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "RT-arguments"}"#
        let added = try await cli.run(
            [
                "accounts", "add", "--key-file", key, "--token-endpoint", "http://127.0.0.1:9/token", "--client-id", "cli",
                "--subject", "alice",
            ], stdin: response)
        try #require(added.status == 0, "\(added)")
        return (cli, key)
    }

    @Test("every spelling of the options prints the token and nothing else")
    func spellings() async throws {
        let (cli, key) = try await Self.fixture()
        let vault = cli.vault.path
        for arguments in [
            ["token", "--vault", vault, "--key-file", key],
            ["token", "--key-file", key, "--vault", vault],
            ["token", "--vault=\(vault)", "--key-file=\(key)"],
            ["token", "--key-file", key, "--account", "alice"],
            ["token", "--key-file", key, "-v"],
        ] {
            let result = try await cli.run(arguments)
            #expect(result.status == 0, "\(result)")
            #expect(result.stdout == Self.accessToken + "\n", "\(result)")
            #expect(!result.stderr.contains(Self.accessToken), "\(result)")
        }
    }

    @Test("bad arguments get vault's own usage errors (exit 64), help its own help, and print no token")
    func badArguments() async throws {
        let (cli, key) = try await Self.fixture()
        let passphraseFile = cli.file("passphrase")
        try Data("x\n".utf8).write(to: passphraseFile)
        let both = try await cli.run(["token", "--key-file", key, "--passphrase-file", passphraseFile.path])
        #expect(both.status == Exit.usage, "\(both)")
        #expect(both.stderr.contains("give either --passphrase-file or --key-file, not both"), "\(both)")

        let unknown = try await cli.run(["token", "--key-file", key, "--bogus"])
        #expect(unknown.status == Exit.usage, "\(unknown)")
        #expect(unknown.stderr.contains("--bogus") && unknown.stderr.contains("vault token"), "\(unknown)")

        let missing = try await cli.run(["token", "--key-file", key, "--account"])
        #expect(missing.status == Exit.usage, "\(missing)")

        let help = try await cli.run(["token", "--key-file", key, "--help"])
        #expect(help.status == 0 && help.stdout.contains("USAGE: vault token"), "\(help)")

        for result in [both, unknown, missing, help] {
            #expect(!result.allOutput.contains(Self.accessToken), "\(result)")
        }
    }
}
