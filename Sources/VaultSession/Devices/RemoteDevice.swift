import Foundation
import VaultStore

/// A device as the identity service describes it.
public struct RemoteDevice: Sendable, Hashable {
    public var registrationID: String
    public var deviceID: String
    public var name: String
    public var platform: String
    public var status: DeviceStatus
    public var activationMethod: ActivationMethod?
    /// Why it has its status ("approved from device …", "the approval request expired").
    public var statusReason: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var lastActivityAt: Date?

    public init(
        registrationID: String, deviceID: String, name: String, platform: String, status: DeviceStatus,
        activationMethod: ActivationMethod? = nil, statusReason: String? = nil, createdAt: Date, updatedAt: Date,
        lastActivityAt: Date? = nil
    ) {
        self.registrationID = registrationID
        self.deviceID = deviceID
        self.name = name
        self.platform = platform
        self.status = status
        self.activationMethod = activationMethod
        self.statusReason = statusReason
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastActivityAt = lastActivityAt
    }
}

/// This device as it asks to be registered.
public struct DeviceDescriptor: Sendable, Hashable {
    /// The install's stable id (`VaultStore.Vault.deviceID`).
    public var deviceID: String
    /// What a person calls it ("Work laptop").
    public var name: String
    /// The platform shown on the devices screen ("linux-x86_64").
    public var platform: String

    public init(deviceID: String, name: String, platform: String) {
        self.deviceID = deviceID
        self.name = name
        self.platform = platform
    }
}

/// A way to activate a device the server does not yet trust (the codelab's `newDeviceOptions`).
public struct ActivationOption: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// Approval from one of the account's active devices (REL-ID Verify).
    public static let verify = ActivationOption(rawValue: "verify")
    /// An alternative the server offers, such as an activation code sent out of band.
    public static let fallback = ActivationOption(rawValue: "fallback")
}

/// The server's answer to a registration: the device, and the methods offered while it is pending.
public struct DeviceEnrollment: Sendable, Hashable {
    public var device: RemoteDevice
    /// Empty unless the device is pending.
    public var options: [ActivationOption]

    public init(device: RemoteDevice, options: [ActivationOption]) {
        self.device = device
        self.options = options
    }
}

/// An approval request sent to the account's active devices.
public struct ApprovalRequest: Sendable, Hashable {
    /// The notification the active devices answer.
    public var notificationUUID: String
    /// When the server stops accepting an answer, if it says.
    public var expiresAt: Date?

    public init(notificationUUID: String, expiresAt: Date?) {
        self.notificationUUID = notificationUUID
        self.expiresAt = expiresAt
    }
}

/// The fallback method the server started: what to ask the person for.
public struct FallbackChallenge: Sendable, Hashable {
    /// `activation_code` for the reference server.
    public var method: String
    /// How the code reaches the person (`out_of_band`: SMS, e-mail…).
    public var delivery: String
    /// The code's length, when the server says.
    public var codeLength: Int?

    public init(method: String, delivery: String, codeLength: Int?) {
        self.method = method
        self.delivery = delivery
        self.codeLength = codeLength
    }
}

/// Why a pending activation is being ended.
public enum ActivationCancelReason: String, Sendable, Hashable {
    /// The person cancelled.
    case cancelled
    /// This device's deadline passed without an answer.
    case expired
}

/// A fallback activation code. A secret: its description and mirror never show it.
///
/// ```swift
/// let outcome = try await activation.activate(with: ActivationCode(typed), account: account)
/// ```
public struct ActivationCode: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The code as typed (surrounding white space removed).
    public let value: String

    public init(_ value: String) {
        self.value = value.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public var description: String { "ActivationCode(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
