/// Which kind of token is being revoked (RFC 7009 §2.1 `token_type_hint`).
///
/// ```swift
/// try await client.revoke(token: refreshToken, hint: .refreshToken, endpoint: url, client: credentials)
/// ```
public enum TokenTypeHint: String, Sendable, Hashable, CaseIterable {
    /// `refresh_token`.
    case refreshToken = "refresh_token"
    /// `access_token`.
    case accessToken = "access_token"
}
