import Foundation
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// Everything a vault logs at the most verbose level is free of secrets.
@Suite struct LogRedactionTests {
    @Test(
        "trace logs of a full round trip hold no token, passphrase, client secret or sealed text",
        arguments: TestVault.Kind.allCases)
    func logsHoldNoSecret(kind: TestVault.Kind) throws {
        let test = try TestVault(kind)
        var vault = try test.create()
        let account = try vault.accounts.insert(
            NewAccount(
                issuer: "https://id.example.test", subject: "alice", label: "label-5d1e", email: "alice-5d1e@example.test",
                client: OAuthClientSettings(
                    tokenEndpoint: try #require(URL(string: "https://id.example.test/token")),
                    clientID: "cli", authentication: .clientSecretBasic),
                clientSecret: "client-secret-5d1e"))
        let tokens = Samples.fixedTokens("log-5d1e")
        let generation = try vault.tokens.store(tokens, for: account.id, replacing: nil)
        expectVaultError(.staleGeneration) { try vault.tokens.store(Samples.fixedTokens("log-stale-5d1e"), for: account.id, replacing: nil) }
        try vault.notifications.upsert(
            NotificationRecord(
                uuid: "n-1", account: account.id, subject: "subject-5d1e",
                message: "message-5d1e", actions: [], createdAt: Date()))
        vault.close()
        expectVaultError(.wrongCredential) {
            try Vault.open(at: test.url, credential: .passphrase("wrong-passphrase-5d1e"), options: test.options())
        }
        vault = try test.open()
        #expect(try vault.tokens.current(for: account.id)?.generation == generation)
        #expect(try vault.accounts.clientSecret(for: account.id) == "client-secret-5d1e")
        try vault.accounts.remove(account.id)
        vault.close()

        #expect(!test.logs.lines.isEmpty, "the vault logged through the given logger")
        let secrets =
            [tokens.accessToken, tokens.refreshToken, tokens.idToken].compactMap { $0 }
            + [
                TestVault.passphrase, "wrong-passphrase-5d1e", "client-secret-5d1e", "log-stale-5d1e",
                "label-5d1e", "alice-5d1e@example.test", "subject-5d1e", "message-5d1e",
            ]
        for secret in secrets {
            #expect(!test.logs.contains(secret), "a log line holds a secret value")
        }
    }
}
