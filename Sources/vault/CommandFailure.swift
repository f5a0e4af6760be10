import AgentWire
import ArgumentParser
import Foundation
import VaultAgent
import VaultOAuth
import VaultSession
import VaultStore

/// The exit codes of `vault`, sysexits-style, each documented in the README.
enum ExitStatus: Int32, CaseIterable {
    case failure = 1
    /// Bad arguments or unusable input (EX_USAGE; ArgumentParser's own parse errors too).
    case usage = 64
    /// The vault is damaged: verify found damage, SQLite reports corruption (EX_DATAERR).
    case damaged = 65
    /// No vault at the path, or the file is not a vault (EX_NOINPUT).
    case noVault = 66
    /// No such account, session, device or notification (EX_NOUSER).
    case noRecord = 67
    /// The identity server could not be reached or keeps failing; retry later (EX_UNAVAILABLE).
    case serverUnavailable = 69
    /// A migration failed and was rolled back, or a shipped migration was edited (EX_SOFTWARE).
    case migrationFailed = 70
    /// Something already exists at the path (EX_CANTCREAT).
    case alreadyExists = 73
    /// The file system or SQLite failed (EX_IOERR).
    case storage = 74
    /// Another process changed the vault at the same moment; try again (EX_TEMPFAIL).
    case busy = 75
    /// The identity server refused the OAuth client settings (EX_PROTOCOL).
    case clientRefused = 76
    /// Wrong passphrase or key file (EX_NOPERM).
    case wrongCredential = 77
    /// The vault's schema is newer than this tool (EX_CONFIG).
    case schemaTooNew = 78
    /// The session is locked: `vault sessions unlock`.
    case sessionLocked = 79
    /// The session expired, was revoked or refused, or was never signed in: import a new sign-in.
    /// (`refused` shares the code of `revoked`: the same next step; the messages differ.)
    case sessionEnded = 80
    /// The vault's schema is older than this tool: `vault migrate`.
    case migrationNeeded = 81
    /// The vault or key file is readable by others, or sits in a directory others can write.
    case unsafePermissions = 82
    /// The identity service's TLS chain holds none of the account's SPKI pins; nothing was sent.
    case pinningFailed = 83
    /// The last authentication is older than the action allows: `vault login --account A --max-age 0`.
    case stepUpRequired = 84
    /// The sign-in was declined (`access_denied`) at the provider.
    case signInDeclined = 85
    /// The sign-in ran out of time: the device code expired, or the browser never came back.
    case signInTimedOut = 86
    /// The provider's answer failed a check (ID token, state, issuer); nothing was stored.
    case signInRejected = 87
    /// Signed in as another user than the account's; nothing was stored.
    case wrongAccount = 88
    /// A session export was refused: not one, sealed to another vault, changed, expired or
    /// already imported; nothing was stored.
    case transferRefused = 89
    /// Interrupted (Ctrl-C); nothing was stored.
    case interrupted = 130
}

/// A failure turned into what the user sees: one message and an exit code. Every error
/// type reaches the user through here, so the mapping lives in one place.
struct CommandFailure: Error, CustomStringConvertible {
    var code: ExitStatus
    var message: String

    init(_ code: ExitStatus, _ message: String) {
        self.code = code
        self.message = message
    }

    var description: String { message }

    /// `error` as the command reports it; any error, ArgumentParser's own included (as a failure).
    static func describing(_ error: any Error) -> CommandFailure {
        CommandFailure(error) ?? CommandFailure(.failure, "\(error)")
    }

    /// Nil for ArgumentParser's own errors (help, version, validation), which it reports itself.
    init?(_ error: any Error) {
        switch error {
        case let failure as CommandFailure:
            self = failure
        case let error as VaultError:
            self.init(Self.status(of: error.code), error.message + Self.hint(for: error.code))
        case SessionError.vault(let error):
            self.init(error)
        case let error as SessionError:
            self.init(Self.status(of: error), error.description + (Self.hint(for: error).map { ": `\($0)`" } ?? "") + Self.advice(for: error))
        case let error as EndpointError:
            self.init(.usage, error.description)
        case let error as PinError:
            self.init(.usage, error.description)
        case let error as TokenTargetError:
            self.init(.usage, error.description)
        case let error as DPoPRequestError:
            self.init(.usage, error.description)
        case let error as SignInError:
            self.init(Self.status(of: error), Self.message(for: error))
        case let error as SessionTransferError:
            self.init(Self.status(of: error.code), error.message + Self.hint(for: error.code))
        case let error as DeviceAPIError:
            self.init(error.exitStatus, error.description)
        case let error as ActivationError:
            self.init(.clientRefused, error.description)
        case let error as OAuthError:
            self.init(.usage, "standard input is not an OAuth token response (RFC 6749 §5.1): \(error)")
        case let failure as AgentFailure:
            self.init(failure)
        case let error as AgentConnectionError:
            self.init(error)
        case is CancellationError:
            self.init(.failure, "cancelled")
        case is ValidationError, is CleanExit, is ExitCode:
            return nil
        default:
            self.init(.failure, "\(error)")
        }
    }

    /// The commands that go with a vault failure (the library names none).
    static func hint(for code: VaultError.Code) -> String {
        switch code {
        case .notFound: ": create one with `vault init`"
        case .damaged: " (`vault verify` lists every damaged row)"
        case .keyChanged: " (`vault rotate-key` or `vault passwd` ran elsewhere): `vault unlock` for the agent"
        case .keyRotationUnfinished: ": `vault rotate-key`"
        default: ""
        }
    }

