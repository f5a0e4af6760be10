import Foundation
import VaultOAuth
import VaultStore

/// Why the identity service refused a device or notification call, or could not be asked.
/// Never carries a token or an activation code.
///
/// ```swift
/// do { _ = try await activation.activate(with: code, account: account) }
/// catch DeviceAPIError.invalidActivationCode(let left, _) { print("wrong code; \(left ?? 0) attempts left") }
/// ```
public enum DeviceAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server revoked this device for the account. The flows turn this into
    /// ``SessionError/expired(_:_:)`` with ``SessionEndReason/deviceRevoked``, tokens wiped.
    case deviceRevoked
    /// The server refused the access token even after a refresh.
    case unauthorized(String?)
    /// This device has not registered with the account.
    case notRegistered
    /// This device is registered but not active (pending, rejected, expired).
    case notActive(DeviceStatus?)
    /// A device may only activate itself.
    case notThisDevice
    /// No such device or notification for the account.
    case notFound(String?)
    /// The device is not waiting for activation any more (its current status, if known).
    case notPending(DeviceStatus?)
    /// The account has no active device that could approve this one: use the fallback.
    case noApprovingDevice
    /// An activation code was submitted before the fallback was started.
    case fallbackNotStarted
    /// The activation code was wrong; after the last attempt the registration is rejected.
    case invalidActivationCode(attemptsLeft: Int?, status: DeviceStatus?)
    /// The notification was already answered (by this or another device).
    case alreadyAnswered(action: String?, byDevice: String?, at: Date?)
    /// The notification expired.
    case notificationExpired(at: Date?)
    /// The server withdrew the notification.
    case notificationDismissed
    /// The notification does not offer that action.
    case actionNotOffered(offered: [String])
    /// Any other refusal: the HTTP status, the server's error code and its description.
    case rejected(status: Int, error: String, description: String?)
    /// The server's answer could not be read.
    case malformedResponse(String)
    /// No answer arrived (timeout, connection refused…).
    case unreachable(TransportError)
    /// The device API's URL may not receive a credential (`EndpointRule`): nothing was sent.
    case refusedEndpoint(EndpointError)
    /// The account has SPKI pins and the server's TLS chain holds none of them: nothing was sent.
    case pinningFailed(host: String, reason: String)

    public var description: String {
        switch self {
        case .deviceRevoked: "the identity service revoked this device: sign in again"
        case .unauthorized(let detail): "the identity service refused the access token\(detail.map { " (\($0))" } ?? ""): sign in again"
        case .notRegistered: "this device is not registered with the account: register it first"
        case .notActive(let status): "this device is not active for the account (\(status?.rawValue ?? "unknown")): activate it first"
        case .notThisDevice: "a device can only activate itself"
        case .notFound(let detail): "not found\(detail.map { ": \($0)" } ?? "")"
        case .notPending(let status): "this device is not waiting for activation (it is \(status?.rawValue ?? "in another state"))"
        case .noApprovingDevice: "the account has no active device to approve this one: use the fallback method"
        case .fallbackNotStarted: "ask for an activation code (start the fallback) before entering one"
        case .invalidActivationCode(let left, let status):
            status == .rejected
                ? "the activation code was wrong and no attempts are left: the activation was rejected"
                : "the activation code was wrong\(left.map { "; \($0) attempt(s) left" } ?? "")"
        case .alreadyAnswered(let action, let device, _):
            "the notification was already answered\(action.map { " (\($0))" } ?? "")\(device.map { " by device \($0)" } ?? "")"
        case .notificationExpired: "the notification expired: it can no longer be answered"
        case .notificationDismissed: "the notification was withdrawn by the server"
        case .actionNotOffered(let offered): "the notification does not offer that action (it offers: \(offered.joined(separator: ", ")))"
        case .rejected(let status, let error, let description):
            "the identity service refused the request (HTTP \(status), \(error)\(description.map { ": \($0)" } ?? ""))"
        case .malformedResponse(let reason): "the identity service's answer could not be read: \(reason)"
        case .unreachable(let error): "\(error)"
        case .refusedEndpoint(let error): "\(error)"
        case .pinningFailed(let host, let reason):
            "the identity service \(host) did not present a pinned TLS key (\(reason)); nothing was sent"
        }
    }
}
