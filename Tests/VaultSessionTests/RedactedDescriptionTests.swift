import Foundation
import Testing
import VaultStore
import VaultTestSupport

@testable import VaultSession

/// The access token a tool is handed never shows its value in any rendering.
@Suite struct RedactedDescriptionTests {
    @Test("AccessToken renders its account, type and expiry, never its value")
    func accessToken() {
        let stored = StoredAccessToken(
            account: AccountID(rawValue: "account-render"), generation: 2,
            accessToken: "AT-made-up-render-4", tokenType: "Bearer", expiresAt: nil, scopes: [])
        let token = AccessToken(stored)
        for text in Renderings.of(token) + Renderings.of([token]) {
            #expect(SecretTrace.find("AT-made-up-render-4", in: text) == nil, "the token in: \(text.count) characters")
            #expect(text.contains("account-render"))
        }
    }
}
