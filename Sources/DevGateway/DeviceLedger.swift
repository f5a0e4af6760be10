import Foundation

/// The device area's state: every device registration per subject, which sign-in (grant)
/// speaks for which device, and the fallback activation codes handed out of band.
///
/// One registration per subject and device id; its id never changes, so re-registering a
/// device that was rejected, expired or revoked starts a new activation on the same record.
/// Pure value logic: the ``DevGateway`` actor owns the only instance.
struct DeviceLedger: Sendable {
    enum Status: String, Sendable {
        case pending, active, rejected, revoked, expired
    }

    struct Registration: Sendable {
        let id: String
        let subject: String
        let deviceID: String
        var name: String
        var platform: String
        var status: Status
        /// primary | verify | fallback, once active.
        var activationMethod: String?
        var statusReason: String?
        let createdAt: Date
        var updatedAt: Date
        var lastActivityAt: Date?
        /// The approval notification sent to the subject's active devices (verify), if any.
        var approvalNotification: String?
        /// The fallback activation code, while one is outstanding.
        var activationCode: String?
        var codeAttemptsLeft = 0
    }

    struct Key: Hashable, Sendable {
        let subject: String
        let deviceID: String
    }

    /// How many wrong fallback codes a registration survives.
    static let codeAttempts = 5
    /// The methods offered to a device that is not yet trusted (the codelab's addNewDeviceOptions).
    static let offeredMethods = ["verify", "fallback"]

    private(set) var registrations: [String: Registration] = [:]
    private var index: [Key: String] = [:]
    /// grant id → registration id: the device a sign-in speaks for.
    private var bindings: [String: String] = [:]

    // MARK: - Lookup

    func registration(id: String) -> Registration? { registrations[id] }

    func registration(subject: String, deviceID: String) -> Registration? {
        index[Key(subject: subject, deviceID: deviceID)].flatMap { registrations[$0] }
    }

    /// The registration a grant was bound to when its device registered.
    func registration(boundTo grantID: String) -> Registration? {
        bindings[grantID].flatMap { registrations[$0] }
    }

    /// Grants bound to a registration (sign-ins of that device).
    func grants(boundTo registrationID: String) -> [String] {
        bindings.filter { $0.value == registrationID }.map(\.key)
    }

    /// The subject's registrations, oldest first.
    func registrations(of subject: String) -> [Registration] {
        registrations.values.filter { $0.subject == subject }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    // MARK: - Registering

    enum RegisterOutcome: Sendable {
        case registered(Registration)
        /// The sign-in already speaks for another device.
        case boundElsewhere
    }

    /// Registers (or re-registers) `deviceID` for `subject` and binds the grant to it. Active
    /// when the subject has no other active device (primary); pending otherwise.
    mutating func register(
        subject: String, grantID: String, deviceID: String, name: String, platform: String,
        now: Date
    ) -> RegisterOutcome {
        if let bound = registration(boundTo: grantID), bound.deviceID != deviceID || bound.subject != subject {
            return .boundElsewhere
        }
        let key = Key(subject: subject, deviceID: deviceID)
        var registration: Registration
        if let existing = index[key].flatMap({ registrations[$0] }) {
            registration = existing
            registration.name = name
            registration.platform = platform
            registration.updatedAt = now
        } else {
            registration = Registration(
                id: TokenMint.identifier(prefix: "reg_"), subject: subject, deviceID: deviceID, name: name,
                platform: platform, status: .pending, createdAt: now, updatedAt: now)
            index[key] = registration.id
        }
        registration.lastActivityAt = now
        if registration.status != .active {
            let othersActive = registrations(of: subject).contains { $0.status == .active && $0.id != registration.id }
            registration.status = othersActive ? .pending : .active
            registration.activationMethod = othersActive ? nil : "primary"
            registration.statusReason = othersActive ? "waiting for activation" : nil
            registration.activationCode = nil
            registration.codeAttemptsLeft = 0
            registration.approvalNotification = nil
        }
        registrations[registration.id] = registration
        bindings[grantID] = registration.id
        return .registered(registration)
    }

    // MARK: - Changing a registration

    /// Replaces a registration (the caller changed fields of a copy).
    mutating func update(_ registration: Registration) {
        registrations[registration.id] = registration
    }

    /// Marks the registration active (or ended) with a method or reason.
    mutating func settle(_ id: String, status: Status, method: String? = nil, reason: String?, now: Date) {
        guard var registration = registrations[id] else { return }
        registration.status = status
        if let method { registration.activationMethod = method }
        registration.statusReason = reason
        registration.updatedAt = now
        registration.activationCode = nil
        registration.codeAttemptsLeft = 0
        if status != .pending { registration.approvalNotification = nil }
        registrations[id] = registration
    }

    mutating func touch(_ id: String, now: Date) {
        registrations[id]?.lastActivityAt = now
    }

    /// Issues a fresh fallback activation code (8 digits) for a pending registration.
    mutating func issueActivationCode(_ id: String, now: Date) -> String? {
        guard registrations[id]?.status == .pending else { return nil }
        var generator = SystemRandomNumberGenerator()
        let code = (0..<8).map { _ in String(Int.random(in: 0...9, using: &generator)) }.joined()
        registrations[id]?.activationCode = code
        registrations[id]?.codeAttemptsLeft = Self.codeAttempts
        registrations[id]?.updatedAt = now
        return code
    }

    enum CodeOutcome: Sendable {
        case accepted
        case wrong(attemptsLeft: Int)
        case notStarted
    }

    /// Checks a fallback code (timing-safe); the last wrong attempt rejects the registration.
    mutating func checkActivationCode(_ id: String, code: String, now: Date) -> CodeOutcome {
        guard let registration = registrations[id], let expected = registration.activationCode else { return .notStarted }
        if TokenMint.constantTimeEquals(expected, code) {
            settle(id, status: .active, method: "fallback", reason: nil, now: now)
            return .accepted
        }
        let left = max(0, registration.codeAttemptsLeft - 1)
        registrations[id]?.codeAttemptsLeft = left
        if left == 0 {
            settle(id, status: .rejected, reason: "too many wrong activation codes", now: now)
        }
        return .wrong(attemptsLeft: left)
    }
}
