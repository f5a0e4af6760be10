/// A forced logout the gateway can simulate: a grant revoked for a reason an identity provider
/// documents, refused at the next refresh with that provider's words. Microsoft Entra ID puts
/// its `AADSTS` code at the start of `error_description` (and in `error_codes`); these are its
/// codes for the cases the session article names.
public enum ForcedLogout: String, Sendable, CaseIterable {
    /// AADSTS50173 (FreshTokenNeeded): an administrator (or the user) revoked the sign-ins.
    case administrator
    /// AADSTS50133 (SsoArtifactInvalidOrExpired): the password changed or expired.
    case passwordChanged = "password_changed"
    /// AADSTS700082 (ExpiredOrRevokedGrantInactiveToken): unused for too long.
    case inactivity

    /// The code Entra documents for it.
    public var code: Int {
        switch self {
        case .administrator: 50173
        case .passwordChanged: 50133
        case .inactivity: 700_082
        }
    }

    /// The `error_description` of the refusal, as Entra words it.
    public var description: String {
        switch self {
        case .administrator:
            "AADSTS50173: The provided grant has expired due to it being revoked, and a fresh auth token is needed. Either an admin or a user revoked the tokens for this user."
        case .passwordChanged:
            "AADSTS50133: Session is invalid due to expiration or recent password change."
        case .inactivity:
            "AADSTS700082: The refresh token has expired due to inactivity."
        }
    }
}
