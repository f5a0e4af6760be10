import Clocks
import DevGateway
import Foundation
import Logging
import Testing
import VaultOAuth
import VaultStore
import VaultSync
import VaultTestSupport
import VaultURLSession

@testable import VaultSession

/// One test's world: a DevGateway on loopback, test time, and any number of "devices" —
/// each its own vault (so its own device id) with its own session service signed in to a
/// gateway subject through its own grant. ``run(_:)`` tears everything down.
///
/// ```swift
/// try await DeviceWorld.run { world in
///     let laptop = try await world.device("laptop", subject: "alice")
///     _ = try await laptop.activation.register(name: "Laptop")
/// }
/// ```
final class DeviceWorld: Sendable {
    static let clientID = "vault-cli"

    let gateway: DevGateway
    let time = TestTime()
    let gatewayLogs = CapturedLogs()
    private let devices = Locked<[Device]>([])

    private init() async throws {
        gateway = try await DevGateway.start(logger: gatewayLogs.logger(label: "gateway"))
        let time = self.time
        await gateway.useClock { time.now() }
    }

    static func run(_ body: (DeviceWorld) async throws -> Void) async throws {
        let world = try await DeviceWorld()
        do {
            try await body(world)
        } catch {
            await world.shutdown()
            throw error
        }
        await world.shutdown()
    }

    private func shutdown() async {
        for device in devices.withLock({ $0 }) {
            await device.service.stop()
            if !device.vault.isClosed { device.vault.close() }
        }
        await gateway.stop()
    }

    /// A new install (vault) signed in to `subject` with a fresh grant at the gateway.
    func device(
        _ name: String, subject: String = "alice",
        configuration: ActivationConfiguration = ActivationConfiguration(
            approvalTimeout: .seconds(60),
            pollInterval: .seconds(5))
    ) async throws -> Device {
        let device = try await Device(name: name, subject: subject, world: self, configuration: configuration)
        devices.withLock { $0.append(device) }
        return device
    }

    /// Every access and refresh token the gateway issued to the test's devices.
    var issuedTokens: [String] {
        devices.withLock { $0 }.flatMap { [$0.tokens.accessToken, $0.tokens.refreshToken].compactMap { $0 } }
    }
}

/// One install: vault, session service, the device API over a counting transport, and the flows.
final class Device: Sendable {
    let name: String
    let subject: String
    let store: TestVault
    let vault: Vault
    let service: SessionService
    let transport: CountingTransport
    let api: HTTPDeviceNotificationAPI
    let activation: DeviceActivation
    let inbox: NotificationInbox
    let roster: DeviceRoster
    let account: AccountID
    let tokens: IssuedTokens
    let activationEvents: Watched<[ActivationEvent]>
    let sessionEvents: Watched<[SessionEvent]>
    private let readers: [Task<Void, Never>]

