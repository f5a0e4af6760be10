import Foundation
import VaultStore

/// Progress of a device activation, as a client tool shows it.
public enum ActivationEvent: Sendable, Hashable {
    /// The server does not trust this device yet and offers these methods (the codelab's `addNewDeviceOptions`).
    case optionsOffered(AccountID, [ActivationOption])
    /// An approval request went to the account's active devices; this device waits until `deadline`.
    case approvalRequested(AccountID, notification: String, deadline: Date)
    /// Still waiting for an answer (sent at every poll).
    case waitingForApproval(AccountID, secondsLeft: Int)
    /// The fallback method started: ask the person for what the challenge says.
    case fallbackStarted(AccountID, FallbackChallenge)
    /// The device is active; the sign-in continues.
    case activated(AccountID, ActivationMethod)
    /// An active device (or too many wrong codes) rejected the activation.
    case rejected(AccountID, reason: String)
    /// The deadline passed, or the server expired the request.
    case expired(AccountID, reason: String)
    /// The person cancelled; the flow starts over with ``DeviceActivation/register(account:name:platform:)``.
    case cancelled(AccountID)
}

/// Where this device stands after ``DeviceActivation/register(account:name:platform:)``.
public enum RegistrationResult: Sendable, Hashable {
    /// Trusted: the account's first device, or one already activated.
    case active(DeviceRegistration)
    /// Not trusted yet: activate with one of `options` (verify, fallback).
    case pending(DeviceRegistration, options: [ActivationOption])
}

/// How an activation ended. The registration (as stored in the vault) carries the method or the reason.
public enum ActivationOutcome: Sendable, Hashable {
    case activated(DeviceRegistration)
    case rejected(DeviceRegistration)
    case expired(DeviceRegistration)
    case cancelled(DeviceRegistration)

    /// The registration as stored after the outcome.
    public var registration: DeviceRegistration {
        switch self {
        case .activated(let registration), .rejected(let registration), .expired(let registration), .cancelled(let registration):
            registration
        }
    }
}

/// How long this device waits for an approval, and how often it asks.
public struct ActivationConfiguration: Sendable {
    /// The deadline for an approval from another device.
    public var approvalTimeout: Duration = .seconds(300)
    /// How often the server is asked whether an answer arrived.
    public var pollInterval: Duration = .seconds(3)

    public init(approvalTimeout: Duration = .seconds(300), pollInterval: Duration = .seconds(3)) {
        self.approvalTimeout = approvalTimeout
        self.pollInterval = pollInterval
    }
}

/// The activation was asked for something it cannot do in this state.
public struct ActivationError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// ``DeviceActivation/register(account:name:platform:)`` was not called for this account.
        case notRegistered = "not_registered"
        /// The registration is not pending (already active, or it ended).
        case notPending = "not_pending"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
