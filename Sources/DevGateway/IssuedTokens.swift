/// Tokens the gateway issued for a grant, as a client would receive them (RFC 6749 §5.1).
///
/// Its `description` redacts every token.
///
/// ```swift
/// let tokens = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
/// let stored = tokens.refreshToken
/// ```
public struct IssuedTokens: Sendable, Hashable {
    /// The grant (and refresh token family) these tokens belong to.
    public let grantID: String
    /// The new access token.
    public let accessToken: String
    /// `Bearer`, or `DPoP` for an access token bound to the key of the request's DPoP proof
    /// (RFC 9449 §5): send it as `Authorization: DPoP <token>` with a proof by that key.
    public let tokenType: String
    /// The access token's lifetime in seconds.
    public let expiresIn: Int
    /// The new refresh token; nil when the gateway does not rotate (keep the old one).
    public let refreshToken: String?
    /// The OpenID Connect ID token, a JWS signed by the gateway's current key (see
    /// ``DevGateway/jwksURL``); nil when the scope lacks `openid`.
    public let idToken: String?
    /// The granted scope.
    public let scope: String
}

extension IssuedTokens {
    /// The same tokens with `idToken` in place of the ID token.
    func with(idToken: String?) -> IssuedTokens {
        IssuedTokens(
            grantID: grantID, accessToken: accessToken, tokenType: tokenType, expiresIn: expiresIn,
            refreshToken: refreshToken, idToken: idToken, scope: scope)
    }

    /// The same tokens with `accessToken` in place of the access token.
    func with(accessToken: String) -> IssuedTokens {
        IssuedTokens(
            grantID: grantID, accessToken: accessToken, tokenType: tokenType, expiresIn: expiresIn,
            refreshToken: refreshToken, idToken: idToken, scope: scope)
    }
}

extension IssuedTokens: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Grant, lifetime and scope, with every token redacted.
    public var description: String {
        let refresh = refreshToken.map(redacted) ?? "none"
        let id = idToken.map(redacted) ?? "none"
        return "IssuedTokens(grant: \(grantID), access: \(redacted(accessToken)), expiresIn: \(expiresIn), refresh: \(refresh), id: \(id), scope: \(scope))"
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// A mirror without token values, so `dump(tokens)` cannot print them.
    public var customMirror: Mirror {
        Mirror(self, children: ["grantID": grantID, "expiresIn": expiresIn, "scope": scope], displayStyle: .struct)
    }
}

/// Placeholder for a secret value: says how long it was and nothing else.
func redacted(_ secret: String) -> String {
    "<redacted \(secret.utf8.count) bytes>"
}
