import Foundation
import VaultStore

/// What the identity service offers for devices and notifications: the server side of
/// new-device activation (by approval from an active device, or by a fallback code), the
/// account's devices screen, and notifications with actions.
///
/// A client tool implements it for its identity service, or uses the reference HTTP/JSON
/// implementation ``HTTPDeviceNotificationAPI``. Every call speaks for one account (and, at
/// the server, for the device that account's sign-in registered as). An implementation
/// throws ``DeviceAPIError`` for refusals it understands; ``DeviceAPIError/deviceRevoked``
/// makes the flows end the account's session as expired(device revoked).
///
/// ```swift
/// struct MyServiceAPI: DeviceNotificationAPI {
///     func register(_ device: DeviceDescriptor, account: AccountID) async throws -> DeviceEnrollment { … }
///     // …
/// }
/// let activation = DeviceActivation(session: session, api: MyServiceAPI())
/// ```
public protocol DeviceNotificationAPI: Sendable {
    // MARK: - This device's activation

    /// Registers this device with the account. Active when it is the account's first device;
    /// otherwise pending, with the activation methods the server offers (the codelab's
    /// `addNewDeviceOptions`).
    func register(_ device: DeviceDescriptor, account: AccountID) async throws -> DeviceEnrollment

    /// One device's registration as the server sees it now (polled while waiting for approval).
    func device(_ deviceID: String, account: AccountID) async throws -> RemoteDevice

    /// Sends an approval request to the account's active devices (REL-ID Verify).
    func startVerification(_ deviceID: String, account: AccountID) async throws -> ApprovalRequest

    /// Starts the alternative method: the server sends an activation code out of band.
    func startFallback(_ deviceID: String, account: AccountID) async throws -> FallbackChallenge

    /// Submits the fallback activation code; returns the registration, active when it was right.
    func activate(_ deviceID: String, code: ActivationCode, account: AccountID) async throws -> RemoteDevice

    /// Ends a pending activation: the approval request is withdrawn and the registration ends.
    func cancelActivation(_ deviceID: String, reason: ActivationCancelReason, account: AccountID) async throws -> RemoteDevice

    // MARK: - The account's devices

    /// Every device registered with the account.
    func devices(account: AccountID) async throws -> [RemoteDevice]

    /// Renames a device of the account.
    func rename(_ deviceID: String, to name: String, account: AccountID) async throws -> RemoteDevice

    /// Terminates a device of the account (this one included): its sign-ins end.
    func revoke(_ deviceID: String, account: AccountID) async throws -> RemoteDevice

    // MARK: - Notifications

    /// One page of the account's notifications, newest first (the codelab's `getNotifications`).
    func notifications(_ page: NotificationPageRequest, account: AccountID) async throws -> RemoteNotificationPage

    /// Answers a notification with one of its actions (the codelab's `updateNotification`).
    /// The first answer wins; a later one throws ``DeviceAPIError/alreadyAnswered(action:byDevice:at:)``.
    func answer(_ uuid: String, action: String, account: AccountID) async throws -> RemoteNotification
}
