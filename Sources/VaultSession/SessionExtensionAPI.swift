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

    /// A 2xx status with no error code.
    public var granted: Bool { (200..<300).contains(statusCode) && errorCode == nil }
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
