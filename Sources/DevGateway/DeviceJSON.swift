import FlyingFox
import Foundation

/// JSON bodies of the device and notification endpoints. Times are milliseconds since 1970.
enum DeviceJSON {
    // MARK: - Responses

    struct Device: Encodable {
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

        init(_ registration: DeviceLedger.Registration) {
            registrationID = registration.id
            deviceID = registration.deviceID
            name = registration.name
            platform = registration.platform
            status = registration.status.rawValue
            activationMethod = registration.activationMethod
            statusReason = registration.statusReason
            createdAt = milliseconds(registration.createdAt)
            updatedAt = milliseconds(registration.updatedAt)
            lastActivityAt = registration.lastActivityAt.map(milliseconds)
        }

        enum CodingKeys: String, CodingKey {
            case registrationID = "registration_id", deviceID = "device_id", name, platform, status
            case activationMethod = "activation_method", statusReason = "status_reason"
            case createdAt = "created_at", updatedAt = "updated_at", lastActivityAt = "last_activity_at"
        }
    }

    /// `{"device": …, "options": […]}`; options only while the device waits for activation.
    struct Enrollment: Encodable {
        let device: Device
        let options: [String]?
    }

    struct OneDevice: Encodable {
        let device: Device
    }

    struct DeviceList: Encodable {
        let devices: [Device]
    }

    struct Verification: Encodable {
        let notificationUUID: String
        let expiresAt: Int64?
        let device: Device

        enum CodingKeys: String, CodingKey {
            case notificationUUID = "notification_uuid", expiresAt = "expires_at", device
        }
    }

    struct Fallback: Encodable {
        let method: String
        let delivery: String
        let codeLength: Int
        let device: Device

        enum CodingKeys: String, CodingKey {
            case method, delivery, codeLength = "code_length", device
        }
    }

    struct Notification: Encodable {
        let notificationUUID: String
        let subject: String
        let message: String
        let actions: [NotificationLedger.Action]
        let createdAt: Int64
        let expiresAt: Int64?
        let status: String
        let actionPerformed: String?
        let answeredAt: Int64?
        let answeredByDevice: String?

        init(_ notice: NotificationLedger.Notice) {
            notificationUUID = notice.uuid
            subject = notice.title
            message = notice.message
            actions = notice.actions
            createdAt = milliseconds(notice.createdAt)
            expiresAt = notice.expiresAt.map(milliseconds)
            status = notice.status.rawValue
            actionPerformed = notice.actionPerformed
            answeredAt = notice.answeredAt.map(milliseconds)
            answeredByDevice = notice.answeredByDevice
        }

        enum CodingKeys: String, CodingKey {
            case notificationUUID = "notification_uuid", subject, message, actions
            case createdAt = "created_at", expiresAt = "expires_at", status, actionPerformed = "action_performed"
            case answeredAt = "answered_at", answeredByDevice = "answered_by_device"
        }
    }

    struct OneNotification: Encodable {
        let notification: Notification
    }

    struct NotificationPage: Encodable {
        let notifications: [Notification]
        let totalCount: Int
        let startIndex: Int
        let recordCount: Int

        enum CodingKeys: String, CodingKey {
            case notifications, totalCount = "total_count", startIndex = "start_index", recordCount = "record_count"
        }
    }

    /// An error body: RFC 6749-style `error` and `error_description`, plus what the client needs to explain it.
    struct Failure: Encodable {
        var error: String
        var errorDescription: String?
        var status: String?
        var attemptsLeft: Int?
        var actionPerformed: String?
        var answeredByDevice: String?
        var answeredAt: Int64?
        var expiredAt: Int64?
        var offeredActions: [String]?

        enum CodingKeys: String, CodingKey {
            case error, errorDescription = "error_description", status, attemptsLeft = "attempts_left"
            case actionPerformed = "action_performed", answeredByDevice = "answered_by_device", answeredAt = "answered_at"
            case expiredAt = "expired_at", offeredActions = "offered_actions"
        }
    }

    // MARK: - Requests

    struct Register: Decodable {
        let deviceID: String
        let name: String
        let platform: String

        enum CodingKeys: String, CodingKey {
            case deviceID = "device_id", name, platform
        }
    }

    struct Code: Decodable {
        let code: String
    }

    struct Cancel: Decodable {
        let reason: String?
    }

    struct Rename: Decodable {
        let name: String
    }

    struct Answer: Decodable {
        let action: String
    }

    struct PostNotification: Decodable {
        let subject: String
        let title: String?
        let message: String
        let actions: [NotificationLedger.Action]?
        let expiresIn: Int?

        enum CodingKeys: String, CodingKey {
            case subject, title, message, actions, expiresIn = "expires_in"
        }
    }

    struct Clock: Decodable {
        let advanceSeconds: Int

        enum CodingKeys: String, CodingKey {
            case advanceSeconds = "advance_seconds"
        }
    }

    struct DeviceSettings: Decodable {
        let approvalLifetime: Int?

        enum CodingKeys: String, CodingKey {
            case approvalLifetime = "approval_lifetime"
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data) -> T? {
        try? JSONDecoder().decode(type, from: data)
    }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }
}

/// Why a device-area request was refused: the status and the JSON error body.
struct DeviceRejection: Error, Sendable {
    let status: Int
    let body: DeviceJSON.Failure
    /// The answer to send instead of one made from `body` (a protected resource's refusal of the
    /// access token, with its challenges and nonce).
    private var replacement: HTTPResponse?

    init(_ status: Int, _ error: String, _ description: String, configure: (inout DeviceJSON.Failure) -> Void = { _ in }) {
        self.status = status
        var body = DeviceJSON.Failure(error: error, errorDescription: description)
        configure(&body)
        self.body = body
    }

    /// The refusal `response` of an access token (status 401), named `error` in the logs.
    init(accessTokenRefused response: HTTPResponse, error: String, description: String) {
        self.init(401, error, description)
        replacement = response
    }

    var response: HTTPResponse {
        if let replacement { return replacement }
        var extra: [(HTTPHeader, String)] = []
        if status == 401 {
            extra.append((HTTPHeader("WWW-Authenticate"), #"Bearer realm="DevGateway", error="invalid_token""#))
        }
        return .json(body, status: status, headers: extra)
    }

    static func badRequest(_ description: String) -> DeviceRejection {
        DeviceRejection(400, "invalid_request", description)
    }
}
