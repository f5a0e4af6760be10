import Foundation

/// Settings and observations of the device and notification endpoints.
struct DeviceAreaSettings: Sendable {
    /// The device area's time source (the system time unless a test supplies its own).
    var now: @Sendable () -> Date = { Date() }
    /// Added to the system time wherever the device area reads the time (expiry, timestamps),
    /// so tests can move the server's clock without waiting.
    var clockOffset: Duration = .zero
    /// How long a new-device approval request stays answerable.
    var approvalLifetime: Duration = .seconds(300)
    /// `METHOD /route` of every device-area request received, in order (no bodies, no tokens).
    var requests: [String] = []
    /// What `POST /sessions/extend` answers: nil grants; else the error code and message it refuses with.
    var extensionRefusal: (code: String, message: String)?
    /// Answers extension requests in the codelab's form: HTTP 200, the body decides.
    var extensionInCodelabForm = false
}