    /// The commands that go with a refused session transfer.
    static func hint(for code: SessionTransferError.Code) -> String {
        switch code {
        case .malformedRecipient: "; `vault recipient` prints a vault's key"
        case .wrongRecipient: "; `vault recipient` prints a vault's key"
        case .malformed: "; `vault sessions export` writes one"
        case .expired: "; `vault sessions export` makes a new one"
        case .sessionLocked: ": `vault sessions unlock`"
        case .conflict: " (`vault accounts remove`)"
        case .notTransferable: " (`vault login --client-credentials` there)"
        default: ""
        }
    }

    static func status(of code: SessionTransferError.Code) -> ExitStatus {
        switch code {
        case .sessionNotActive, .sessionLocked: .sessionEnded
        case .busy, .changed, .unfinished: .busy
        case .conflict: .alreadyExists
        default: .transferRefused
        }
    }

    static func status(of code: VaultError.Code) -> ExitStatus {
        switch code {
        case .wrongCredential: .wrongCredential
        case .invalidCredential, .invalidArgument: .usage
        case .notAVault, .notFound: .noVault
        case .damaged: .damaged
        case .schemaTooNew: .schemaTooNew
        case .migrationChecksumMismatch, .migrationFailed: .migrationFailed
        case .unsafeLocation: .unsafePermissions
        case .keyRotationUnfinished: .usage
        case .alreadyExists: .alreadyExists
        case .recordNotFound: .noRecord
        case .staleGeneration, .busy: .busy
        case .storage: .storage
        case .keyChanged: .sessionLocked
        default: .failure
        }
    }

    static func status(of error: SessionError) -> ExitStatus {
        switch error {
        case .locked: .sessionLocked
        case .expired, .revoked, .refused, .notSignedIn, .noActiveAccount: .sessionEnded
        case .temporarilyUnavailable: .serverUnavailable
        case .clientMisconfigured, .targetRefused: .clientRefused
        case .accountChanged: .busy
        case .pinningFailed: .pinningFailed
        case .authenticationTooOld: .stepUpRequired
        case .vault(let error): status(of: error.code)
        }
    }

    /// The command that is the next step after `error`, to be pasted as it is (the account by
    /// ``AccountReference/argument(_:)``); nil when there is none. The library says what
    /// happened; the command says what to run.
    static func hint(for error: SessionError) -> String? {
        switch error {
        case .noActiveAccount: "vault login"
        case .notSignedIn(let account), .expired(let account, _), .revoked(let account, _), .refused(let account, _):
            "vault login --account \(AccountReference.argument(account))"
        case .locked: "vault sessions unlock"
        case .authenticationTooOld(let account, _, _): "vault login --account \(AccountReference.argument(account)) --max-age 0"
        case .clientMisconfigured, .temporarilyUnavailable, .accountChanged, .pinningFailed, .targetRefused, .vault: nil
        }
    }

    /// What else may help after `error`, as pasteable commands; empty when nothing.
    static func advice(for error: SessionError) -> String {
        switch error {
        case .locked(let account, .idleTimeout):
            "; a longer idle timeout (or `none`): `vault accounts set-policy \(AccountReference.argument(account)) --idle-timeout 12h`"
        case .expired(let account, .absoluteTimeout):
            "; a longer or no lifetime: `vault accounts set-policy \(AccountReference.argument(account)) --lifetime 30d`"
        default: ""
        }
    }

    /// The `vault login` option that supplies each endpoint a provider may not publish.
    static let endpointOptions = [
        "token_endpoint": "--token-endpoint", "authorization_endpoint": "--authorization-endpoint",
        "device_authorization_endpoint": "--device-authorization-endpoint", "revocation_endpoint": "--revocation-endpoint",
        "jwks_uri": "--jwks-uri", "guest_endpoint": "--guest-endpoint",
    ]

    /// A sign-in failure in the command's words: a missing endpoint names the option that gives it.
    static func message(for error: SignInError) -> String {
        switch error {
        case .missingMetadata(let field):
            guard let option = endpointOptions[field] else { return error.description }
            return "the provider publishes no \(field): give it with `vault login \(option) URL` (the provider's documentation names it)"
        case .discoveryFailed(let issuer, let reason):
            return "cannot read the provider metadata of \(issuer): \(reason); give the endpoints with --token-endpoint and the other endpoint options"
        default:
            return error.description
        }
    }

    static func status(of error: SignInError) -> ExitStatus {
        switch error {
        case .discoveryFailed: .serverUnavailable
        case .missingMetadata, .insecureEndpoint, .invalidRedirectURI: .usage
        case .authorizationDenied: .signInDeclined
        case .deviceCodeExpired, .timedOut: .signInTimedOut
        case .issuerMismatch, .metadataConflict, .stateMismatch, .issuerParameterMismatch, .missingIDToken, .idTokenRejected, .malformedResponse:
            .signInRejected
        case .authorizationFailed: .clientRefused
        case .wrongAccount: .wrongAccount
        case .cancelled: .interrupted
        case .listenerFailed: .storage
        case .tokenRequestFailed(let failure, _):
            switch failure {
            case .transient, .malformedResponse: .serverUnavailable
            case .clientMisconfigured, .unrecognizedError: .clientRefused
            case .invalidGrant: .signInRejected
            case .pinningFailed: .pinningFailed
            case .cancelled: .interrupted
            }
        }
    }
}
