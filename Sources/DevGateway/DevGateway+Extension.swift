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
    /// ``setExtensionRefusal(code:message:)`` when refused. In the codelab's own form
    /// (``setExtensionAnswersInCodelabForm(_:)``) every answer is HTTP 200 and the body decides:
    /// `status_code` 100 with `error_code` 0 grants, `status_code` 101 with the refusal's code refuses.
    /// Any valid access token may ask.
    func handleExtend(_ request: HTTPRequest) async -> HTTPResponse {
        await withCaller(request) { _ throws(DeviceRejection) in
            state.stats.extensionRequests += 1
            statsDidChange()
            let refusal = state.deviceArea.extensionRefusal
            if state.deviceArea.extensionInCodelabForm {
                guard let refusal else { return .json(ExtensionAnswer(statusCode: 100, numericErrorCode: 0)) }
                return .json(ExtensionAnswer(statusCode: 101, errorCode: refusal.code, errorMessage: refusal.message))
            }
            guard let refusal else {
                return .json(ExtensionAnswer(statusCode: 200))
            }
            return .json(ExtensionAnswer(statusCode: 403, errorCode: refusal.code, errorMessage: refusal.message), status: 403)
        }
    }

    /// Answers `POST /sessions/extend` in the codelab's form (HTTP 200 always; status 100 and
    /// error 0 grant) when `enabled`.
    public func setExtensionAnswersInCodelabForm(_ enabled: Bool) {
        state.deviceArea.extensionInCodelabForm = enabled
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
        /// The codelab's numeric error code (`0`: none), written as `error_code` instead.
        var numericErrorCode: Int?

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
            if let numericErrorCode { try container.encode(numericErrorCode, forKey: .errorCode) }
            try container.encodeIfPresent(errorCode, forKey: .errorCode)
            try container.encodeIfPresent(errorMessage, forKey: .errorMessage)
            try container.encodeIfPresent(errorCode, forKey: .error)
            try container.encodeIfPresent(errorMessage, forKey: .errorDescription)
        }
    }
}
