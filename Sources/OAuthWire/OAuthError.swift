import Foundation

/// Why a token endpoint response body could not be accepted. Never carries a field's value.
///
/// ```swift
/// do { _ = try TokenResponse.parse(body) }
/// catch .missingField(let name) { print("server omitted \(name)") }
/// ```
public enum OAuthError: Error, Sendable, Hashable {
    /// The body is larger than the parser accepts.
    case bodyTooLarge(bytes: Int)
    /// The body is not a JSON object.
    case notJSONObject
    /// A required field is absent (or `null`).
    case missingField(String)
    /// A field has the wrong JSON type, e.g. a number where a string is required.
    case wrongType(field: String, expected: String)
    /// A field has the right type but an unacceptable value, e.g. a negative `expires_in`.
    case invalidValue(field: String, reason: String)
}

extension OAuthError: CustomStringConvertible {
    /// What is wrong with the body, in one line.
    public var description: String {
        switch self {
        case .bodyTooLarge(let bytes): "token response body is too large (\(bytes) bytes)"
        case .notJSONObject: "token response body is not a JSON object"
        case .missingField(let field): "token response lacks required field \(field)"
        case .wrongType(let field, let expected): "token response field \(field) is not \(expected)"
        case .invalidValue(let field, let reason): "token response field \(field) is invalid: \(reason)"
        }
    }
}

extension OAuthError: LocalizedError {
    /// Same as ``description``, so `localizedDescription` is useful too.
    public var errorDescription: String? { description }
}
