import Foundation

/// Settings of the sign-in endpoints: the clock they read, what discovery publishes, and
/// whether guests can be converted.
struct SignInSettings: Sendable {
    /// The token clock: ID-token times, code and device-code expiry, the polling interval.
    var now: @Sendable () -> Date = { Date() }
    /// What the discovery documents publish.
    var discovery = DiscoverySettings()
    /// Whether `/guest/convert` exists (and is published).
    var guestConversionEnabled = true
    /// Whether `/userinfo` exists (and is published as `userinfo_endpoint`).
    var userinfoEnabled = false
}
