import FlyingFox
import Foundation
import Logging

// MARK: - Client credentials grant (RFC 6749 §4.4) and its clients

extension DevGateway {
    nonisolated static var clientCredentialsRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /admin/service-clients") { gateway, request in
                await gateway.handleRegisterServiceClient(body: body(of: request))
            },
            GatewayRoute(route: "POST /admin/service-clients/:client_id/keys") { gateway, request in
                let clientID = request.routeParameters["client_id"].flatMap { $0.removingPercentEncoding } ?? ""
                return await gateway.handleSetServiceClientKeys(clientID: clientID, body: body(of: request))
            },
        ]
    }

    /// The grant type of the client credentials grant.
    static let clientCredentialsGrantType = "client_credentials"

    /// The scopes a service client may ask for when its registration names none.
    public static let defaultServiceClientScopes = ["files.read", "mail.read"]

    /// Registers (or replaces) a client of the client credentials grant: a service that gets
    /// access tokens for itself, authenticating with `authentication` only, at the token and
    /// revocation endpoints. It may ask for any of `scopes` (a request without `scope` gets
    /// them all) and for the gateway's resources (RFC 8707); its access tokens last
    /// `accessTokenLifetime`. Throws when a scope is empty or has a space, or when the keys of
    /// ``ServiceClientAuthentication/privateKeyJWT(jwks:)`` are not public EC P-256 keys.
    ///
    /// The id then authenticates with this method only, even if ``registerClient(id:secret:)``
    /// or ``issueGrant(subject:clientID:clientSecret:scope:accessTokenLifetime:rotatesRefreshTokens:)``
    /// registered it too.
    ///
    /// ```swift
    /// try await gateway.registerServiceClient(
    ///     id: "indexer", authentication: .privateKeyJWT(jwks: Data(key.publicJWK.utf8)), scopes: ["files.read"])
    /// ```
    public func registerServiceClient(
        id: String,
        authentication: ServiceClientAuthentication,
        scopes: [String] = DevGateway.defaultServiceClientScopes,
        accessTokenLifetime: Duration = .seconds(3600)
    ) throws(DevGatewayError) {
        let credential: ServiceClientRegistry.Credential
        switch authentication {
        case .clientSecretBasic(let secret): credential = .clientSecretBasic(secret)
        case .clientSecretPost(let secret): credential = .clientSecretPost(secret)
        case .privateKeyJWT(let jwks): credential = .privateKeyJWT(try ClientAssertionKey.keys(fromJWKS: jwks, clientID: id))
        }
        try register(id: id, credential: credential, scopes: scopes, accessTokenLifetime: accessTokenLifetime)
    }

    /// Replaces the public keys of a `private_key_jwt` service client (`jwks` as for
    /// ``ServiceClientAuthentication/privateKeyJWT(jwks:)``): assertions signed by a key no
    /// longer in the set are refused from now on. A key rollover registers the old and the new
    /// key, then the new one only. Throws for a client that is not registered with
    /// `private_key_jwt`, or keys that are not public EC P-256 keys.
    ///
    /// ```swift
    /// try await gateway.setServiceClientKeys(id: "indexer", jwks: Data(#"{"keys": [\#(old), \#(new)]}"#.utf8))
    /// try await gateway.setServiceClientKeys(id: "indexer", jwks: Data(new.utf8))
    /// ```
    public func setServiceClientKeys(id: String, jwks: Data) throws(DevGatewayError) {
        try replaceKeys(of: id, with: try ClientAssertionKey.keys(fromJWKS: jwks, clientID: id))
    }

    private func register(
        id: String, credential: ServiceClientRegistry.Credential, scopes: [String], accessTokenLifetime: Duration
    ) throws(DevGatewayError) {
        guard !id.isEmpty else { throw DevGatewayError(message: "a service client needs a non-empty client id") }
        guard !scopes.isEmpty, scopes.allSatisfy({ !$0.isEmpty && !$0.contains(" ") }) else {
            throw DevGatewayError(message: "the scopes of client \(id) must be one or more words without spaces")
        }
        guard accessTokenLifetime >= .zero else {
            throw DevGatewayError(message: "the access token lifetime of client \(id) must not be negative")
        }
        state.serviceClients.register(
            id: id, client: ServiceClientRegistry.Client(credential: credential, scopes: scopes, accessTokenLifetime: accessTokenLifetime))
        logger.debug(
            "service client registered",
            metadata: ["gateway.client_id": "\(id)", "gateway.auth_method": "\(credential.method.rawValue)", "gateway.scopes": "\(scopes)"])
    }

    private func replaceKeys(of id: String, with keys: [ClientAssertionKey]) throws(DevGatewayError) {
        guard state.serviceClients.replaceKeys(of: id, with: keys) else {
            throw DevGatewayError(message: "client \(id) is not a service client registered with private_key_jwt")
        }
        logger.debug("service client keys replaced", metadata: ["gateway.client_id": "\(id)", "gateway.keys": "\(keys.count)"])
    }

    // MARK: - The grant

    /// `grant_type=client_credentials` (RFC 6749 §4.4.2) for an authenticated client: an access
    /// token for the client itself, no refresh token (§4.4.3). `scope` must be a subset of the
    /// registered scopes (none: all of them); `resource` is honoured as on refresh (RFC 8707).
    /// With `dpopThumbprint` (the request's DPoP proof) the token is bound to that key.
    func grantClientCredentials(
        _ parameters: FormBody, clientID: String, dpopThumbprint: String?, metadata: inout Logger.Metadata
    ) -> Result<IssuedTokens, OAuthRejection> {
        guard let client = state.serviceClients.clients[clientID] else {
            return .failure(.unauthorizedClient("client \(clientID) is not registered for the client credentials grant"))
        }
        var scope = client.scopes
        if let requested = parameters["scope"] {
            var words: [String] = []
            for word in requested.split(separator: " ").map(String.init) where !words.contains(word) { words.append(word) }
            guard !words.isEmpty, words.allSatisfy({ client.scopes.contains($0) }) else {
                return .failure(.invalidScope("the requested scope is not within the scopes registered for client \(clientID)"))
            }
            scope = words
        }
        let audiences: [String]
        switch requestedAudiences(parameters) {
        case .success(let value): audiences = value
        case .failure(let rejection): return .failure(rejection)
        }
        if !audiences.isEmpty { metadata["gateway.audiences"] = "\(audiences)" }
        let tokens = state.tokens.issueClientCredentials(
            clientID: clientID, scope: scope.joined(separator: " "), accessTokenLifetime: client.accessTokenLifetime,
            audiences: audiences, now: signInNow(), dpopThumbprint: dpopThumbprint)
        state.stats.clientCredentialsGrants += 1
        return .success(tokens)
    }

    // MARK: - Admin

    /// `POST /admin/service-clients`: like ``registerServiceClient(id:authentication:scopes:accessTokenLifetime:)``.
    func handleRegisterServiceClient(body: Data) -> HTTPResponse {
        guard let registration = AdminJSON.decode(AdminJSON.ServiceClient.self, from: body) else {
            return AdminJSON.badRequest
        }
        let id = registration.clientID
        let scopes = registration.scope.map { $0.split(separator: " ").map(String.init) } ?? Self.defaultServiceClientScopes
        do throws(DevGatewayError) {
            let credential: ServiceClientRegistry.Credential
            switch (registration.method, registration.clientSecret, registration.jwks) {
            case (.clientSecretBasic, let secret?, nil): credential = .clientSecretBasic(secret)
            case (.clientSecretPost, let secret?, nil): credential = .clientSecretPost(secret)
            case (.privateKeyJWT, nil, let jwks?): credential = .privateKeyJWT(try ClientAssertionKey.keys(from: jwks.documents, clientID: id))
            case (.privateKeyJWT, _, _):
                throw DevGatewayError(message: "private_key_jwt needs jwks and no client_secret")
            case (.clientSecretBasic, _, _), (.clientSecretPost, _, _):
                throw DevGatewayError(message: "\(registration.method.rawValue) needs client_secret and no jwks")
            case (.none, _, _):
                throw DevGatewayError(message: "a service client cannot be public: use client_secret_basic, client_secret_post or private_key_jwt")
            }
            try register(
                id: id, credential: credential, scopes: scopes, accessTokenLifetime: .seconds(registration.accessTokenLifetime ?? 3600))
        } catch {
            return AdminJSON.badRequest(error.message)
        }
        return .json(
            AdminJSON.ServiceClientRegistered(clientID: id, method: registration.method, scope: scopes.joined(separator: " ")), status: 201)
    }

    /// `POST /admin/service-clients/{client_id}/keys`: like ``setServiceClientKeys(id:jwks:)``.
    func handleSetServiceClientKeys(clientID: String, body: Data) -> HTTPResponse {
        guard let request = AdminJSON.decode(AdminJSON.ServiceClientKeys.self, from: body) else {
            return AdminJSON.badRequest
        }
        guard case .privateKeyJWT = state.serviceClients.clients[clientID]?.credential else {
            return .json(
                GatewayJSON.Failure(error: "not_found", errorDescription: "no service client \(clientID) registered with private_key_jwt"),
                status: 404)
        }
        do throws(DevGatewayError) {
            try replaceKeys(of: clientID, with: try ClientAssertionKey.keys(from: request.jwks.documents, clientID: clientID))
        } catch {
            return AdminJSON.badRequest(error.message)
        }
        return .empty(status: 204)
    }
}

