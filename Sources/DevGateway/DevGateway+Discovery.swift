import FlyingFox
import Foundation

// MARK: - Discovery (OpenID Connect Discovery 1.0 §4, RFC 8414 §3)

extension DevGateway {
    nonisolated static var discoveryRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "GET /.well-known/openid-configuration") { gateway, _ in
                await gateway.discoveryResponse(openIDConfiguration: true)
            },
            GatewayRoute(route: "GET /.well-known/oauth-authorization-server") { gateway, _ in
                await gateway.discoveryResponse(openIDConfiguration: false)
            },
            GatewayRoute(route: "POST /admin/discovery") { gateway, request in
                let data = await body(of: request)
                guard
                    let settings = data.isEmpty
                        ? AdminJSON.Discovery(openIDConfiguration: nil, issuer: nil, omit: nil)
                        : AdminJSON.decode(AdminJSON.Discovery.self, from: data)
                else {
                    return AdminJSON.badRequest
                }
                await gateway.setDiscovery(
                    DiscoverySettings(
                        openIDConfiguration: settings.openIDConfiguration ?? true, issuer: settings.issuer, omit: Set(settings.omit ?? [])))
                return .empty(status: 204)
            },
        ]
    }

    /// `GET` the OpenID Provider metadata here.
    public nonisolated var openIDConfigurationURL: URL { baseURL.appendingPathComponent(".well-known/openid-configuration") }
    /// `GET` the RFC 8414 authorization server metadata here (the same document).
    public nonisolated var authorizationServerMetadataURL: URL {
        baseURL.appendingPathComponent(".well-known/oauth-authorization-server")
    }

    /// Changes what discovery publishes: the OpenID document can 404, the issuer can be another
    /// one, fields can be left out. `DiscoverySettings()` restores the defaults.
    ///
    /// ```swift
    /// await gateway.setDiscovery(DiscoverySettings(issuer: "https://elsewhere.example"))
    /// ```
    public func setDiscovery(_ settings: DiscoverySettings) {
        state.signIn.discovery = settings
    }

    func discoveryResponse(openIDConfiguration: Bool) -> HTTPResponse {
        let settings = state.signIn.discovery
        if openIDConfiguration, !settings.openIDConfiguration {
            return .json(
                GatewayJSON.Failure(error: "not_found", errorDescription: "this gateway publishes RFC 8414 metadata only"),
                status: 404)
        }
        var metadata = discoveryMetadata()
        if let issuer = settings.issuer { metadata["issuer"] = .string(issuer) }
        for field in settings.omit { metadata[field] = nil }
        if openIDConfiguration {
            for field in settings.omitFromOpenID { metadata[field] = nil }
        } else {
            for (field, value) in settings.authorizationServerOverrides { metadata[field] = .string(value) }
        }
        return .json(metadata)
    }

    /// The client authentication methods of the token and revocation endpoints (RFC 8414 §2).
    nonisolated static var clientAuthenticationMethods: [String] {
        [ClientAuthenticationMethod.clientSecretBasic, .clientSecretPost, .privateKeyJWT, .none].map(\.rawValue)
    }

    /// Every field both documents publish.
    func discoveryMetadata() -> [String: GatewayJSON.MetadataValue] {
        func endpoint(_ path: String) -> GatewayJSON.MetadataValue { .string(baseURL.appendingPathComponent(path).absoluteString) }
        var metadata: [String: GatewayJSON.MetadataValue] = [
            "issuer": .string(issuer),
            "authorization_endpoint": endpoint("oauth/authorize"),
            "token_endpoint": endpoint("oauth/token"),
            "revocation_endpoint": endpoint("oauth/revoke"),
            "device_authorization_endpoint": endpoint("oauth/device_authorization"),
            "jwks_uri": endpoint("oauth/jwks"),
            "response_types_supported": .strings(["code"]),
            "response_modes_supported": .strings(["query"]),
            "grant_types_supported": .strings(
                ["authorization_code", "refresh_token", DeviceGrantLedger.grantType, Self.clientCredentialsGrantType]),
            "code_challenge_methods_supported": .strings(["S256"]),
            "subject_types_supported": .strings(["public"]),
            "id_token_signing_alg_values_supported": .strings(state.signingKeys.algorithms),
            "token_endpoint_auth_methods_supported": .strings(Self.clientAuthenticationMethods),
            "token_endpoint_auth_signing_alg_values_supported": .strings(["ES256"]),
            "revocation_endpoint_auth_methods_supported": .strings(Self.clientAuthenticationMethods),
            "revocation_endpoint_auth_signing_alg_values_supported": .strings(["ES256"]),
            "introspection_endpoint": endpoint("oauth/introspect"),
            "introspection_endpoint_auth_methods_supported": .strings(Self.clientAuthenticationMethods),
            "dpop_signing_alg_values_supported": .strings(DPoPProofVerifier.algorithms),
            "scopes_supported": .strings(["openid", "profile", "email", "offline_access"]),
            "claims_supported": .strings(["iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "nonce", "guest"]),
            "prompt_values_supported": .strings(["none", "login"]),
            "authorization_response_iss_parameter_supported": .bool(true),
            "guest_endpoint": endpoint("guest/register"),
            // The device and notification API (`devices`, `notifications`… under it): an extension member.
            "device_api_endpoint": .string(baseURL.absoluteString),
        ]
        if state.signIn.guestConversionEnabled {
            metadata["guest_conversion_endpoint"] = endpoint("guest/convert")
        }
        if state.signIn.userinfoEnabled {
            metadata["userinfo_endpoint"] = endpoint("userinfo")
        }
        return metadata
    }
}

extension GatewayJSON {
    /// A value in a metadata document.
    enum MetadataValue: Encodable, Sendable {
        case string(String)
        case strings([String])
        case bool(Bool)

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let value): try container.encode(value)
            case .strings(let values): try container.encode(values)
            case .bool(let value): try container.encode(value)
            }
        }
    }
}

extension AdminJSON {
    struct Discovery: Decodable {
        let openIDConfiguration: Bool?
        let issuer: String?
        let omit: [String]?

        enum CodingKeys: String, CodingKey {
            case openIDConfiguration = "openid_configuration"
            case issuer, omit
        }
    }
}
