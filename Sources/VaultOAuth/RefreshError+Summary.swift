/// What a refresh failure was, in the vault's own words only.
///
/// ``RefreshError/description`` carries the server's `error_description` (and, for an unknown
/// error, its `error` code): text the server chose, which may echo what it was sent. That text
/// is kept sealed. The summary is what may be stored in plain and shown without the key.
extension RefreshError {
    /// A classification built from this build's vocabulary, HTTP status codes and RFC 6749's
    /// registered error codes; never a word the server chose freely.
    public var summary: String {
        switch self {
        case .invalidGrant:
            "the refresh token is no longer valid (invalid_grant)"
        case .clientMisconfigured(let code, _):
            "the authorization server rejected this client (\(Self.registeredCodes.contains(code) ? code : "unregistered error code"))"
        case .transient(let failure):
            // The transport's reasons are this build's own ("connection refused"), never the server's.
            failure.description
        case .unrecognizedError(let status, _, _):
            "the authorization server refused the refresh (HTTP \(status))"
        case .malformedResponse(let status, _):
            "the authorization server sent an invalid response (HTTP \(status))"
        case .cancelled:
            "token refresh was cancelled"
        case .pinningFailed(let host, _):
            // The host is the account's own (plain) endpoint; the reason is this build's own words.
            "pinning failed: the TLS key of \(host) matches none of the account's pins"
        }
    }

    /// RFC 6749 §5.2's error codes and the ones this client sends or checks itself.
    static let registeredCodes: Set<String> = [
        "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
        "invalid_scope", "missing_client_secret",
    ]
}
