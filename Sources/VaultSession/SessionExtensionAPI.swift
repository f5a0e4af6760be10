import Foundation
import VaultStore

/// The identity service's answer to a session extension request: the codelab's
/// `ExtendSessionIdleTimeoutResponse` (status code, error code, error message).
public struct ExtensionResponse: Sendable, Hashable {
    public var statusCode: Int
    public var errorCode: String?
    /// The server's words, redacted of anything the request carried.
    public var errorMessage: String?

    public init(statusCode: Int, errorCode: String? = nil, errorMessage: String? = nil) {
        self.statusCode = statusCode
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }

    /// Granted by plain HTTP success or by the codelab's result form (``ExtensionAcceptance/httpOrCodelab``).
    public var granted: Bool { ExtensionAcceptance.httpOrCodelab.grants(self) }
}

/// Which answers to an extension request grant it: the rule is the service's, so it is chosen
/// per service (``SessionConfiguration/extensionAcceptance``).
///
/// ```swift
/// var configuration = SessionConfiguration()
/// configuration.extensionAcceptance = .codelab        // REL-ID: status 100 and error 0, nothing else
/// configuration.extensionAcceptance = ExtensionAcceptance { $0.statusCode == 204 }   // a service's own
/// ```
public struct ExtensionAcceptance: Sendable {
    /// Whether `response` grants the extension.
    public let grants: @Sendable (ExtensionResponse) -> Bool

    public init(_ grants: @escaping @Sendable (ExtensionResponse) -> Bool) {
        self.grants = grants
    }

    /// Plain HTTP: a 2xx status with no error code (or the error code `0`).
    public static let httpSuccess = ExtensionAcceptance { response in
        (200..<300).contains(response.statusCode) && (response.errorCode == nil || response.errorCode == "0")
    }

    /// The codelab's `onSessionExtensionResponse`: status code 100 and error code 0 mean success
    /// (an absent error code counts as 0); anything else is a refusal.
    public static let codelab = ExtensionAcceptance { response in
        response.statusCode == 100 && (response.errorCode ?? "0") == "0"
    }

    /// Either form: what a tool that does not know its service's form accepts (the default).
    public static let httpOrCodelab = ExtensionAcceptance { httpSuccess.grants($0) || codelab.grants($0) }
}

/// Where a session asks the identity service for more idle time
/// (``SessionService/extendSession(for:askingServer:onlyInWarningWindow:)``).
/// ``HTTPDeviceNotificationAPI`` is the reference implementation (`POST {base}/sessions/extend`,
/// served by `DevGateway`).
public protocol SessionExtensionAPI: Sendable {
    /// Asks for the account's session to be extended. Throws only when the server could not be
    /// asked (unreachable, pinning, a refused endpoint); a refusal is an answer.
    func extendSessionIdleTimeout(account: AccountID) async throws -> ExtensionResponse
}
