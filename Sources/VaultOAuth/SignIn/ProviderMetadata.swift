import Foundation

/// What an identity provider publishes about itself: OpenID Connect Discovery 1.0 §3 /
/// RFC 8414 §2 metadata, the members a sign-in uses. Codable with the RFC's member names, so
/// the stored form is the metadata itself.
///
/// ```swift
/// let metadata = try await oauth.discover(issuer: URL(string: "https://id.example.com")!)
/// let tokenURL = metadata.tokenEndpoint
/// ```
public struct ProviderMetadata: Sendable, Hashable, Codable {
    /// Where the metadata came from.
    public enum Source: String, Sendable, Hashable, Codable {
        /// `/.well-known/openid-configuration` (OpenID Connect Discovery 1.0).
        case openIDConfiguration = "openid-configuration"
        /// `/.well-known/oauth-authorization-server` (RFC 8414).
        case authorizationServer = "oauth-authorization-server"
        /// Given endpoint by endpoint, nothing discovered.
        case explicit
    }

    /// The issuer identifier, exactly as the provider states it (the ID token's `iss`).
    public var issuer: String
    public var authorizationEndpoint: URL?
    public var tokenEndpoint: URL
    public var revocationEndpoint: URL?
    public var deviceAuthorizationEndpoint: URL?
    public var jwksURI: URL?
    /// The guest protocol's registration endpoint (an extension member, `guest_endpoint`).
    public var guestEndpoint: URL?
    /// The guest protocol's conversion endpoint (`guest_conversion_endpoint`); absent: a guest
    /// is upgraded by linking it locally.
    public var guestConversionEndpoint: URL?
    /// Where the device and notification API lives (an extension member, `device_api_endpoint`:
    /// `devices`, `notifications`… are appended to it); nil when not published.
    public var deviceAPIEndpoint: URL?
    /// `code_challenge_methods_supported` (RFC 8414); empty when not published.
    public var codeChallengeMethods: [String]
    /// `id_token_signing_alg_values_supported`; empty when not published.
    public var idTokenSigningAlgorithms: [String]
    /// `scopes_supported`; empty when not published.
    public var scopesSupported: [String] = []
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    public var issuesIssuerParameter: Bool
    public var source: Source

    public init(
        issuer: String, tokenEndpoint: URL, authorizationEndpoint: URL? = nil, revocationEndpoint: URL? = nil,
        deviceAuthorizationEndpoint: URL? = nil, jwksURI: URL? = nil, guestEndpoint: URL? = nil,
        guestConversionEndpoint: URL? = nil, codeChallengeMethods: [String] = [],
        idTokenSigningAlgorithms: [String] = [], issuesIssuerParameter: Bool = false, source: Source = .explicit
    ) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.authorizationEndpoint = authorizationEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.jwksURI = jwksURI
        self.guestEndpoint = guestEndpoint
        self.guestConversionEndpoint = guestConversionEndpoint
        self.codeChallengeMethods = codeChallengeMethods
        self.idTokenSigningAlgorithms = idTokenSigningAlgorithms
        self.issuesIssuerParameter = issuesIssuerParameter
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case jwksURI = "jwks_uri"
        case guestEndpoint = "guest_endpoint"
        case guestConversionEndpoint = "guest_conversion_endpoint"
        case deviceAPIEndpoint = "device_api_endpoint"
        case codeChallengeMethods = "code_challenge_methods_supported"
        case idTokenSigningAlgorithms = "id_token_signing_alg_values_supported"
        case issuesIssuerParameter = "authorization_response_iss_parameter_supported"
        case scopesSupported = "scopes_supported"
        case source = "x_credentialvault_source"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        issuer = try container.decode(String.self, forKey: .issuer)
        tokenEndpoint = try container.decode(URL.self, forKey: .tokenEndpoint)
        authorizationEndpoint = try container.decodeIfPresent(URL.self, forKey: .authorizationEndpoint)
        revocationEndpoint = try container.decodeIfPresent(URL.self, forKey: .revocationEndpoint)
        deviceAuthorizationEndpoint = try container.decodeIfPresent(URL.self, forKey: .deviceAuthorizationEndpoint)
        jwksURI = try container.decodeIfPresent(URL.self, forKey: .jwksURI)
        guestEndpoint = try container.decodeIfPresent(URL.self, forKey: .guestEndpoint)
        guestConversionEndpoint = try container.decodeIfPresent(URL.self, forKey: .guestConversionEndpoint)
        deviceAPIEndpoint = try container.decodeIfPresent(URL.self, forKey: .deviceAPIEndpoint)
        codeChallengeMethods = try container.decodeIfPresent([String].self, forKey: .codeChallengeMethods) ?? []
        idTokenSigningAlgorithms = try container.decodeIfPresent([String].self, forKey: .idTokenSigningAlgorithms) ?? []
        scopesSupported = try container.decodeIfPresent([String].self, forKey: .scopesSupported) ?? []
        issuesIssuerParameter = try container.decodeIfPresent(Bool.self, forKey: .issuesIssuerParameter) ?? false
        source = try container.decodeIfPresent(Source.self, forKey: .source) ?? .explicit
    }

    /// The endpoints, by metadata member name, for checking and for messages.
    var endpoints: [(field: String, url: URL?)] {
        [
            ("token_endpoint", tokenEndpoint), ("authorization_endpoint", authorizationEndpoint),
            ("revocation_endpoint", revocationEndpoint), ("device_authorization_endpoint", deviceAuthorizationEndpoint),
            ("jwks_uri", jwksURI), ("guest_endpoint", guestEndpoint), ("guest_conversion_endpoint", guestConversionEndpoint),
            ("device_api_endpoint", deviceAPIEndpoint),
        ]
    }

    /// Throws if an endpoint would carry a credential off this machine in plain HTTP.
    public func checkEndpoints() throws(SignInError) {
        for (field, url) in endpoints {
            if let url, let reason = EndpointRule.violation(url) {
                throw .insecureEndpoint(field: field, reason: reason)
            }
        }
    }

    /// The stored form: compact JSON with the RFC's member names, keys sorted.
    public func encoded() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Reads the stored form back; nil when it is not metadata.
    public static func decoded(_ text: String) -> ProviderMetadata? {
        try? JSONDecoder().decode(ProviderMetadata.self, from: Data(text.utf8))
    }
}

