import Foundation
import Logging
import VaultStore

/// The account's "Sessions / devices" screen: every registered device with its platform,
/// status and last activity, renaming, and terminating one (this one included).
///
/// ```swift
/// let roster = DeviceRoster(session: session, api: api)
/// for device in try await roster.refresh(account: account) {
///     print(device.name, device.platform, device.status, device.lastActivityAt ?? "never")
/// }
/// try await roster.revoke(deviceID: lostLaptop.deviceID, account: account)   // "terminate this one"
/// ```
public struct DeviceRoster: Sendable {
    let session: SessionService
    let api: any DeviceNotificationAPI
    let logger: Logger

    public init(session: SessionService, api: any DeviceNotificationAPI, logger: Logger = Logger(label: "credentialvault.devices")) {
        self.session = session
        self.api = api
        self.logger = logger
    }

    /// The devices as last stored in the vault (no server call), oldest first.
    public func devices(account: AccountID? = nil) async throws -> [DeviceRegistration] {
        let id = try await session.resolve(account)
        return try await storeCall { [session] in try session.vault.devices.all(for: id) }
    }

    /// Fetches the account's devices from the server and stores them, in one transaction;
    /// returns them oldest first. A device stored before that the server no longer lists is
    /// kept, marked revoked ("no longer in the identity service's roster"), never deleted. A
    /// roster naming one device twice, or with a device outside ``ServerInput``'s bounds, is
    /// refused whole (``DeviceAPIError/malformedResponse(_:)``): nothing is stored.
    @discardableResult
    public func refresh(account: AccountID? = nil) async throws -> [DeviceRegistration] {
        let id = try await session.resolve(account)
        let api = self.api
        let remote = try await deviceCall(session, id) { try await api.devices(account: id) }
        var seen = Set<String>()
        for device in remote where !seen.insert(device.deviceID).inserted {
            throw DeviceAPIError.malformedResponse("the roster lists device \(ServerInput.shown(device.deviceID)) twice; nothing was stored")
        }
        // A device left out would be marked gone: a roster with one bad entry is refused whole.
        for device in remote {
            if let problem = ServerInput.problem(with: device) {
                throw DeviceAPIError.malformedResponse("the roster's device \(ServerInput.shown(device.deviceID)): \(problem); nothing was stored")
            }
        }
        let vault = session.vault
        let now = await session.now()
        let listed = remote.map { vault.devices.remoteDeviceRecord($0, account: id, known: []) }
        return try await storeCall { try vault.devices.sync(listed, for: id, goneReason: Self.goneReason, at: now) }
    }

    /// Why a device the server stopped listing is marked revoked.
    public static let goneReason = "no longer in the identity service's roster"

    /// Renames a device of the account.
    @discardableResult
    public func rename(deviceID: String, to name: String, account: AccountID? = nil) async throws -> DeviceRegistration {
        let id = try await session.resolve(account)
        let api = self.api
        let remote = try await deviceCall(session, id) { try await api.rename(deviceID, to: name, account: id) }
        return try await storeCall { [session] in try session.vault.devices.saveRemoteDevice(remote, account: id) }
    }

    /// Terminates a device of the account. Terminating this device ends its own session as
    /// expired(device revoked), tokens wiped.
    @discardableResult
    public func revoke(deviceID: String, account: AccountID? = nil) async throws -> DeviceRegistration {
        let id = try await session.resolve(account)
        let api = self.api
        let remote = try await deviceCall(session, id) { try await api.revoke(deviceID, account: id) }
        let stored = try await storeCall { [session] in try session.vault.devices.saveRemoteDevice(remote, account: id) }
        logger.info("device terminated", metadata: ["account": "\(id)", "device": "\(deviceID)"])
        if deviceID == session.vault.deviceID {
            _ = await session.deviceWasRevoked(id)
        }
        return stored
    }
}
