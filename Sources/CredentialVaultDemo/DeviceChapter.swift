import DevGateway
import Foundation
import Logging
import VaultOAuth
import VaultSession
import VaultStore

/// Device B (a second install, its own vault) is activated by device A approving the
/// notification the server sends to A; then A's notification history is listed.
enum DeviceChapter {
    static func run(
        gateway: DevGateway, vault: Vault, session: SessionService, accounts: [String: AccountID],
        policy: SessionPolicy, directory: URL, narrator: Narrator, logger: Logger
    ) async throws {
        narrator.chapter("Device B is activated by device A approving the notification")
        guard let alice = accounts["alice"] else { return }
        try await session.recordActivity(for: alice)
        let apiA = HTTPDeviceNotificationAPI(baseURL: gateway.baseURL, session: session, logger: logger)
        let deviceA = DeviceActivation(session: session, api: apiA, logger: logger)
        if case .active(let registration) = try await deviceA.register(account: alice, name: "Desk workstation") {
            narrator.say("device A (\(registration.name)) registered: \(registration.status), the account's first device")
        }

        // Device B: another install with its own vault, signing in to the same account.
        let vaultB = try Vault.create(
            at: directory.appending(path: "device-b.db"), credential: .passphrase("demo"),
            options: VaultOptions(logger: logger))
        var configuration = SessionConfiguration()
        configuration.leeway = .seconds(2)
        let sessionB = SessionService(vault: vaultB, oauth: OAuthClient(logger: logger), configuration: configuration, logger: logger)
        let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-demo")
        let bAccount = try await sessionB.signIn(
            NewAccount(
                issuer: gateway.baseURL.absoluteString, subject: "alice", label: "Alice (demo)",
                client: OAuthClientSettings(
                    tokenEndpoint: gateway.tokenEndpoint, revocationEndpoint: gateway.revocationEndpoint,
                    clientID: "vault-demo")),
            tokens: TokenResponse(
                accessToken: issued.accessToken, tokenType: issued.tokenType, expiresIn: issued.expiresIn,
                refreshToken: issued.refreshToken, scope: issued.scope, idToken: issued.idToken))
        var activationConfiguration = ActivationConfiguration()
        activationConfiguration.pollInterval = .milliseconds(200)
        activationConfiguration.approvalTimeout = .seconds(20)
        let deviceB = DeviceActivation(
            session: sessionB, api: HTTPDeviceNotificationAPI(baseURL: gateway.baseURL, session: sessionB, logger: logger),
            configuration: activationConfiguration, logger: logger)
        if case .pending(let registration, let options) = try await deviceB.register(account: bAccount.id, name: "New laptop") {
            narrator.say(
                "device B (\(registration.name)) signed in: \(registration.status); the server offers \(options.map(\.rawValue).joined(separator: " or "))")
        }
        let waiting = Task { try await deviceB.verify(account: bAccount.id) }
        narrator.say("device B asked for approval and waits (deadline 20 s)…")

        // Device A sees the approval request in its notifications and approves it.
        let inbox = NotificationInbox(session: session, api: apiA, logger: logger)
        var request: NotificationRecord?
        for _ in 0..<50 where request == nil {
            try await inbox.syncAll(account: alice)
            request = try await inbox.list(NotificationQuery(account: alice, pendingOnly: true)).items.first
            if request == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        guard let request else {
            narrator.say("device A never received the approval request")
            waiting.cancel()
            return
        }
        narrator.say("device A received: \"\(request.subject)\" — \(request.message)")
        let answer = try await inbox.answer(request.uuid, action: "approve", account: alice)
        if case .answered = answer { narrator.say("device A answered: approve") }
        switch try await waiting.value {
        case .activated(let registration):
            narrator.say("device B is now \(registration.status) (activated by \(registration.activationMethod?.rawValue ?? "?")); its sign-in continues")
        case let other:
            narrator.say("device B: \(other)")
        }
        await sessionB.stop()
        vaultB.close()

        narrator.chapter("The notification history (from the vault, no server needed)")
        _ = await gateway.postNotification(
            subject: "alice", title: "Sign-in from a new place",
            message: "Was this you, in Lisbon?", actions: [("Yes, it was me", "approve"), ("No", "reject")])
        try await inbox.syncAll(account: alice)
        for item in try await inbox.list(NotificationQuery(account: alice)).items {
            let answered = item.actionTaken.map { "answered \($0)" } ?? item.status.rawValue
            narrator.say("\(item.subject): \(item.message) [\(answered)]")
        }
    }
}
