import Foundation
import VaultStore

/// Whether signing out can end a sign-in at the provider (RFC 7009), as far as the provider's
/// metadata tells: said at sign-in, so a user learns before the first sign-out that it may stay
/// alive at the provider.
///
/// ```swift
/// let result = try await session.signIn(using: request)
/// if result.revocation != .available { print("warning: \(result.revocation)") }
/// ```
public enum RevocationSupport: Sendable, Hashable, CustomStringConvertible {
    /// The provider has a revocation endpoint that takes this client.
    case available
    /// The provider publishes no revocation endpoint (and none was given).
    case noEndpoint
    /// The provider lists how clients authenticate at its revocation endpoint
    /// (`revocation_endpoint_auth_methods_supported`), and this client's way is not among them:
    /// it may refuse this client's revocations. Sign-outs still try.
    case clientNotListed(methods: [String])

    /// Judges a provider's revocation endpoint and listed methods for a client authenticating `authentication`.
    public static func judge(endpoint: URL?, methods: [String], authentication: ClientAuthentication) -> RevocationSupport {
        guard endpoint != nil else { return .noEndpoint }
        guard !methods.isEmpty, !methods.contains(authentication.rawValue) else { return .available }
        return .clientNotListed(methods: methods)
    }

    public var description: String {
        switch self {
        case .available:
            "the provider can revoke this sign-in"
        case .noEndpoint:
            "the provider publishes no revocation endpoint, so signing out cannot end this sign-in at the provider"
        case .clientNotListed(let methods):
            "the provider's revocation endpoint lists only \(methods.joined(separator: ", ")) for clients, so it may refuse this client's sign-outs"
        }
    }
}
