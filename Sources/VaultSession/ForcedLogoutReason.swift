import Foundation

/// Why the identity service ended a sign-in (a refresh refused with `invalid_grant`), where the
/// provider documents it; ``unspecified`` otherwise ("no reason given"). RFC 6749 has one code
/// for every refusal, so the reason comes from a provider's own documented codes:
///
/// | provider | where | code | reason |
/// |---|---|---|---|
/// | Microsoft Entra ID | `error_description` starts `AADSTSnnnn:` | 50173 | ``revoked`` (an administrator or the user revoked the sign-ins; also after a password reset) |
/// | | | 50133 | ``passwordChanged`` |
/// | | | 70008, 700082 | ``inactivity`` |
///
/// No provider whose documentation was checked has a code for a parallel-session limit (a
/// sign-in elsewhere ending this one): Keycloak ("Session not active"), Auth0, Okta and Google
/// word it as any other ended grant, so it is ``unspecified``.
public enum ForcedLogoutReason: String, Sendable, Hashable, CaseIterable {
    /// An administrator, or the user from elsewhere, revoked the sign-in.
    case revoked = "revoked_by_administrator"
    /// The password was changed, reset or expired.
    case passwordChanged = "password_changed"
    /// The refresh token went unused too long.
    case inactivity
    /// The identity service gave no documented reason.
    case unspecified

    /// The reason a refusal's `error_description` gives, by the codes the table above lists.
    public init(refusal description: String?) {
        guard let description, let code = Self.entraCode(description) else {
            self = .unspecified
            return
        }
        switch code {
        case 50173: self = .revoked
        case 50133: self = .passwordChanged
        case 70008, 700_082: self = .inactivity
        default: self = .unspecified
        }
    }

    /// What a message says.
    public var explanation: String {
        switch self {
        case .revoked: "an administrator (or the user, elsewhere) revoked the sign-in"
        case .passwordChanged: "the password was changed or expired"
        case .inactivity: "the sign-in went unused too long"
        case .unspecified: "refused (no reason given)"
        }
    }

    /// `nnnn` of a description that starts `AADSTSnnnn:` (Entra's documented form).
    static func entraCode(_ description: String) -> Int? {
        guard description.hasPrefix("AADSTS") else { return nil }
        let digits = description.dropFirst("AADSTS".count).prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count <= 9, description.dropFirst("AADSTS".count + digits.count).first == ":" else { return nil }
        return Int(digits)
    }
}
