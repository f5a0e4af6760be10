import Foundation

/// An account's tokens as the identity service issued them. Its description, debug
/// description and mirror never show a token value (`print`, `dump`, `String(reflecting:)`).
public struct TokenSet: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var accessToken: String
    public var refreshToken: String?
    public var idToken: String?
    public var tokenType: String
    /// When the access token stops being valid; nil when the server did not say.
    public var accessTokenExpiresAt: Date?
    public var scopes: [String]

    public init(
        accessToken: String, refreshToken: String? = nil, idToken: String? = nil,
        tokenType: String = "Bearer", accessTokenExpiresAt: Date? = nil, scopes: [String] = []
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.tokenType = tokenType
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.scopes = scopes
    }

    public var description: String {
        let expiry = accessTokenExpiresAt.map { "\($0)" } ?? "unknown"
        return
            "TokenSet(access: <redacted>, refresh: \(refreshToken == nil ? "none" : "<redacted>"), id: \(idToken == nil ? "none" : "<redacted>"), expires: \(expiry))"
    }

    public var debugDescription: String { description }

    /// Which tokens are present, their type, expiry and scopes: never a value, so `dump` cannot print one.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "accessToken": "<redacted>", "refreshToken": refreshToken == nil ? "none" : "<redacted>",
                "idToken": idToken == nil ? "none" : "<redacted>", "tokenType": tokenType,
                "accessTokenExpiresAt": accessTokenExpiresAt as Any, "scopes": scopes,
            ], displayStyle: .struct)
    }
}

/// The tokens stored for an account, with the generation a refresh must name to replace them.
/// Redacts its tokens like ``TokenSet``.
public struct StoredTokens: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var account: AccountID
    /// Grows by one on every store. Every store of tokens names the generation it replaces (a compare-and-swap).
    public var generation: Int64
    public var tokens: TokenSet
    public var updatedAt: Date

    public var description: String { "StoredTokens(account: \(account), generation: \(generation), \(tokens))" }

    public var debugDescription: String { description }

    /// The tokens' own redacting mirror stands in for them.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["account": account, "generation": generation, "tokens": tokens, "updatedAt": updatedAt],
            displayStyle: .struct)
    }
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
/// needs (``TokenStore/accessSnapshot(for:)``). Its description, debug description and mirror
/// never show the value.
public struct StoredAccessToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var account: AccountID
    /// The generation of the stored tokens it belongs to.
    public var generation: Int64
    public var accessToken: String
    public var tokenType: String
    /// When the access token stops being valid; nil when the server did not say.
    public var expiresAt: Date?
    public var scopes: [String]
    /// What the token is for: ``TokenTarget/account`` for the account's own, whose generation
    /// is that of the account's tokens; for any other, the generation of the target's own row.
    public var target: TokenTarget

    public init(
        account: AccountID, generation: Int64, accessToken: String, tokenType: String, expiresAt: Date?, scopes: [String],
        target: TokenTarget = .account
    ) {
        self.target = target
        self.account = account
        self.generation = generation
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scopes = scopes
    }

    /// The access token of `stored`.
    public init(_ stored: StoredTokens) {
        self.init(
            account: stored.account, generation: stored.generation, accessToken: stored.tokens.accessToken,
            tokenType: stored.tokens.tokenType, expiresAt: stored.tokens.accessTokenExpiresAt, scopes: stored.tokens.scopes)
    }

    public var description: String {
        "StoredAccessToken(account: \(account), target: \(target), generation: \(generation), expires: \(expiresAt.map { "\($0)" } ?? "unknown"), value: <redacted>)"
    }

    public var debugDescription: String { description }

    /// Everything but the value, so `dump` cannot print it.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "account": account, "generation": generation, "accessToken": "<redacted>", "tokenType": tokenType,
                "expiresAt": expiresAt as Any, "scopes": scopes, "target": target,
            ], displayStyle: .struct)
    }
}
