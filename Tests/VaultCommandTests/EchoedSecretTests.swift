import DevGateway
import Foundation
import Testing
import VaultTestSupport

/// An identity server that repeats its request in its error, in every encoding, gets neither
/// the refresh token nor the client secret (nor the Basic credential made of it) into what
/// `vault` prints, logs, writes to the vault file or exports for a support ticket.
@Suite("vault: echoed secrets reach no output and no file")
struct EchoedSecretTests {
    /// A made-up client secret with characters every encoder escapes.
    static let clientSecret = "made up s3cr3t+/&=%é~!"

    enum Answer: String, CaseIterable, CustomTestStringConvertible {
        case invalidGrant = "invalid_grant"
        case invalidClient = "invalid_client"
        case unregistered = "made_up_error"
        var testDescription: String { rawValue }
    }

    @Test("stderr, verbose logs, the vault file and export --redacted hold no echoed secret", arguments: Answer.allCases)
    func echoedSecretsGoNowhere(_ answer: Answer) async throws {
        let gateway = try await DevGateway.start()
        var cli = try VaultCLI()
        let key = cli.file("vault.key")
        cli.environment["VAULT_KEY_FILE"] = key.path
        #expect(try await cli.run(["init", "--key-file", key.path]).status == 0)
        let secretFile = cli.file("client-secret")
        try Data((Self.clientSecret + "\n").utf8).write(to: secretFile)
        // 30 s is inside the 60 s leeway: `vault token` refreshes, and the gateway echoes.
        let issued = await gateway.issueGrant(
            subject: "alice", clientID: "vault-cli", clientSecret: Self.clientSecret,
            accessTokenLifetime: .seconds(30))
        let refreshToken = try #require(issued.refreshToken)
        let added = try await cli.run(
            [
                "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString,
                "--revocation-endpoint", gateway.revocationEndpoint.absoluteString, "--client-id", "vault-cli",
                "--subject", "alice", "--client-secret-file", secretFile.path,
            ],
            stdin: AccountsAndTokenTests.tokenResponse(issued))
        #expect(added.status == 0, "\(added)")

        await gateway.failNextTokenRequests(with: TokenFault(status: 400, error: answer.rawValue, echoesRequest: true))
        let token = try await cli.run(["token", "--verbose"])
        #expect(await gateway.tokenRequestCount() == 1)
        switch answer {
        case .invalidGrant: #expect(token.status == 80, "\(token.status)")
        case .invalidClient: #expect(token.status == 76, "\(token.status)")
        case .unregistered: #expect(token.status == 0, "the access token is still valid: \(token.status)")
        }
        switch answer {
        case .invalidGrant, .invalidClient:
            // The echo was there to leak: the server's text reached the error message, redacted.
            #expect(token.stderr.contains("<redacted>"), "the server's description was not shown at all")
        case .unregistered:
            // A transient failure is logged in the vault's own words only (the server's are sealed).
            #expect(token.stderr.contains("HTTP 400"), "\(token.stderr)")
        }

        var transcripts = [token]
        for arguments in [["export", "--redacted", "--json"], ["accounts", "show", "--json"], ["status", "--json"]] {
            let result = try await cli.run(arguments)
            #expect(result.status == 0, "\(result.arguments) exited \(result.status)")
            transcripts.append(result)
        }
        let secrets = [
            refreshToken, Self.clientSecret, "vault-cli:\(Self.clientSecret)",
            "vault-cli:made+up+s3cr3t%2B%2F%26%3D%25%C3%A9~%21",
        ]
        for transcript in transcripts {
            let found = SecretTrace.firstFound(of: secrets, in: transcript.allOutput)
            #expect(found == nil, "\(found ?? "") in the output of vault \(transcript.arguments)")
            if transcript.arguments.first != "token" {
                #expect(SecretTrace.find(issued.accessToken, in: transcript.allOutput) == nil)
            }
        }
        for suffix in ["", "-wal", "-shm"] {
            let bytes = FileProbe.bytes(URL(fileURLWithPath: cli.vault.path + suffix))
            let found = SecretTrace.firstFound(of: secrets + [issued.accessToken], in: String(decoding: bytes, as: UTF8.self))
            #expect(found == nil, "\(found ?? "") in vault.db\(suffix)")
        }
        await gateway.stop()
    }
}
