import Foundation

extension Date {
    /// Milliseconds since 1970, the unit every time is stored in.
    package var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }

    package init(millisecondsSince1970 ms: Int64) {
        self.init(timeIntervalSince1970: TimeInterval(ms) / 1000)
    }

    /// How a message shows a time: ISO 8601 in UTC to the second (`2026-11-23T13:55:55Z`), the
    /// format of `vault`'s output and JSON.
    package var messageText: String { formatted(.iso8601) }
}
