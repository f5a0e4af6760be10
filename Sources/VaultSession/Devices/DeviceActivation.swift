import Foundation
import Logging
import VaultStore

/// Registers this device with an account and activates it when the server does not trust it
/// yet: by approval from one of the account's active devices (verify), or by an alternative
/// the server offers (fallback, e.g. an activation code), usable at any time while pending.
///
/// ```swift
/// let activation = DeviceActivation(session: session, api: api)
/// switch try await activation.register(account: account, name: "Work laptop", platform: "linux") {
/// case .active:
///     break                                            // the account's first device
/// case .pending(_, let options) where options.contains(.verify):
///     Task { for await event in activation.events() { print(event) } }   // progress, deadline
///     switch try await activation.verify(account: account) {              // approve it on another device
///     case .activated: print("activated")
///     case .rejected(let registration), .expired(let registration), .cancelled(let registration):
///         print(registration.statusReason ?? "not activated")
///     }
/// case .pending:
///     _ = try await activation.startFallback(account: account)           // a code arrives out of band
///     _ = try await activation.activate(with: ActivationCode(typedCode), account: account)
/// }
/// ```
///
/// Waiting for an approval polls the server every ``ActivationConfiguration/pollInterval``
/// on the injected clock and gives up at ``ActivationConfiguration/approvalTimeout``; the
/// fallback or ``cancel(account:)`` ends the wait at once. The registration is stored in the
/// vault (status, method, reason) at every step, with the approval request and its deadline
/// (`VaultStore.PendingApproval`): after a restart, ``verify(account:)`` continues that wait
/// until the same deadline instead of sending a new request.
public actor DeviceActivation {
    let session: SessionService
    let api: any DeviceNotificationAPI
    let clock: any Clock<Duration>
    let wallClock: WallClock
    let configuration: ActivationConfiguration
    let logger: Logger
    private let hub = Broadcast<ActivationEvent>()

    /// One verification wait per account, shared by every caller.
    /// Running waits, one per account, shared by every caller; cancelled once every caller left.
    private var verifications: [AccountID: Coalesced<ActivationOutcome>] = [:]
    /// The current nap of each wait, cancelled to wake it early.
    private var naps: [AccountID: Task<Void, Never>] = [:]
    /// How a wait was ended from outside (fallback activated, cancelled…).
    private var interruptions: [AccountID: ActivationOutcome] = [:]

    /// Activation of this device for the accounts `session` serves.
    ///
    /// - Parameters:
    ///   - session: the session service whose accounts' tokens authorise the requests.
    ///   - api: the identity service's device and notification endpoints.
    ///   - clock: drives the approval deadline and polling; tests pass a `TestClock`.
    ///   - wallClock: the time written to the vault; must advance with `clock`.
    ///   - configuration: how long to wait for an approval and how often to ask.
    ///   - logger: where activation logs (never a token or a fallback code).
    public init(
        session: SessionService, api: any DeviceNotificationAPI, clock: any Clock<Duration> = ContinuousClock(),
        wallClock: WallClock = .system, configuration: ActivationConfiguration = ActivationConfiguration(),
        logger: Logger = Logger(label: "credentialvault.devices")
    ) {
        self.session = session
        self.api = api
        self.clock = clock
        self.wallClock = wallClock
        self.configuration = configuration
        self.logger = logger
    }

    /// A stream of activation progress from now on; each call makes a new subscriber.
    public nonisolated func events() -> AsyncStream<ActivationEvent> { hub.subscribe() }

    /// This device's registration with the account (the active one by default), as stored.
    public func registration(account: AccountID? = nil) async throws -> DeviceRegistration? {
        let id = try await session.resolve(account)
        return try await storeCall { [session] in try session.vault.devices.thisDevice(for: id) }
    }

    // MARK: - Register

    /// Registers this device (`VaultStore.Vault.deviceID`) with the account. Active when it
    /// is the account's first device or was activated before; otherwise pending with the
    /// methods the server offers, announced as ``ActivationEvent/optionsOffered(_:_:)``.
    public func register(account: AccountID? = nil, name: String, platform: String = "linux") async throws -> RegistrationResult {
        let id = try await session.resolve(account)
        let descriptor = DeviceDescriptor(deviceID: session.vault.deviceID, name: name, platform: platform)
        let api = self.api
        let enrollment = try await deviceCall(session, id) { try await api.register(descriptor, account: id) }
        let stored = try await store(enrollment.device, id)
        interruptions[id] = nil
        logger.info("device registered", metadata: ["account": "\(id)", "status": "\(stored.status.rawValue)"])
        switch stored.status {
        case .active:
            hub.emit(.activated(id, stored.activationMethod ?? .primary))
            return .active(stored)
        case .pending:
            hub.emit(.optionsOffered(id, enrollment.options))
            return .pending(stored, options: enrollment.options)
        case .rejected, .expired, .revoked:
            throw ActivationError(.notPending, "the server registered this device as \(stored.status.rawValue)\(stored.statusReason.map { ": \($0)" } ?? "")")
        }
    }

    // MARK: - Verify

    /// Sends an approval request to the account's active devices and waits until one
    /// approves or rejects it, the fallback activates this device, the activation is
    /// cancelled, or ``ActivationConfiguration/approvalTimeout`` passes (the server is then
    /// told, so the request can no longer be approved). Concurrent callers share one wait; a
    /// caller whose task is cancelled leaves it at once, and the wait stops when the last one
    /// leaves (the request stays stored, and a later `verify` resumes it).
    public func verify(account: AccountID? = nil) async throws -> ActivationOutcome {
        let id = try await session.resolve(account)
        while true {
            let verification: Coalesced<ActivationOutcome>
            if let running = verifications[id], running.isJoinable {
                verification = running
            } else {
                verification = Coalesced(whenAbandoned: .cancel) { try await self.runVerification(id) }
                verifications[id] = verification
            }
            defer {
                if let current = verifications[id], current === verification, verification.isFinished { verifications[id] = nil }
            }
            do {
                return try await verification.value()
            } catch is CancellationError where !Task.isCancelled && verification.wasCancelled {
                // The last caller left just as this one joined, which stopped the wait: start again.
                continue
            }
        }
    }

    private func runVerification(_ id: AccountID) async throws -> ActivationOutcome {
        let registration = try await pendingRegistration(id)
        if let settled = settledOutcome(registration) { return settled }
        interruptions[id] = nil
        let api = self.api
        let deviceID = registration.deviceID
        let now = wallClock.now()
        let approval: PendingApproval
        let resumed = registration.pendingApproval != nil
        if let stored = registration.pendingApproval {
            // A wait that an earlier run (or process) started: same request, same deadline.
            approval = stored
            logger.info("resuming the wait for approval", metadata: ["account": "\(id)"])
        } else {
            let request = try await deviceCall(session, id) { try await api.startVerification(deviceID, account: id) }
            var deadline = now.addingTimeInterval(configuration.approvalTimeout.timeInterval)
            // The server's own expiry, when sooner (one already past by this clock is a skewed
            // server clock, not a reason to give up at once).
            if let expiry = request.expiresAt, expiry > now, expiry < deadline { deadline = expiry }
            approval = PendingApproval(notification: request.notificationUUID, requestedAt: now, deadline: deadline)
            let registrationID = registration.id
            let recorded = try await storeCall { [session] in try session.vault.devices.recordPendingApproval(approval, registration: registrationID) }
            if !recorded, let settled = try await storeCall({ [session] in try session.vault.devices.thisDevice(for: id) }).flatMap(settledOutcome) {
                return settled
            }
            logger.info("approval requested from the account's active devices", metadata: ["account": "\(id)"])
        }
        // Never longer than the configured wait, whatever the wall clock did meanwhile.
        let left = min(max(approval.deadline.timeIntervalSince(now), 0), configuration.approvalTimeout.timeInterval)
        let clock = self.clock
        let countdown = Countdown.start(on: clock, duration: .milliseconds(Int64((left * 1000).rounded(.down))))
        hub.emit(.approvalRequested(id, notification: approval.notification, deadline: approval.deadline))
        var ask = resumed  // a resumed wait asks the server first: it may have been answered meanwhile
        while true {
            if let outcome = interruptions.removeValue(forKey: id) { return outcome }
            if ask {
                let remote = try await deviceCall(session, id) { try await api.device(deviceID, account: id) }
                if let outcome = interruptions.removeValue(forKey: id) { return outcome }
                if let outcome = try await conclude(remote, id) { return outcome }
            }
            ask = true
            let left = countdown.remaining
            if left <= .zero { return try await giveUp(id, deviceID: deviceID) }
            hub.emit(.waitingForApproval(id, secondsLeft: left.secondsRoundedUp))
            try await nap(id, for: min(configuration.pollInterval, left))
        }
    }

    /// The deadline passed: tell the server (the request must not be approved later), then
    /// record whatever the registration ended as.
    private func giveUp(_ id: AccountID, deviceID: String) async throws -> ActivationOutcome {
        let api = self.api
        let remote: RemoteDevice
        do {
            remote = try await deviceCall(session, id) { try await api.cancelActivation(deviceID, reason: .expired, account: id) }
        } catch DeviceAPIError.notPending {
            // Answered at the last moment: the server's word stands.
            let current = try await deviceCall(session, id) { try await api.device(deviceID, account: id) }
            if let outcome = try await conclude(current, id) { return outcome }
            throw ActivationError(.notPending, "the server reports the activation still pending after refusing to end it")
        }
        var ended = remote
        if ended.status == .expired {
            ended.statusReason = "no approval within \(configuration.approvalTimeout.secondsRoundedUp) s"
        }
        if let outcome = try await conclude(ended, id) { return outcome }
        throw ActivationError(.notPending, "the server kept the activation pending after its deadline")
    }

    // MARK: - Fallback

    /// Starts the alternative method the server offers (an activation code sent out of band).
    /// Usable at any time while pending, also while ``verify(account:)`` waits.
    public func startFallback(account: AccountID? = nil) async throws -> FallbackChallenge {
        let id = try await session.resolve(account)
        let registration = try await pendingRegistration(id)
        guard registration.status == .pending else {
            throw ActivationError(.notPending, "this device is \(registration.status.rawValue), not waiting for activation")
        }
        let api = self.api
        let deviceID = registration.deviceID
        let challenge = try await deviceCall(session, id) { try await api.startFallback(deviceID, account: id) }
        logger.info("fallback activation started", metadata: ["account": "\(id)", "method": "\(challenge.method)"])
        hub.emit(.fallbackStarted(id, challenge))
        return challenge
    }

    /// Submits the fallback activation code. Right: the device is active (a waiting
    /// ``verify(account:)`` returns the same outcome). Wrong: throws
    /// ``DeviceAPIError/invalidActivationCode(attemptsLeft:status:)``, unless that was the last
    /// attempt, which returns ``ActivationOutcome/rejected(_:)``.
    public func activate(with code: ActivationCode, account: AccountID? = nil) async throws -> ActivationOutcome {
        let id = try await session.resolve(account)
        let registration = try await pendingRegistration(id)
        if let settled = settledOutcome(registration) { return settled }
        let api = self.api
        let deviceID = registration.deviceID
        do {
            let remote = try await deviceCall(session, id) { try await api.activate(deviceID, code: code, account: id) }
            return try interrupt(id, with: await conclude(remote, id))
        } catch DeviceAPIError.invalidActivationCode(let left, let status) where status == .rejected {
            logger.notice("activation rejected after too many wrong codes", metadata: ["account": "\(id)", "attempts_left": "\(left ?? 0)"])
            let remote = try await deviceCall(session, id) { try await api.device(deviceID, account: id) }
            return try interrupt(id, with: await conclude(remote, id))
        }
    }

    // MARK: - Cancel

    /// Cancels a pending activation: the server withdraws the approval request and ends the
    /// registration; a waiting ``verify(account:)`` returns ``ActivationOutcome/cancelled(_:)``.
    /// The flow starts over with ``register(account:name:platform:)``.
    @discardableResult
    public func cancel(account: AccountID? = nil) async throws -> ActivationOutcome {
        let id = try await session.resolve(account)
        let registration = try await pendingRegistration(id)
        if let settled = settledOutcome(registration) { return settled }
        let api = self.api
        let deviceID = registration.deviceID
        let remote: RemoteDevice
        do {
            remote = try await deviceCall(session, id) { try await api.cancelActivation(deviceID, reason: .cancelled, account: id) }
        } catch DeviceAPIError.notPending {
            // Settled meanwhile (approved, say): report that instead.
            let current = try await deviceCall(session, id) { try await api.device(deviceID, account: id) }
            return try interrupt(id, with: await conclude(current, id))
        }
        let stored = try await store(remote, id)
        logger.info("device activation cancelled", metadata: ["account": "\(id)"])
        hub.emit(.cancelled(id))
        return try interrupt(id, with: .cancelled(stored))
    }

    // MARK: - Helpers

    /// This device's stored registration; throws when it never registered with the account.
    private func pendingRegistration(_ id: AccountID) async throws -> DeviceRegistration {
        guard let registration = try await storeCall({ [session] in try session.vault.devices.thisDevice(for: id) }) else {
            throw ActivationError(.notRegistered, "this device is not registered with account \(id): call register first")
        }
        return registration
    }

    /// The outcome of a registration that is no longer pending.
    private func settledOutcome(_ registration: DeviceRegistration) -> ActivationOutcome? {
        switch registration.status {
        case .pending: nil
        case .active: .activated(registration)
        case .rejected: .rejected(registration)
        case .expired, .revoked: .expired(registration)
        }
    }

    /// Stores the server's view and, when the activation ended, announces and returns how.
    private func conclude(_ remote: RemoteDevice, _ id: AccountID) async throws -> ActivationOutcome? {
        if remote.status == .revoked, remote.deviceID == session.vault.deviceID { throw await session.deviceWasRevoked(id) }
        guard remote.status != .pending else { return nil }
        let stored = try await store(remote, id)
        let reason = stored.statusReason ?? stored.status.rawValue
        switch stored.status {
        case .active:
            logger.info("device activated", metadata: ["account": "\(id)", "method": "\(stored.activationMethod?.rawValue ?? "unknown")"])
            hub.emit(.activated(id, stored.activationMethod ?? .verify))
            return .activated(stored)
        case .rejected:
            logger.notice("device activation rejected", metadata: ["account": "\(id)"])
            hub.emit(.rejected(id, reason: reason))
            return .rejected(stored)
        case .expired, .revoked, .pending:
            logger.notice("device activation expired", metadata: ["account": "\(id)"])
            hub.emit(.expired(id, reason: reason))
            return .expired(stored)
        }
    }

    /// Ends a running wait for `id` with `outcome` (nil: nothing to end) and returns the outcome.
    private func interrupt(_ id: AccountID, with outcome: ActivationOutcome?) throws -> ActivationOutcome {
        guard let outcome else {
            throw ActivationError(.notPending, "the server reports the activation still pending")
        }
        if verifications[id]?.isJoinable == true {
            interruptions[id] = outcome
            naps[id]?.cancel()
        }
        return outcome
    }

    private func store(_ remote: RemoteDevice, _ id: AccountID) async throws -> DeviceRegistration {
        try await storeCall { [session] in try session.vault.devices.saveRemoteDevice(remote, account: id) }
    }

    /// Sleeps on the injected clock; ``interrupt(_:with:)`` wakes it early. Rethrows the
    /// caller's cancellation.
    private func nap(_ id: AccountID, for duration: Duration) async throws {
        let clock = self.clock
        let sleeper = Task<Void, Never> { try? await clock.sleep(for: duration) }
        naps[id] = sleeper
        await withTaskCancellationHandler {
            await sleeper.value
        } onCancel: {
            sleeper.cancel()
        }
        naps[id] = nil
        try Task.checkCancellation()
    }
}