extension AdminJSON {
    /// A service client, in RFC 7591 §2 names.
    struct ServiceClient: Decodable {
        let clientID: String
        let method: ClientAuthenticationMethod
        let clientSecret: String?
        let jwks: JWKInput?
        /// Space-separated.
        let scope: String?
        let accessTokenLifetime: Int?

        enum CodingKeys: String, CodingKey {
            case clientID = "client_id", method = "token_endpoint_auth_method", clientSecret = "client_secret", jwks, scope
            case accessTokenLifetime = "access_token_lifetime"
        }
    }

    /// The answer to a registration; never the secret.
    struct ServiceClientRegistered: Encodable {
        let clientID: String
        let method: ClientAuthenticationMethod
        let scope: String
        let grantTypes = [DevGateway.clientCredentialsGrantType]

        enum CodingKeys: String, CodingKey {
            case clientID = "client_id", method = "token_endpoint_auth_method", scope, grantTypes = "grant_types"
        }
    }

    struct ServiceClientKeys: Decodable {
        let jwks: JWKInput
    }

    /// 400 `invalid_request` that says what is wrong with the admin request.
    static func badRequest(_ description: String) -> HTTPResponse {
        .json(GatewayJSON.Failure(error: "invalid_request", errorDescription: description), status: 400)
    }
}
