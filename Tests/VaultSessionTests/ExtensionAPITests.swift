import DevGateway
import Foundation
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

/// The session extension protocol (the codelab's extendSessionIdleTimeout) against the
/// development gateway: asked only in the warning window, applied only when granted, the
/// server's refusal kept with its code and message.
@Suite("Session extension at the identity service", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct ExtensionAPITests {
    /// An interactive tool's policy: serving a token (the extension request's own) is not activity.
    static let policy = SessionPolicy(
        idleTimeout: .seconds(600), warningBefore: .seconds(60), maxExtensions: 1,
        absoluteLifetime: .seconds(24 * 3600), activity: .interactive)

    @Test("outside the warning window: refused without asking; inside: granted, the idle deadline moves; at the limit: refused without asking")
    func grantedInTheWindow() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: Self.policy)
            let api = HTTPDeviceNotificationAPI(baseURL: h.gateway.baseURL, session: h.service)
            #expect(try await h.service.extendSession(for: alice, askingServer: api) == .refused(.notInWarningWindow))
            #expect(await h.gateway.stats().extensionRequests == 0)

            await h.time.advance(by: .seconds(550))
            let before = try #require(try h.vault.sessions.current(for: alice)?.idleDeadline)
            guard case .extended(let deadline, let remaining) = try await h.service.extendSession(for: alice, askingServer: api) else {
                Issue.record("a granted extension was not applied")
                return
            }
            #expect(deadline > before && remaining == 0)
            #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == deadline)
            #expect(await h.gateway.stats().extensionRequests == 1)

            await h.time.advance(by: .seconds(550))
            #expect(try await h.service.extendSession(for: alice, askingServer: api) == .refused(.limitReached))
            #expect(await h.gateway.stats().extensionRequests == 1, "the limit is judged before asking")
        }
    }

    @Test("the server says no: its code and message come back, the deadline stays, and subscribers hear the refusal")
    func refusedByTheServer() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: Self.policy)
            let api = HTTPDeviceNotificationAPI(baseURL: h.gateway.baseURL, session: h.service)
            await h.gateway.setExtensionRefusal(code: "policy", message: "extensions are off for this account")
            await h.time.advance(by: .seconds(550))
            let before = try h.vault.sessions.current(for: alice)?.idleDeadline
            let result = try await h.service.extendSession(for: alice, askingServer: api)
            #expect(result == .refusedByServer(code: "policy", message: "extensions are off for this account"))
            #expect(
                await h.events.next { $0 == .extensionResult(alice, .refusedByServer(code: "policy", message: "extensions are off for this account")) } != nil)
            #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == before)
            #expect(try h.vault.sessions.current(for: alice)?.extensionInFlight == nil, "the in-flight marker is cleared")
            await h.gateway.setExtensionRefusal(code: nil)
            guard case .extended = try await h.service.extendSession(for: alice, askingServer: api) else {
                Issue.record("after the server relented the extension was not granted")
                return
            }
        }
    }

    @Test("a server that cannot be asked: the call throws and the session is left as it was")
    func unreachable() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: Self.policy)
            let nowhere = try #require(URL(string: "http://127.0.0.1:9/"))
            let api = HTTPDeviceNotificationAPI(baseURL: nowhere, session: h.service)
            await h.time.advance(by: .seconds(550))
            let before = try h.vault.sessions.current(for: alice)
            await #expect(throws: DeviceAPIError.self) { try await h.service.extendSession(for: alice, askingServer: api) }
            let after = try h.vault.sessions.current(for: alice)
            #expect(after?.idleDeadline == before?.idleDeadline && after?.extensionsUsed == 0 && after?.extensionInFlight == nil)
        }
    }

    @Test("the codelab's answer form: status 100 with error 0 grants, status 101 refuses even over HTTP 200, and a service that only speaks HTTP can say so")
    func codelabAnswerForm() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: Self.policy)
            let api = HTTPDeviceNotificationAPI(baseURL: h.gateway.baseURL, session: h.service)
            await h.gateway.setExtensionAnswersInCodelabForm(true)
            await h.gateway.setExtensionRefusal(code: "4", message: "extensions are off for this account")
            await h.time.advance(by: .seconds(550))
            let before = try h.vault.sessions.current(for: alice)?.idleDeadline
            #expect(
                try await h.service.extendSession(for: alice, askingServer: api) == .refusedByServer(code: "4", message: "extensions are off for this account"))
            #expect(try h.vault.sessions.current(for: alice)?.idleDeadline == before, "an HTTP 200 carrying a refusal extends nothing")
            await h.gateway.setExtensionRefusal(code: nil)
            guard case .extended(let deadline, _) = try await h.service.extendSession(for: alice, askingServer: api) else {
                Issue.record("status 100 with error 0 was not taken as a grant")
                return
            }
            #expect(deadline > (before ?? .distantPast))
        }
        var httpOnly = SessionConfiguration.testing
        httpOnly.extensionAcceptance = .httpSuccess
        try await SessionHarness.run(configuration: httpOnly) { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: Self.policy)
            let api = HTTPDeviceNotificationAPI(baseURL: h.gateway.baseURL, session: h.service)
            await h.gateway.setExtensionAnswersInCodelabForm(true)
            await h.time.advance(by: .seconds(550))
            let result = try await h.service.extendSession(for: alice, askingServer: api)
            #expect(result == .refusedByServer(code: "0", message: nil), "status 100 is no HTTP success: \(result)")
        }
    }
}