extension ProviderMetadata {
    /// Members a provider publishes, read leniently: a member of the wrong type is an error
    /// naming it; a URL member that is not an absolute URL is too; unknown members are ignored.
    init(document data: Data, source: Source) throws(SignInError) {
        guard data.count <= TokenResponse.maximumBodySize else {
            throw .discoveryFailed(issuer: "", reason: "the document is larger than \(TokenResponse.maximumBodySize) bytes")
        }
        let object: [String: Any]
        do {
            guard let parsed = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw SignInError.discoveryFailed(issuer: "", reason: "the document is not a JSON object")
            }
            object = parsed
        } catch let error as SignInError {
            throw error
        } catch {
            throw .discoveryFailed(issuer: "", reason: "the document is not JSON")
        }
        func string(_ name: String) throws(SignInError) -> String? {
            switch object[name] {
            case nil, is NSNull: return nil
            case let value as String: return value
            default: throw .discoveryFailed(issuer: "", reason: "\(name) is not a string")
            }
        }
        func url(_ name: String) throws(SignInError) -> URL? {
            guard let text = try string(name) else { return nil }
            guard let url = URL(string: text), url.scheme != nil, url.host != nil else {
                throw .discoveryFailed(issuer: "", reason: "\(name) is not an absolute URL")
            }
            return url
        }
        func strings(_ name: String) throws(SignInError) -> [String] {
            switch object[name] {
            case nil, is NSNull: return []
            case let values as [Any]:
                let strings = values.compactMap { $0 as? String }
                guard strings.count == values.count else { throw .discoveryFailed(issuer: "", reason: "\(name) is not an array of strings") }
                return strings
            default: throw .discoveryFailed(issuer: "", reason: "\(name) is not an array")
            }
        }
        guard let issuer = try string("issuer"), !issuer.isEmpty else { throw .discoveryFailed(issuer: "", reason: "the document has no issuer") }
        guard let token = try url("token_endpoint") else { throw .missingMetadata(field: "token_endpoint") }
        self.init(
            issuer: issuer, tokenEndpoint: token, authorizationEndpoint: try url("authorization_endpoint"),
            revocationEndpoint: try url("revocation_endpoint"), deviceAuthorizationEndpoint: try url("device_authorization_endpoint"),
            jwksURI: try url("jwks_uri"), guestEndpoint: try url("guest_endpoint"),
            guestConversionEndpoint: try url("guest_conversion_endpoint"),
            codeChallengeMethods: try strings("code_challenge_methods_supported"),
            idTokenSigningAlgorithms: try strings("id_token_signing_alg_values_supported"),
            issuesIssuerParameter: (object["authorization_response_iss_parameter_supported"] as? Bool) ?? false,
            source: source)
        scopesSupported = try strings("scopes_supported")
        deviceAPIEndpoint = try url("device_api_endpoint")
    }
}
