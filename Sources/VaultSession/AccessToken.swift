import Foundation
import VaultStore

/// An access token ready to put in an `Authorization` header. Its description, debug
/// description and mirror never show the value.
///
/// ```swift
/// let token = try await session.validAccessToken()
/// request.setValue(token.authorizationHeader, forHTTPHeaderField: "Authorization")
/// ```
public struct AccessToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var account: AccountID
    /// The secret value.
    public var value: String
    public var tokenType: String
    public var expiresAt: Date?
    /// The token generation it came from; ``SessionService/reportUnauthorized(_:)`` uses it to
    /// tell a stale token from one the server rejected.
    public var generation: Int64
    /// The token's scopes, as granted.
    public var scopes: [String]
    /// What the token is for (``TokenTarget/account``: the account's own token). For another
    /// target, ``generation`` counts that target's tokens.
    public var target: TokenTarget

    /// `"Bearer <value>"` (or the server's token type).
    public var authorizationHeader: String { "\(tokenType) \(value)" }

    /// Whether the token is bound to the account's DPoP key (type `DPoP`, RFC 9449): every
    /// request that presents it needs a proof (``SessionService/dpopProof(for:method:url:accessToken:nonce:)``).
    public var isDPoPBound: Bool { tokenType.caseInsensitiveCompare("DPoP") == .orderedSame }

    public var description: String {
        "AccessToken(account: \(account), generation: \(generation), expires: \(expiresAt.map { "\($0)" } ?? "unknown"), value: <redacted>)"
    }

    public var debugDescription: String { description }

    /// Everything but the value, so `dump` cannot print it.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "account": account, "value": "<redacted>", "tokenType": tokenType, "expiresAt": expiresAt as Any,
                "generation": generation,
            ], displayStyle: .struct)
    }

    init(_ stored: StoredTokens) { self.init(StoredAccessToken(stored)) }

    init(_ stored: StoredAccessToken) {
        account = stored.account
        value = stored.accessToken
        tokenType = stored.tokenType
        expiresAt = stored.expiresAt
        generation = stored.generation
        scopes = stored.scopes
        target = stored.target
    }
}
