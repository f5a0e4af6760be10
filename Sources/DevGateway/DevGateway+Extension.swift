import FlyingFox
import Foundation

// MARK: - Session extension: the codelab's extendSessionIdleTimeout

extension DevGateway {
    nonisolated static var extensionRoutes: [GatewayRoute] {
        [
            deviceRoute("POST /sessions/extend") { gateway, request, _ in
                await gateway.handleExtend(request)
            }
        ]
    }

    /// `POST /sessions/extend` (Bearer): asks for the session's idle timeout to be extended.
    /// Answers the codelab's ExtendSessionIdleTimeoutResponse as JSON, `{"status_code",
    /// "error_code"?, "error_message"?}`: 200 when granted, 403 with the code and message set by
    /// ``setExtensionRefusal(code:message:)`` when refused. Any valid access token may ask.
    func handleExtend(_ request: HTTPRequest) async -> HTTPResponse {
        await withCaller(request) { _ throws(DeviceRejection) in
            state.stats.extensionRequests += 1
            statsDidChange()
            guard let refusal = state.deviceArea.extensionRefusal else {
                return .json(ExtensionAnswer(statusCode: 200))
            }
            return .json(ExtensionAnswer(statusCode: 403, errorCode: refusal.code, errorMessage: refusal.message), status: 403)
        }
    }

    /// Makes `POST /sessions/extend` refuse with `code` and `message` (nil: grant again).
    ///
    /// ```swift
    /// await gateway.setExtensionRefusal(code: "policy", message: "sessions on this account cannot be extended")
    /// ```
    public func setExtensionRefusal(code: String?, message: String = "the session cannot be extended") {
        state.deviceArea.extensionRefusal = code.map { ($0, message) }
    }

    /// The codelab's fields, and for a refusal the gateway's usual `error` / `error_description` too.
    struct ExtensionAnswer: Encodable {
        var statusCode: Int
        var errorCode: String?
        var errorMessage: String?

        enum CodingKeys: String, CodingKey {
            case statusCode = "status_code"
            case errorCode = "error_code"
            case errorMessage = "error_message"
            case error
            case errorDescription = "error_description"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(statusCode, forKey: .statusCode)
            try container.encodeIfPresent(errorCode, forKey: .errorCode)
            try container.encodeIfPresent(errorMessage, forKey: .errorMessage)
            try container.encodeIfPresent(errorCode, forKey: .error)
            try container.encodeIfPresent(errorMessage, forKey: .errorDescription)
        }
    }
}
