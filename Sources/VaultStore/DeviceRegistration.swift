import Foundation

/// Where a device registration stands.
public enum DeviceStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case pending, active, rejected, revoked, expired
}

/// How a device was activated.
public enum ActivationMethod: String, Sendable, Hashable, Codable, CaseIterable {
    /// The first device of the account, activated by signing in.
    case primary
    /// Approved from an already active device.
    case verify
    /// An alternative method the server offered (an activation code, say).
    case fallback
}

/// A device registered with an account. The name is sealed at rest.
public struct DeviceRegistration: Sendable, Hashable, Identifiable {
    public var id: String
    public var account: AccountID
    public var deviceID: String
    public var name: String
    public var platform: String
    public var status: DeviceStatus
    public var activationMethod: ActivationMethod?
    public var statusReason: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var lastActivityAt: Date?

    public init(id: String = UUID().uuidString.lowercased(), account: AccountID, deviceID: String, name: String,
                platform: String, status: DeviceStatus, activationMethod: ActivationMethod? = nil,
                statusReason: String? = nil, createdAt: Date, updatedAt: Date, lastActivityAt: Date? = nil) {
        self.id = id
        self.account = account
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
