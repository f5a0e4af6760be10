import Testing
import VaultOAuth
import VaultTestSupport

/// Token responses and client credentials never show a token or the secret in any rendering.
@Suite struct RedactedDescriptionTests {
    @Test("TokenResponse, ClientCredentials and ClientSecret render without a token or the secret")
    func oauthValues() {
        let response = TokenResponse(
            accessToken: "AT-made-up-render-1", tokenType: "Bearer", expiresIn: 60,
            refreshToken: "RT-made-up-render-2", scope: "openid", idToken: "IDT-made-up-render-3")
        let secret = ClientSecret("made-up-client-secret-render")
        let credentials = ClientCredentials(clientID: "render-cli", authentication: .clientSecretBasic(secret))
        let texts =
            Renderings.of(response) + Renderings.of(secret) + Renderings.of(credentials)
            + Renderings.of(credentials.authentication) + Renderings.of([credentials])
        let secrets = ["AT-made-up-render-1", "RT-made-up-render-2", "IDT-made-up-render-3", "made-up-client-secret-render"]
        for text in texts {
            #expect(SecretTrace.firstFound(of: secrets, in: text) == nil, "a secret in: \(text.count) characters")
        }
        #expect(Renderings.of(credentials).allSatisfy { $0.contains("render-cli") && $0.contains("client_secret_basic") })
    }

    @Test("a token spelled across a scope and the punctuation after it is not rendered (found by the fuzzer)")
    func tokenAcrossAFieldBoundary() {
        // The scope ends with the token minus its last character; the description's ", " supplies it.
        let response = TokenResponse(
            accessToken: "AT-seed,", tokenType: "Bearer", expiresIn: nil, refreshToken: nil,
            scope: "openid AT-seed", idToken: nil)
        for text in Renderings.of(response) { #expect(!text.contains("AT-seed,"), "\(text)") }
        let plain = TokenResponse(
            accessToken: "AT-other-token", tokenType: "Bearer", expiresIn: nil, refreshToken: nil,
            scope: "openid profile", idToken: nil)
        #expect(Renderings.of(plain).allSatisfy { $0.contains("openid profile") }, "an unrelated scope is still shown")
    }
}
