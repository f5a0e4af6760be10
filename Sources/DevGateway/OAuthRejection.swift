/// An OAuth error the gateway answers with (RFC 6749 §5.2, RFC 7009 §2.2.1).
struct OAuthRejection: Error, Sendable, Hashable {
    var status: Int
    var error: String
    var description: String
    /// Whether a 401 carries `WWW-Authenticate: Basic`: RFC 6749 §5.2 asks for it when the
    /// client tried HTTP Basic; the token and revocation endpoints clear it for other methods.
    var challengesBasic = true

    static func invalidRequest(_ description: String) -> Self {
        Self(status: 400, error: "invalid_request", description: description)
    }

    /// 401, with a Basic challenge unless ``challengesBasic`` is cleared (RFC 6749 §5.2).
    static func invalidClient(_ description: String) -> Self {
        Self(status: 401, error: "invalid_client", description: description)
    }

    static func invalidGrant(_ description: String) -> Self {
        Self(status: 400, error: "invalid_grant", description: description)
    }

    static func unauthorizedClient(_ description: String) -> Self {
        Self(status: 400, error: "unauthorized_client", description: description)
    }

    static func unsupportedGrantType(_ description: String) -> Self {
        Self(status: 400, error: "unsupported_grant_type", description: description)
    }

    static func invalidScope(_ description: String) -> Self {
        Self(status: 400, error: "invalid_scope", description: description)
    }

    /// A `resource` the gateway does not serve, or that is not an absolute URI without a
    /// fragment (RFC 8707 §2).
    static func invalidTarget(_ description: String) -> Self {
        Self(status: 400, error: "invalid_target", description: description)
    }
}
