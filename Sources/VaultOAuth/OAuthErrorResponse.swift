import Foundation

/// An error response from a token or revocation endpoint (RFC 6749 §5.2, RFC 7009 §2.2.1).
///
/// ```swift
/// if let failure = OAuthErrorResponse.parse(response.body), failure.error == "invalid_grant" {
///     // the refresh token is dead: sign the user out
/// }
/// ```
public struct OAuthErrorResponse: Sendable, Hashable {
    /// The error code (`error`), e.g. `invalid_grant`.
    public var error: String
    /// Human-readable detail from the server (`error_description`), sanitised.
    public var errorDescription: String?
    /// A page about the error (`error_uri`).
    public var errorURI: String?

    /// Creates an error response.
    public init(error: String, errorDescription: String? = nil, errorURI: String? = nil) {
        self.error = error
        self.errorDescription = errorDescription
        self.errorURI = errorURI
    }

    /// Parses a JSON error body leniently: `error` must be a non-empty string, the other members
    /// are kept only when they are strings. Returns nil for anything else. Never traps.
    ///
    /// ```swift
    /// let failure = OAuthErrorResponse.parse(Data(#"{"error":"invalid_client"}"#.utf8))
    /// ```
    public static func parse(_ data: Data) -> OAuthErrorResponse? {
        parse(data, redaction: .none)
    }

    /// Parses like ``parse(_:)``, replacing every spelling of the secrets the request carried
    /// (`Redaction`) in each member before it is shortened, so no piece of one survives the cut.
    static func parse(_ data: Data, redaction: Redaction) -> OAuthErrorResponse? {
        guard data.count <= TokenResponse.maximumBodySize, let fields = JSONFields.parse(data) else { return nil }
        guard case .string(let code)? = fields["error"] else { return nil }
        let sanitizedCode = redaction.apply(to: code, limit: 128)
        guard !sanitizedCode.isEmpty else { return nil }
        var description: String?
        if case .string(let text)? = fields["error_description"] { description = redaction.apply(to: text) }
        var uri: String?
        if case .string(let text)? = fields["error_uri"] { uri = redaction.apply(to: text) }
        return OAuthErrorResponse(error: sanitizedCode, errorDescription: description, errorURI: uri)
    }
}

extension OAuthErrorResponse: CustomStringConvertible {
    /// The code followed by the server's description, e.g. `invalid_grant: token was revoked`.
    public var description: String {
        errorDescription.map { "\(error): \($0)" } ?? error
    }
}
