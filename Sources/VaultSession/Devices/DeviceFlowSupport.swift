import Foundation
import VaultStore

// MARK: - Shared by the device and notification flows

/// Runs one call of a ``DeviceNotificationAPI``; an implementation reporting this device
/// revoked ends the account's session as expired(device revoked) first.
func deviceCall<T: Sendable>(
    _ session: SessionService, _ account: AccountID,
    _ body: @Sendable () async throws -> T
) async throws -> T {
    do {
        return try await body()
    } catch DeviceAPIError.deviceRevoked {
        throw await session.deviceWasRevoked(account)
    }
}

/// Runs a vault call on NIO's blocking-I/O threads (SQLite may fsync or wait for another
/// process's lock: never on the cooperative pool the flows' actors run on), turning its errors
/// into ``SessionError`` like the session service does.
@discardableResult
func storeCall<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await SessionService.offPool(body)
}

extension DeviceStore {
    /// This install's registration with `account`, if it has one.
    func thisDevice(for account: AccountID) throws -> DeviceRegistration? {
        try all(for: account).first { $0.deviceID == deviceID }
    }

    /// Stores what the server said of a device: one row per account and device id, keeping
    /// the local row's id and creation time when the device is already known.
    @discardableResult
    func saveRemoteDevice(_ remote: RemoteDevice, account: AccountID, known: [DeviceRegistration]? = nil) throws -> DeviceRegistration {
        if let problem = ServerInput.problem(with: remote) {
            throw DeviceAPIError.malformedResponse("the server's device \(ServerInput.shown(remote.deviceID)): \(problem); nothing was stored")
        }
        let record = remoteDeviceRecord(remote, account: account, known: try known ?? all(for: account))
        try save(record)
        return record
    }

    /// The registration to store for what the server said of a device.
    func remoteDeviceRecord(_ remote: RemoteDevice, account: AccountID, known: [DeviceRegistration]) -> DeviceRegistration {
        let existing = known.first { $0.deviceID == remote.deviceID }
        return DeviceRegistration(
            id: existing?.id ?? remote.registrationID, account: account, deviceID: remote.deviceID, name: remote.name,
            platform: remote.platform, status: remote.status, activationMethod: remote.activationMethod,
            statusReason: remote.statusReason, createdAt: existing?.createdAt ?? remote.createdAt, updatedAt: remote.updatedAt,
            lastActivityAt: remote.lastActivityAt, pendingApproval: remote.status == .pending ? existing?.pendingApproval : nil)
    }
}

/// Time left until a deadline on an injected clock (a `TestClock` in tests).
struct Countdown: Sendable {
    private let left: @Sendable () -> Duration

    private init(clock: some Clock<Duration>, duration: Duration) {
        let end = clock.now.advanced(by: duration)
        left = { clock.now.duration(to: end) }
    }

    /// Starts counting `duration` down on `clock` (an existential clock opens here).
    static func start<C: Clock<Duration>>(on clock: C, duration: Duration) -> Countdown {
        Countdown(clock: clock, duration: duration)
    }

    var remaining: Duration { left() }
}

extension Duration {
    /// Whole seconds, rounded up (what a countdown shows).
    var secondsRoundedUp: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) + (attoseconds > 0 ? 1 : 0)
    }
}
