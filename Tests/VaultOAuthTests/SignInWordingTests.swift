import Foundation
import Testing
import VaultOAuth

/// Each request of a sign-in fails in its own words: a provider's 500 on the device poll is not
/// reported as a failed token refresh, and a refused code is not called an expired refresh token.
@Suite("Sign-in failures name the request that failed")
struct SignInWordingTests {
    @Test(
        "a temporary failure names its request, never a refresh",
        arguments: [
            (SignInStep.deviceAuthorization, "device authorization request"), (.devicePoll, "device token poll"),
            (.codeExchange, "authorization code exchange"), (.guestRegistration, "guest registration"), (.userinfo, "userinfo request"),
        ])
    func transientNamesTheStep(step: SignInStep, words: String) {
        let message = SignInError.tokenRequestFailed(.transient(.server(status: 500)), step: step).description
        #expect(message.contains("the \(words) failed: server error (HTTP 500)"), "\(message)")
        #expect(!message.contains("refresh"), "\(message)")
    }

    @Test("an unregistered refusal (django-oauth-toolkit's 404 device_not_found) keeps its status and code")
    func unrecognizedRefusal() {
        let message = SignInError.tokenRequestFailed(.unrecognizedError(status: 404, code: "device_not_found", description: nil), step: .devicePoll)
            .description
        #expect(message == "the provider refused the device token poll with HTTP 404 device_not_found; nothing was stored")
    }

    @Test("invalid_grant on a code is the sign-in's code, not a refresh token")
    func refusedCode() {
        for step in [SignInStep.codeExchange, .devicePoll] {
            let message = SignInError.tokenRequestFailed(.invalidGrant(description: nil), step: step).description
            #expect(message.contains("no longer accepts this sign-in's code"), "\(message)")
            #expect(!message.contains("refresh token"), "\(message)")
        }
    }

    @Test("no ID token and no userinfo endpoint: the message says how to get past it")
    func missingIDTokenSaysWhatToDo() {
        #expect(SignInError.missingIDToken.description.contains("ask for scopes without openid"))
    }
}
