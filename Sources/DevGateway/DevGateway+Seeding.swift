import Foundation

// MARK: - Seeding large histories (benchmarks)

extension DevGateway {
    /// Posts `count` notifications for `subject` in one call, each offering Approve (needs a
    /// recent sign-in) and Deny, without expiry: a history of 100,000 for a sync benchmark in
    /// about a second, where as many `postNotification` calls would each hop onto the actor.
    ///
    /// ```swift
    /// await gateway.seedNotifications(subject: "alice", count: 100_000)
    /// ```
    public func seedNotifications(subject: String, count: Int) {
        let actions = [
            NotificationLedger.Action(label: "Approve", action: "approve", authLevel: "high"),
            NotificationLedger.Action(label: "Deny", action: "deny", authLevel: nil),
        ]
        for index in 0..<max(0, count) {
            _ = post(
                subject: subject, title: "Sign-in request from a new device \(index)",
                message: "A device named Work laptop (Linux, Berlin) asks to sign in to your account. Approve it only if it was you.",
                actions: actions, expiresIn: nil)
        }
    }

    /// Registers `count` more active devices of `subject` (other machines, each as if it had
    /// signed in with a grant of its own and been approved), for a `vault devices sync` benchmark.
    public func seedDevices(subject: String, count: Int) {
        let now = deviceAreaNow()
        for index in 0..<max(0, count) {
            let outcome = state.devices.register(
                subject: subject, grantID: "seed-\(subject)-\(index)", deviceID: "seeded-device-\(index)",
                name: "Seeded device \(index)", platform: "Linux", now: now)
            if case .registered(let registration) = outcome, registration.status != .active {
                state.devices.settle(registration.id, status: .active, method: "verify", reason: nil, now: now)
            }
        }
    }
}
