import Foundation
import VaultStore

/// Bounds on what an identity service's device and notification API may put into the vault,
/// whatever implements ``DeviceNotificationAPI``: a buggy or hostile server cannot fill the
/// vault with megabyte subjects, dates a thousand years out, or ids that are escape sequences.
///
/// A notification outside them is skipped with a warning (the page's others are stored: the
/// history is a cache of the server's). A roster is refused whole instead: a device left out of
/// it would be marked gone.
public enum ServerInput {
    /// Ids (device, registration, notification, action): 1 to 128 characters, none of them
    /// white space or a control character.
    public static let maximumIDLength = 128
    /// Names, platforms, subjects, labels, reasons.
    public static let maximumNameLength = 256
    /// A notification's message.
    public static let maximumMessageLength = 16 * 1024
    /// Actions a notification may offer.
    public static let maximumActions = 16
    /// Times outside 2000–2200 are not a server's clock.
    static let earliest = Date(timeIntervalSince1970: 946_684_800)
    static let latest = Date(timeIntervalSince1970: 7_258_118_400)

    /// Why the server's device cannot be stored, if it cannot.
    public static func problem(with device: RemoteDevice) -> String? {
        id(device.deviceID, "device id") ?? id(device.registrationID, "registration id")
            ?? text(device.name, "name", maximumNameLength) ?? text(device.platform, "platform", maximumNameLength)
            ?? device.statusReason.flatMap { text($0, "status reason", maximumNameLength) }
            ?? time(device.createdAt, "created_at") ?? time(device.updatedAt, "updated_at")
            ?? device.lastActivityAt.flatMap { time($0, "last_activity_at") }
    }

    /// Why the server's notification cannot be stored, if it cannot.
    public static func problem(with notification: RemoteNotification) -> String? {
        if let problem = id(notification.uuid, "notification id") ?? text(notification.subject, "subject", maximumNameLength)
            ?? text(notification.message, "message", maximumMessageLength)
            ?? time(notification.createdAt, "created_at") ?? notification.expiresAt.flatMap({ time($0, "expires_at") })
            ?? notification.answeredAt.flatMap({ time($0, "answered_at") })
            ?? notification.actionPerformed.flatMap({ id($0, "action taken") })
            ?? notification.answeredByDevice.flatMap({ id($0, "answering device") })
        {
            return problem
        }
        guard notification.actions.count <= maximumActions else {
            return "\(notification.actions.count) actions (at most \(maximumActions))"
        }
        var actions = Set<String>()
        for action in notification.actions {
            if let problem = id(action.action, "action") ?? text(action.label, "action label", maximumNameLength)
                ?? action.authLevel.flatMap({ id($0, "auth_level") })
            {
                return problem
            }
            guard actions.insert(action.action).inserted else { return "the action \(shown(action.action)) twice" }
        }
        return nil
    }

    /// An id as a message may show it: escaped, and cut at 40 characters.
    public static func shown(_ id: String) -> String {
        let escaped = id.unicodeScalars.map { scalar -> String in
            let category = scalar.properties.generalCategory
            return category == .control || category == .format ? "\\u{\(String(scalar.value, radix: 16))}" : String(scalar)
        }.joined()
        return escaped.count > 40 ? "\"\(escaped.prefix(40))…\"" : "\"\(escaped)\""
    }

    private static func id(_ value: String, _ what: String) -> String? {
        guard !value.isEmpty, value.count <= maximumIDLength else {
            return "its \(what) has \(value.count) characters (1 to \(maximumIDLength))"
        }
        guard !value.unicodeScalars.contains(where: { $0.properties.isWhitespace || isControl($0) }) else {
            return "its \(what) \(shown(value)) holds white space or control characters"
        }
        return nil
    }

    private static func text(_ value: String, _ what: String, _ limit: Int) -> String? {
        guard value.count <= limit else { return "its \(what) has \(value.count) characters (at most \(limit))" }
        return nil
    }

    private static func time(_ value: Date, _ what: String) -> String? {
        guard value >= earliest, value < latest else { return "its \(what) is outside 2000–2200" }
        return nil
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let category = scalar.properties.generalCategory
        return category == .control || category == .format
    }
}
