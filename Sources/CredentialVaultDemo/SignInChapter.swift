import DevGateway
import Foundation
import VaultOAuth
import VaultSession
import VaultStore

/// alice signs in with the device authorization grant (the demo plays her, approving the code
/// at the gateway), and a sensitive action asks for a fresh sign-in (step-up).
enum SignInChapter {
    static func run(gateway: DevGateway, session: SessionService, narrator: Narrator) async throws -> AccountID {
        narrator.chapter("alice signs in with a device code (RFC 8628)")
        await gateway.registerClient(id: "vault-demo")
        await gateway.setDeviceGrantSettings(interval: 1, lifetime: 600)
        let provider = try await session.discoverProvider(issuer: gateway.baseURL)
        narrator.say("discovered \(provider.issuer)/.well-known/openid-configuration: device, token, JWKS and guest endpoints")
        let shown = AsyncStream.makeStream(of: DeviceAuthorization.self)
        let request = SignInRequest(
            provider: provider, clientID: "vault-demo", scopes: ["openid", "offline_access"],
            method: .device { authorization in
                shown.continuation.yield(authorization)
                shown.continuation.finish()
            },
            label: "Alice (demo)")
        async let signedIn = session.signIn(using: request)
        for await authorization in shown.stream {
            narrator.say("vault login shows: open \(authorization.verificationURI.absoluteString) and enter \(authorization.userCode)")
            narrator.say("(alice approves the code in her browser; the demo does it through the gateway's admin endpoint)")
            _ = await gateway.approveDeviceCode(userCode: authorization.userCode, subject: "alice")
        }
        let result = try await signedIn
        let verified = result.idToken.map { "verified ID token: sub \($0.subject), signed by the gateway's published key" } ?? "no ID token"
        narrator.say("signed in as account \(result.account.id): \(verified)")

        narrator.chapter("A sensitive action asks for a fresh sign-in (step-up)")
        narrator.say("waiting 2 s…")
        try await Task.sleep(for: .seconds(2))
        do {
            _ = try await session.validAccessToken(maxAuthenticationAge: .seconds(1))
        } catch let error as SessionError {
            narrator.say("a token for an action that needs a sign-in within 1 s is refused: \(error)")
        }
        await gateway.signInBrowserUser("alice")
        let browser: @Sendable (BrowserSignInLinks) async -> Void = { links in
            narrator.say("the browser opens the authorization URL with max_age=0 and prompt=login, PKCE S256, state and nonce")
            Task.detached { await Browser.visit(links.opener) }
        }
        let again = try await session.signIn(
            using: SignInRequest(
                provider: provider, clientID: "vault-demo", scopes: ["openid", "offline_access"],
                method: .browser(open: browser, timeout: .seconds(30)), account: result.account.id, maxAge: .zero))
        narrator.say("alice authenticated again (same account \(again.account.id), history kept); the redirect came back to 127.0.0.1")
        let token = try await session.validAccessToken(maxAuthenticationAge: .seconds(60))
        narrator.say("the sensitive action now gets a token: \(Narrator.fingerprint(token.value))")
        return result.account.id
    }
}

/// The demo's browser: follows the authorization endpoint's redirect to the loopback listener.
enum Browser {
    static func visit(_ url: URL) async {
        let transport = NIOTransport(timeout: .seconds(10))
        var next: URL? = url
        for _ in 0..<5 {
            guard let current = next,
                let response = try? await transport.send(HTTPRequest(method: .get, url: current))
            else { return }
            guard (300..<400).contains(response.status), let location = response.headers["Location"] else { return }
            next = URL(string: location, relativeTo: current)?.absoluteURL
        }
    }
}
