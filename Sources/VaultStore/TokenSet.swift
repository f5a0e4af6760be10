import Foundation

/// An account's tokens as the identity service issued them. Its description never shows
/// a token value.
public struct TokenSet: Sendable, Hashable, CustomStringConvertible {
    public var accessToken: String
    public var refreshToken: String?
    public var idToken: String?
    public var tokenType: String
    /// When the access token stops being valid; nil when the server did not say.
    public var accessTokenExpiresAt: Date?
    public var scopes: [String]

    public init(accessToken: String, refreshToken: String? = nil, idToken: String? = nil,
                tokenType: String = "Bearer", accessTokenExpiresAt: Date? = nil, scopes: [String] = []) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.tokenType = tokenType
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.scopes = scopes
    }

    public var description: String {
        let expiry = accessTokenExpiresAt.map { "\($0)" } ?? "unknown"
        return "TokenSet(access: <redacted>, refresh: \(refreshToken == nil ? "none" : "<redacted>"), id: \(idToken == nil ? "none" : "<redacted>"), expires: \(expiry))"
    }
}

/// The tokens stored for an account, with the generation a refresh must name to replace them.
public struct StoredTokens: Sendable, Hashable, CustomStringConvertible {
    public var account: AccountID
    /// Grows by one on every store. ``Vault/storeTokens(_:for:replacing:)`` names the generation it replaces.
    public var generation: Int64
    public var tokens: TokenSet
    public var updatedAt: Date

    public var description: String { "StoredTokens(account: \(account), generation: \(generation), \(tokens))" }
}

/// What is known about an account's tokens without opening them: presence and expiry.
public struct TokenMetadata: Sendable, Hashable {
    public var account: AccountID
    public var generation: Int64
    public var hasRefreshToken: Bool
    public var hasIDToken: Bool
    public var tokenType: String
    public var accessTokenExpiresAt: Date?
    public var scopes: [String]
    public var updatedAt: Date
}

/// An account's access token without its refresh and ID tokens: what serving an API call
/// needs (``Vault/accessSnapshot(for:)``). Its description never shows the value.
public struct StoredAccessToken: Sendable, Hashable, CustomStringConvertible {
    public var account: AccountID
    /// The generation of the stored tokens it belongs to.
    public var generation: Int64
    public var accessToken: String
    public var tokenType: String
    /// When the access token stops being valid; nil when the server did not say.
    public var expiresAt: Date?
    public var scopes: [String]

    public init(account: AccountID, generation: Int64, accessToken: String, tokenType: String, expiresAt: Date?, scopes: [String]) {
        self.account = account
        self.generation = generation
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scopes = scopes
    }

    /// The access token of `stored`.
    public init(_ stored: StoredTokens) {
        self.init(account: stored.account, generation: stored.generation, accessToken: stored.tokens.accessToken,
                  tokenType: stored.tokens.tokenType, expiresAt: stored.tokens.accessTokenExpiresAt, scopes: stored.tokens.scopes)
    }

    public var description: String {
        "StoredAccessToken(account: \(account), generation: \(generation), expires: \(expiresAt.map { "\($0)" } ?? "unknown"), value: <redacted>)"
    }
}
