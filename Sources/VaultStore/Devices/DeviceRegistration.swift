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

/// The approval request a pending device waits on (schema 9): kept so that a restarted
/// activation continues the same wait, until the same deadline, instead of asking again.
public struct PendingApproval: Sendable, Hashable, Codable {
    /// The notification the server sent to the account's active devices.
    public var notification: String
    public var requestedAt: Date
    /// After this the wait ends and the server is told the request expired.
    public var deadline: Date

    public init(notification: String, requestedAt: Date, deadline: Date) {
        self.notification = notification
        self.requestedAt = requestedAt
        self.deadline = deadline
    }

    enum CodingKeys: String, CodingKey {
        case notification
        case requestedAt = "requested_at"
        case deadline
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        notification = try c.decode(String.self, forKey: .notification)
        requestedAt = Date(millisecondsSince1970: try c.decode(Int64.self, forKey: .requestedAt))
        deadline = Date(millisecondsSince1970: try c.decode(Int64.self, forKey: .deadline))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(notification, forKey: .notification)
        try c.encode(requestedAt.millisecondsSince1970, forKey: .requestedAt)
        try c.encode(deadline.millisecondsSince1970, forKey: .deadline)
    }
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
    /// The approval request this device waits on while pending (nil otherwise).
    public var pendingApproval: PendingApproval?

    public init(
        id: String = UUID().uuidString.lowercased(), account: AccountID, deviceID: String, name: String,
        platform: String, status: DeviceStatus, activationMethod: ActivationMethod? = nil,
        statusReason: String? = nil, createdAt: Date, updatedAt: Date, lastActivityAt: Date? = nil,
        pendingApproval: PendingApproval? = nil
    ) {
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
        self.pendingApproval = pendingApproval
    }
}
