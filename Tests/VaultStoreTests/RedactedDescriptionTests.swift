import Foundation
import Testing
import VaultTestSupport

@testable import VaultStore

/// Records that hold a token, a client secret or a passphrase never show it in any rendering.
@Suite struct RedactedDescriptionTests {
    static let tokens = Samples.tokens("render")
    static let secrets = [tokens.accessToken, tokens.refreshToken, tokens.idToken].compactMap { $0 }

    static func expectNoSecret(
        in renderings: [String], _ secrets: [String] = secrets,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for text in renderings {
            #expect(
                SecretTrace.firstFound(of: secrets, in: text) == nil, "a secret in: \(text.count) characters",
                sourceLocation: sourceLocation)
        }
    }

    @Test("TokenSet, StoredTokens and StoredAccessToken show which tokens exist, never a value")
    func tokenRecords() {
        let account = AccountID(rawValue: "account-1")
        let stored = StoredTokens(account: account, generation: 3, tokens: Self.tokens, updatedAt: Date())
        let access = StoredAccessToken(stored)
        Self.expectNoSecret(
            in: Renderings.of(Self.tokens) + Renderings.of(stored) + Renderings.of(access)
                + Renderings.of([Self.tokens]) + Renderings.of(Optional(stored)))
        // What is not secret is still there to debug with.
        #expect(Renderings.of(stored).allSatisfy { $0.contains("account-1") })
        var dumped = ""
        dump(Self.tokens, to: &dumped)
        #expect(dumped.contains("Bearer") && dumped.contains("openid"))
    }

    @Test("a NewAccount never shows its client secret; a passphrase credential never shows the passphrase")
    func accountAndCredential() throws {
        let secret = "made-up-client-secret-7Hq"
        var account = Samples.account()
        account.clientSecret = secret
        Self.expectNoSecret(in: Renderings.of(account), [secret])
        #expect(Renderings.of(account).allSatisfy { $0.contains("alice") })

        let passphrase = "made up passphrase 4Lw"
        let credential = try VaultCredential.passphrase(passphrase)
        Self.expectNoSecret(in: Renderings.of(credential), [passphrase])
        for text in Renderings.of(credential) { #expect(!text.contains("0x"), "no address of the guarded memory: \(text)") }
        #expect(Renderings.of(VaultCredential.keyFile(URL(fileURLWithPath: "/keys/vault.key"))).allSatisfy { $0.contains("/keys/vault.key") })
    }
}
