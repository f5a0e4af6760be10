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
    /// `userinfo_endpoint` (OpenID Connect Core §5.3): who signed in, when the grant brings no ID token.
    public var userinfoEndpoint: URL?
    /// `revocation_endpoint_auth_methods_supported` (RFC 8414 §2); empty when not published.
    /// Without `none` in it, a public client may be refused at the revocation endpoint.
    public var revocationEndpointAuthMethods: [String] = []
    /// `introspection_endpoint` (RFC 8414 §2, RFC 7662): where a grant is checked without
    /// refreshing it (``OAuthClient/introspect(token:hint:endpoint:client:pins:deadline:)``).
    public var introspectionEndpoint: URL?
    /// Where the metadata came from: the first document that answered (discovery merges the
    /// OpenID Connect document with the RFC 8414 ones).
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
        case userinfoEndpoint = "userinfo_endpoint"
        case revocationEndpointAuthMethods = "revocation_endpoint_auth_methods_supported"
        case introspectionEndpoint = "introspection_endpoint"
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
        userinfoEndpoint = try container.decodeIfPresent(URL.self, forKey: .userinfoEndpoint)
        revocationEndpointAuthMethods = try container.decodeIfPresent([String].self, forKey: .revocationEndpointAuthMethods) ?? []
        introspectionEndpoint = try container.decodeIfPresent(URL.self, forKey: .introspectionEndpoint)
        source = try container.decodeIfPresent(Source.self, forKey: .source) ?? .explicit
    }

    /// The endpoints, by metadata member name, for checking and for messages.
    var endpoints: [(field: String, url: URL?)] {
        [
            ("token_endpoint", tokenEndpoint), ("authorization_endpoint", authorizationEndpoint),
            ("revocation_endpoint", revocationEndpoint), ("device_authorization_endpoint", deviceAuthorizationEndpoint),
            ("jwks_uri", jwksURI), ("guest_endpoint", guestEndpoint), ("guest_conversion_endpoint", guestConversionEndpoint),
            ("device_api_endpoint", deviceAPIEndpoint), ("userinfo_endpoint", userinfoEndpoint),
            ("introspection_endpoint", introspectionEndpoint),
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

/// One metadata document as published: every member optional, so documents can be merged
/// before the token endpoint is required.
struct MetadataDocument: Sendable {
    var source: ProviderMetadata.Source
    var issuer: String
    /// The endpoint members present, by member name.
    var endpoints: [String: URL] = [:]
    /// The list members present, by member name.
    var lists: [String: [String]] = [:]
    var issuesIssuerParameter: Bool?

    static let endpointMembers = [
        "token_endpoint", "authorization_endpoint", "revocation_endpoint", "device_authorization_endpoint", "jwks_uri",
        "guest_endpoint", "guest_conversion_endpoint", "device_api_endpoint", "userinfo_endpoint", "introspection_endpoint",
    ]
    static let listMembers = [
        "code_challenge_methods_supported", "id_token_signing_alg_values_supported", "scopes_supported",
        "revocation_endpoint_auth_methods_supported",
    ]

    /// Members a provider publishes, read leniently: a member of the wrong type is an error
    /// naming it; a URL member that is not an absolute URL is too; unknown members are ignored.
    init(_ data: Data, source: ProviderMetadata.Source) throws(SignInError) {
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
        guard let issuer = try string("issuer"), !issuer.isEmpty else { throw .discoveryFailed(issuer: "", reason: "the document has no issuer") }
        self.source = source
        self.issuer = issuer
        for name in Self.endpointMembers {
            guard let text = try string(name) else { continue }
            guard let url = URL(string: text), url.scheme != nil, url.host != nil else {
                throw .discoveryFailed(issuer: "", reason: "\(name) is not an absolute URL")
            }
            endpoints[name] = url
        }
        for name in Self.listMembers {
            switch object[name] {
            case nil, is NSNull: continue
            case let values as [Any]:
                let strings = values.compactMap { $0 as? String }
                guard strings.count == values.count else { throw .discoveryFailed(issuer: "", reason: "\(name) is not an array of strings") }
                lists[name] = strings
            default: throw .discoveryFailed(issuer: "", reason: "\(name) is not an array")
            }
        }
        issuesIssuerParameter = object["authorization_response_iss_parameter_supported"] as? Bool
    }
}

extension ProviderMetadata {
    /// One provider's documents as one: each endpoint from whichever document has it, each list
    /// from the first that has it. Two documents naming different URLs for one endpoint are
    /// refused (one of them is not the provider's, or it is misconfigured: either way no
    /// credential should follow it). The caller has checked every document's issuer.
    init(merging documents: [MetadataDocument]) throws(SignInError) {
        guard let first = documents.first else { throw .discoveryFailed(issuer: "", reason: "no document") }
        var endpoints: [String: (url: URL, source: Source)] = [:]
        var lists: [String: [String]] = [:]
        for document in documents {
            for (name, url) in document.endpoints {
                if let held = endpoints[name], held.url != url {
                    throw .metadataConflict(
                        field: name, first: "\(held.source.rawValue): \(held.url.absoluteString)",
                        second: "\(document.source.rawValue): \(url.absoluteString)")
                }
                endpoints[name] = endpoints[name] ?? (url, document.source)
            }
            for (name, values) in document.lists where lists[name] == nil { lists[name] = values }
        }
        guard let token = endpoints["token_endpoint"]?.url else { throw .missingMetadata(field: "token_endpoint") }
        self.init(
            issuer: first.issuer, tokenEndpoint: token, authorizationEndpoint: endpoints["authorization_endpoint"]?.url,
            revocationEndpoint: endpoints["revocation_endpoint"]?.url,
            deviceAuthorizationEndpoint: endpoints["device_authorization_endpoint"]?.url,
            jwksURI: endpoints["jwks_uri"]?.url, guestEndpoint: endpoints["guest_endpoint"]?.url,
            guestConversionEndpoint: endpoints["guest_conversion_endpoint"]?.url,
            codeChallengeMethods: lists["code_challenge_methods_supported"] ?? [],
            idTokenSigningAlgorithms: lists["id_token_signing_alg_values_supported"] ?? [],
            issuesIssuerParameter: documents.contains { $0.issuesIssuerParameter == true }, source: first.source)
        scopesSupported = lists["scopes_supported"] ?? []
        revocationEndpointAuthMethods = lists["revocation_endpoint_auth_methods_supported"] ?? []
        deviceAPIEndpoint = endpoints["device_api_endpoint"]?.url
        userinfoEndpoint = endpoints["userinfo_endpoint"]?.url
        introspectionEndpoint = endpoints["introspection_endpoint"]?.url
    }

    /// One document read alone (tests, and a stored form's checks).
    init(document data: Data, source: Source) throws(SignInError) {
        try self.init(merging: [MetadataDocument(data, source: source)])
    }
}
