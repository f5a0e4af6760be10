import Foundation
import VaultStore

// MARK: - JSON shapes of the reference HTTP API (times in milliseconds since 1970)

struct WireEmpty: Codable {}

/// An extension answer: the codelab's form (`status_code` 100, `error_code` 0, a number) or a
/// plain one (`error_code` text); an error code given as a number is kept as its digits.
struct WireExtension: Decodable {
    let statusCode: Int?
    let errorCode: String?
    let errorMessage: String?

    enum CodingKeys: String, CodingKey {
        case statusCode = "status_code"
        case errorCode = "error_code"
        case errorMessage = "error_message"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        statusCode = try container.decodeIfPresent(Int.self, forKey: .statusCode)
        errorMessage = try container.decodeIfPresent(String.self, forKey: .errorMessage)
        if let number = try? container.decodeIfPresent(Int.self, forKey: .errorCode) {
            errorCode = String(number)
        } else {
            errorCode = try container.decodeIfPresent(String.self, forKey: .errorCode)
        }
    }
}

struct WireRegister: Encodable {
    let deviceID: String
    let name: String
    let platform: String

    enum CodingKeys: String, CodingKey {
        case deviceID = "device_id"
        case name, platform
    }
}

/// An activation code on its way to the server; a secret, so it never describes itself.
struct WireCode: Encodable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let code: String

    var description: String { "WireCode(<redacted>)" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: [:]) }
}

struct WireCancel: Encodable {
    let reason: String
}

struct WireRename: Encodable {
    let name: String
}

struct WireAnswer: Encodable {
    let action: String
}

struct WireDevice: Decodable {
    let registrationID: String
    let deviceID: String
    let name: String
    let platform: String
    let status: String
    let activationMethod: String?
    let statusReason: String?
    let createdAt: Int64
    let updatedAt: Int64
    let lastActivityAt: Int64?

    enum CodingKeys: String, CodingKey {
        case registrationID = "registration_id"
        case deviceID = "device_id"
        case name, platform, status
        case activationMethod = "activation_method"
        case statusReason = "status_reason"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case lastActivityAt = "last_activity_at"
    }

    func value() throws -> RemoteDevice {
        guard let status = DeviceStatus(rawValue: status) else {
            throw DeviceAPIError.malformedResponse("unknown device status \(ServerInput.shown(status))")
        }
        return RemoteDevice(
            registrationID: registrationID, deviceID: deviceID, name: name, platform: platform, status: status,
            activationMethod: activationMethod.flatMap(ActivationMethod.init(rawValue:)), statusReason: statusReason,
            createdAt: Date(milliseconds: createdAt), updatedAt: Date(milliseconds: updatedAt),
            lastActivityAt: lastActivityAt.map(Date.init(milliseconds:)))
    }
}

struct WireEnrollment: Decodable {
    let device: WireDevice
    let options: [String]?
}

struct WireOneDevice: Decodable {
    let device: WireDevice
}

struct WireDeviceList: Decodable {
    let devices: [WireDevice]
}

struct WireVerification: Decodable {
    let notificationUUID: String
    let expiresAt: Int64?

    enum CodingKeys: String, CodingKey {
        case notificationUUID = "notification_uuid"
        case expiresAt = "expires_at"
    }
}

struct WireFallback: Decodable {
    let method: String
    let delivery: String
    let codeLength: Int?

    enum CodingKeys: String, CodingKey {
        case method, delivery
        case codeLength = "code_length"
    }
}

struct WireAction: Decodable {
    let label: String
    let action: String
    let authLevel: String?

    enum CodingKeys: String, CodingKey {
        case label, action
        case authLevel = "auth_level"
    }
}

struct WireNotification: Decodable {
    let notificationUUID: String
    let subject: String
    let message: String
    let actions: [WireAction]
    let createdAt: Int64
    let expiresAt: Int64?
    let status: String
    let actionPerformed: String?
    let answeredAt: Int64?
    let answeredByDevice: String?

    enum CodingKeys: String, CodingKey {
        case notificationUUID = "notification_uuid"
        case subject, message, actions
        case createdAt = "created_at"
        case expiresAt = "expires_at"
        case status
        case actionPerformed = "action_performed"
        case answeredAt = "answered_at"
        case answeredByDevice = "answered_by_device"
    }

    func value() throws -> RemoteNotification {
        guard let status = NotificationStatus(rawValue: status) else {
            throw DeviceAPIError.malformedResponse("unknown notification status \(ServerInput.shown(status))")
        }
        return value(status)
    }

    func value(_ status: NotificationStatus) -> RemoteNotification {
        RemoteNotification(
            uuid: notificationUUID, subject: subject, message: message,
            actions: actions.map { NotificationAction(label: $0.label, action: $0.action, authLevel: $0.authLevel) },
            createdAt: Date(milliseconds: createdAt), expiresAt: expiresAt.map(Date.init(milliseconds:)), status: status,
            actionPerformed: actionPerformed, answeredAt: answeredAt.map(Date.init(milliseconds:)), answeredByDevice: answeredByDevice)
    }
}

struct WireOneNotification: Decodable {
    let notification: WireNotification
}

struct WireNotificationPage: Decodable {
    let notifications: [WireNotification]
    let totalCount: Int
    let startIndex: Int

    enum CodingKeys: String, CodingKey {
        case notifications
        case totalCount = "total_count"
        case startIndex = "start_index"
    }
}

struct WireFailure: Decodable {
    let error: String
    let errorDescription: String?
    let status: String?
    let attemptsLeft: Int?
    let actionPerformed: String?
    let answeredByDevice: String?
    let answeredAt: Int64?
    let expiredAt: Int64?
    let offeredActions: [String]?

    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
        case status
        case attemptsLeft = "attempts_left"
        case actionPerformed = "action_performed"
        case answeredByDevice = "answered_by_device"
        case answeredAt = "answered_at"
        case expiredAt = "expired_at"
        case offeredActions = "offered_actions"
    }
}

extension Date {
    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    var milliseconds: Int64 {
        Int64((timeIntervalSince1970 * 1000).rounded(.down))
    }
}