    fileprivate init(name: String, subject: String, world: DeviceWorld, configuration: ActivationConfiguration) async throws {
        self.name = name
        self.subject = subject
        store = try TestVault(.keyFile)
        vault = try store.create(clock: world.time.wallClock)
        var sessionConfiguration = SessionConfiguration()
        sessionConfiguration.observationInterval = .seconds(3600)
        // The session's own timers sleep on a clock of their own that the test never moves.
        service = SessionService(
            vault: vault,
            oauth: OAuthClient(
                transport: URLSessionTransport(timeout: TestTimeScale.scaled(.seconds(10))),
                logger: store.logs.logger(label: "oauth")),
            clock: TestClock<Duration>(), wallClock: world.time.wallClock,
            configuration: sessionConfiguration, logger: store.logs.logger(label: "session"))
        transport = CountingTransport()
        api = HTTPDeviceNotificationAPI(
            baseURL: world.gateway.baseURL, session: service, transport: transport,
            logger: store.logs.logger(label: "devices.http"))
        activation = DeviceActivation(
            session: service, api: api, clock: world.time.clock, wallClock: world.time.wallClock,
            configuration: configuration, logger: store.logs.logger(label: "devices"))
        inbox = NotificationInbox(
            session: service, api: api, wallClock: world.time.wallClock,
            logger: store.logs.logger(label: "notifications"))
        roster = DeviceRoster(session: service, api: api, logger: store.logs.logger(label: "roster"))

        let activationEvents = Watched<[ActivationEvent]>([])
        let sessionEvents = Watched<[SessionEvent]>([])
        let activationStream = activation.events()
        let sessionStream = service.events()
        readers = [
            Task { for await event in activationStream { activationEvents.update { $0.append(event) } } },
            Task { for await event in sessionStream { sessionEvents.update { $0.append(event) } } },
        ]
        self.activationEvents = activationEvents
        self.sessionEvents = sessionEvents

        let gateway = world.gateway
        tokens = await gateway.issueGrant(subject: subject, clientID: DeviceWorld.clientID)
        account = try await service.signIn(
            NewAccount(
                issuer: gateway.baseURL.absoluteString, subject: subject,
                client: OAuthClientSettings(
                    tokenEndpoint: gateway.tokenEndpoint, revocationEndpoint: gateway.revocationEndpoint,
                    clientID: DeviceWorld.clientID, scopes: ["openid", "profile"])),
            tokens: TokenSet(
                accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, idToken: tokens.idToken,
                tokenType: tokens.tokenType, accessTokenExpiresAt: world.time.now().addingTimeInterval(3600),
                scopes: ["openid", "profile"]),
            policy: SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(60 * 24 * 3600))
        ).id
    }

    deinit { readers.forEach { $0.cancel() } }

    /// Registers this install with its account.
    @discardableResult
    func register() async throws -> RegistrationResult {
        try await activation.register(account: account, name: name, platform: "linux-test")
    }

    /// Waits for an activation event that matches.
    @discardableResult
    func waitForActivationEvent(_ matches: @escaping @Sendable (ActivationEvent) -> Bool) async -> ActivationEvent? {
        guard await activationEvents.wait(until: { $0.contains(where: matches) }) else { return nil }
        return activationEvents.value.first(where: matches)
    }

    /// Syncs every notification and returns the pending ones, newest first.
    func pendingNotifications() async throws -> [NotificationRecord] {
        try await inbox.syncAll(account: account)
        return try await inbox.list(NotificationQuery(account: account, pendingOnly: true)).items
    }
}

extension ActivationEvent {
    var approvalRequest: (notification: String, deadline: Date)? {
        if case .approvalRequested(_, let notification, let deadline) = self { return (notification, deadline) }
        return nil
    }
}

/// Runs a verification in the background and advances the test clock poll by poll until it
/// ends. `before` runs once the approval request was announced (an answer on another device).
/// `activation` is the flow to drive (default: the device's own; a restarted one, say).
func driveVerification(
    _ device: Device, time: TestTime, step: Duration = .seconds(5), using activation: DeviceActivation? = nil,
    before: (@Sendable () async throws -> Void)? = nil
) async throws -> ActivationOutcome {
    let activation = activation ?? device.activation
    let announced = Watched(false)
    let events = activation.events()
    let listener = Task { for await event in events where event.approvalRequest != nil { announced.update { $0 = true } } }
    defer { listener.cancel() }
    let verification = Task { try await activation.verify(account: device.account) }
    let done = Watched(false)
    let watcher = Task {
        _ = try? await verification.value
        done.update { $0 = true }
    }
    defer { watcher.cancel() }
    guard await announced.wait(until: { $0 }) || done.value else {
        verification.cancel()
        Issue.record("no approval request was announced")
        return try await verification.value
    }
    try await before?()
    var idle = 0
    while !done.value, idle < 50 {
        // Advance only once the flow sleeps until its next poll; check for the end in between.
        if await time.advanceWhenSleeping(by: step, timeout: TestTimeScale.scaled(.milliseconds(200))) { idle = 0 } else { idle += 1 }
    }
    return try await verification.value
}
