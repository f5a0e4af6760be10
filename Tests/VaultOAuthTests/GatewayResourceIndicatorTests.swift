import Crypto
import DevGateway
import Foundation
import JWTKit
import Testing
import VaultOAuth

/// Per-resource access tokens at the dev gateway (RFC 8707 resource indicators, RFC 9068 JWT
/// access tokens), spoken to over plain HTTP on loopback as the vault's refresh would.
@Suite("Resource indicators at the dev gateway")
struct GatewayResourceIndicatorTests {
    static let client = "vault-cli"
    static let grantScope = "openid profile files.read mail.read"

    @Test("a refresh with one resource returns an at+jwt for it, signed by a key in the JWKS, with the narrowed scope")
    func oneResourceGivesSignedJWT() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            let files = gateway.resourceServer(named: "files")

            let response = try await wire.refresh(try grant.requiredRefreshToken, resources: [files], scope: "files.read")
            #expect(response.status == 200)
            let tokens = try TokenResponse.parse(response.body)
            #expect(tokens.scope == "files.read")
            #expect(tokens.refreshToken != nil && tokens.refreshToken != grant.refreshToken)

            let jws = try CompactJWS(tokens.accessToken)
            #expect(jws.header["typ"] as? String == "at+jwt")
            #expect(jws.header["kid"] as? String == (await gateway.publishedKeyIDs()).last)
            #expect(jws.payload["aud"] as? String == files, "one resource: aud is a string")

            let claims = try await wire.publishedKeys().verify(tokens.accessToken, as: AccessTokenPayload.self)
            #expect(claims.iss == gateway.issuer)
            #expect(claims.sub == "alice" && claims.clientID == Self.client)
            #expect(claims.aud.value == [files])
            #expect(claims.scope == "files.read")
            #expect(claims.exp - claims.iat == tokens.expiresIn)
            #expect(!claims.jti.isEmpty)

            let stats = await gateway.stats()
            #expect(stats.resourceTokenRequests == 1 && stats.invalidTargetRefusals == 0)
        }
    }

    @Test("two resources give an array aud; the token works at both resource servers, and revoking it ends the grant")
    func twoResourcesGiveArrayAudience() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            let files = gateway.resourceServer(named: "files")
            let mail = gateway.resourceServer(named: "mail")

            let response = try await wire.refresh(try grant.requiredRefreshToken, resources: [files, mail, files])
            #expect(response.status == 200)
            let tokens = try TokenResponse.parse(response.body)
            #expect(tokens.scope == Self.grantScope, "no scope asked: the grant's")
            #expect(try CompactJWS(tokens.accessToken).payload["aud"] as? [String] == [files, mail], "each resource once, in order")
            let claims = try await wire.publishedKeys().verify(tokens.accessToken, as: AccessTokenPayload.self)
            #expect(claims.aud.value == [files, mail])

            #expect(try await wire.whoAmI("files", token: tokens.accessToken).status == 200)
            let atMail = try await wire.whoAmI("mail", token: tokens.accessToken)
            #expect(atMail.status == 200)
            #expect(try atMail.jsonBody()["aud"] as? [String] == [files, mail])
            #expect(try await wire.profile(token: tokens.accessToken).status == 401, "neither resource is …/api")

            // Revoking the JWT access token (RFC 7009) ends its grant, as for any access token.
            let revoked = try await wire.post(
                gateway.revocationEndpoint,
                form: [("token", tokens.accessToken), ("token_type_hint", "access_token"), ("client_id", Self.client)])
            #expect(revoked.status == 200)
            #expect(try await wire.whoAmI("files", token: tokens.accessToken).status == 401)
            #expect(try await wire.refresh(try #require(tokens.refreshToken), resources: [files]).oauthErrorCode == "invalid_grant")
        }
    }

    @Test("an unknown, fragment or relative resource is invalid_target and spends nothing; setResourceServers changes what is served")
    func badResourcesAreInvalidTarget() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            let refreshToken = try grant.requiredRefreshToken
            let files = gateway.resourceServer(named: "files")

            for resource in [gateway.resourceServer(named: "photos"), files + "#inbox", "/rs/files", files + "/"] {
                let refused = try await wire.refresh(refreshToken, resources: [resource])
                #expect(refused.status == 400, "\(resource)")
                #expect(refused.oauthErrorCode == "invalid_target", "\(resource)")
            }
            let mixed = try await wire.refresh(refreshToken, resources: [files, gateway.resourceServer(named: "photos")])
            #expect(mixed.oauthErrorCode == "invalid_target", "one bad resource refuses the request")
            var stats = await gateway.stats()
            #expect(stats.invalidTargetRefusals == 5 && stats.resourceTokenRequests == 5 && stats.reuseDetections == 0)

            // The refresh token was never spent: it still refreshes, for a newly served resource.
            let photos = gateway.resourceServer(named: "photos")
            await gateway.setResourceServers([photos, photos + "#top", "rs/photos"])
            let served = try await wire.refresh(refreshToken, resources: [photos])
            #expect(served.status == 200)
            let tokens = try TokenResponse.parse(served.body)
            let next = try #require(tokens.refreshToken)
            #expect(try await wire.whoAmI("photos", token: tokens.accessToken).status == 200)
            for resource in [photos + "#top", "rs/photos"] {
                let refused = try await wire.refresh(next, resources: [resource])
                #expect(refused.oauthErrorCode == "invalid_target", "listed, but not an absolute URI without a fragment: \(resource)")
            }
            let nowUnknown = try await wire.refresh(next, resources: [files])
            #expect(nowUnknown.oauthErrorCode == "invalid_target", "files is no longer served")
            let gone = try await wire.whoAmI("files", token: tokens.accessToken)
            #expect(gone.status == 404 && gone.oauthErrorCode == "not_found")
            stats = await gateway.stats()
            #expect(stats.invalidTargetRefusals == 8)
        }
    }

    @Test("a scope wider than the grant is invalid_scope and spends nothing; a narrower one is granted")
    func widerScopeIsInvalidScope() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            let refreshToken = try grant.requiredRefreshToken
            let files = gateway.resourceServer(named: "files")

            let wider = try await wire.refresh(refreshToken, resources: [files], scope: "files.read files.write")
            #expect(wider.status == 400 && wider.oauthErrorCode == "invalid_scope")
            let narrowed = try await wire.refresh(refreshToken, resources: [files], scope: "files.read")
            #expect(narrowed.status == 200, "the refused request spent nothing")
        }
    }

    @Test("a resource refresh rotates the refresh token; the old one is then reuse, which revokes the family and its resource token")
    func rotationAndReuseDetection() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            let original = try grant.requiredRefreshToken
            let files = gateway.resourceServer(named: "files")

            let first = try TokenResponse.parse(try await wire.refresh(original, resources: [files]).body)
            let rotated = try #require(first.refreshToken)
            #expect(rotated != original)
            #expect(try await wire.whoAmI("files", token: first.accessToken).status == 200)

            let reused = try await wire.refresh(original, resources: [files])
            #expect(reused.status == 400 && reused.oauthErrorCode == "invalid_grant")
            #expect(await gateway.reuseDetections() == 1)
            #expect(try await wire.refresh(rotated, resources: [files]).oauthErrorCode == "invalid_grant", "the whole family is revoked")
            #expect(try await wire.whoAmI("files", token: first.accessToken).status == 401, "and so is its resource token")
        }
    }

    @Test("a files token works at /rs/files/whoami only: /rs/mail and /api/profile refuse it, as does invalidation")
    func audienceRestrictsResourceServers() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            let files = gateway.resourceServer(named: "files")
            let tokens = try TokenResponse.parse(
                try await wire.refresh(try grant.requiredRefreshToken, resources: [files], scope: "files.read").body)

            let atFiles = try await wire.whoAmI("files", token: tokens.accessToken)
            #expect(atFiles.status == 200)
            let body = try atFiles.jsonBody()
            #expect(body["sub"] as? String == "alice" && body["client_id"] as? String == Self.client)
            #expect(body["scope"] as? String == "files.read" && body["aud"] as? [String] == [files])

            for refused in [try await wire.whoAmI("mail", token: tokens.accessToken), try await wire.profile(token: tokens.accessToken)] {
                #expect(refused.status == 401 && refused.oauthErrorCode == "invalid_token")
                #expect(refused.headers["WWW-Authenticate"]?.contains(#"error="invalid_token""#) == true)
            }
            #expect(try await wire.whoAmI("files", token: grant.accessToken).status == 401, "a token without an audience is refused there")
            #expect(try await wire.whoAmI("files", token: nil).status == 401)

            await gateway.invalidateAccessTokens(subject: "alice")
            #expect(try await wire.whoAmI("files", token: tokens.accessToken).status == 401)
            let stats = await gateway.stats()
            #expect(stats.resourceRequests == 6 && stats.resourceRefusals == 5)
        }
    }

    @Test("ignoring resource indicators (the admin fault) gives aud …/api whatever was asked, until the faults are reset")
    func ignoredIndicatorsGiveAPIAudience() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            let files = gateway.resourceServer(named: "files")
            #expect(try await wire.admin("admin/faults/resource-indicators", #"{"ignore": true}"#).status == 204)

            let asked = try await wire.refresh(try grant.requiredRefreshToken, resources: [files, gateway.resourceServer(named: "photos")])
            #expect(asked.status == 200, "nothing is checked, so an unknown resource is no invalid_target")
            let tokens = try TokenResponse.parse(asked.body)
            let claims = try await wire.publishedKeys().verify(tokens.accessToken, as: AccessTokenPayload.self)
            #expect(claims.aud.value == [gateway.apiResource])
            #expect(gateway.apiResource == gateway.baseURL.absoluteString + "/api")
            #expect(try await wire.profile(token: tokens.accessToken).status == 200)
            #expect(try await wire.whoAmI("files", token: tokens.accessToken).status == 401)

            await gateway.resetFaults()
            let honoured = try await wire.refresh(try #require(tokens.refreshToken), resources: [files])
            #expect(try await wire.publishedKeys().verify(honoured.accessTokenValue(), as: AccessTokenPayload.self).aud.value == [files])
        }
    }

    @Test("the opaque format gives a non-JWT token that still works at its /rs endpoint only")
    func opaqueFormatKeepsTheAudience() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)
            await gateway.setResourceTokenFormat(.opaque)

            let response = try await wire.refresh(try grant.requiredRefreshToken, resources: [gateway.resourceServer(named: "files")])
            #expect(response.status == 200)
            let token = try response.accessTokenValue()
            #expect(token.split(separator: ".").count == 1, "not a JWS")
            #expect(try await wire.whoAmI("files", token: token).status == 200)
            #expect(try await wire.whoAmI("mail", token: token).status == 401)
            #expect(try await wire.profile(token: token).status == 401)
        }
    }

    @Test("a refresh without resource is unchanged: an opaque token without audience, good at /api/profile, refused at /rs")
    func refreshWithoutResourceIsUnchanged() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            let grant = await gateway.issueGrant(subject: "alice", clientID: Self.client, scope: Self.grantScope)

            let response = try await wire.refresh(try grant.requiredRefreshToken, resources: [])
            #expect(response.status == 200)
            let tokens = try TokenResponse.parse(response.body)
            #expect(tokens.accessToken.hasPrefix("at_") && !tokens.accessToken.contains("."))
            #expect(tokens.scope == Self.grantScope)
            let profile = try await wire.profile(token: tokens.accessToken)
            #expect(profile.status == 200)
            #expect(try profile.jsonBody()["sub"] as? String == "alice")
            #expect(try await wire.whoAmI("files", token: tokens.accessToken).status == 401)
            #expect(await gateway.stats().resourceTokenRequests == 0)
        }
    }

    @Test("an authorization-code redemption with resource gets the same at+jwt; an unknown resource leaves the code unspent")
    func codeRedemptionWithResource() async throws {
        try await withGateway { gateway in
            let wire = ResourceWire(gateway: gateway)
            await gateway.registerClient(id: "vault-app")
            await gateway.signInBrowserUser("alice")
            let verifier = ResourceWire.base64URL(Data((0..<32).map { _ in UInt8.random(in: 0...255) }))
            let challenge = ResourceWire.base64URL(Data(SHA256.hash(data: Data(verifier.utf8))))
            let redirect = "http://127.0.0.1:53117/callback"
            let authorize = try #require(
                URL(
                    string: gateway.authorizationEndpoint.absoluteString + "?"
                        + ResourceWire.formEncode([
                            ("response_type", "code"), ("client_id", "vault-app"), ("redirect_uri", redirect),
                            ("scope", "openid files.read"), ("code_challenge", challenge), ("code_challenge_method", "S256"),
                        ])))
            let location = try #require(try await wire.get(authorize).headers["Location"])
            let code = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)
            let form = [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect), ("code_verifier", verifier),
                ("client_id", "vault-app"),
            ]
            let files = gateway.resourceServer(named: "files")

            let unknown = try await wire.post(gateway.tokenEndpoint, form: form + [("resource", files + "/x")])
            #expect(unknown.oauthErrorCode == "invalid_target")
            let redeemed = try await wire.post(gateway.tokenEndpoint, form: form + [("resource", files)])
            #expect(redeemed.status == 200, "the refused attempt did not spend the code")
            let tokens = try TokenResponse.parse(redeemed.body)
            #expect(try CompactJWS(tokens.accessToken).header["typ"] as? String == "at+jwt")
            let claims = try await wire.publishedKeys().verify(tokens.accessToken, as: AccessTokenPayload.self)
            #expect(claims.aud.value == [files] && claims.sub == "alice" && claims.clientID == "vault-app")
            #expect(tokens.idToken != nil, "the ID token is still there")
            #expect(try await wire.whoAmI("files", token: tokens.accessToken).status == 200)
        }
    }
}

// MARK: - Helpers

/// Plain HTTP to the gateway's token endpoint and resource servers, as the vault sends it.
private struct ResourceWire {
    let gateway: DevGateway
    let transport = NIOTransport(timeout: scaled(.seconds(10)))

    func get(_ url: URL, bearer token: String? = nil) async throws -> VaultOAuth.HTTPResponse {
        var headers: HTTPHeaderFields = [:]
        if let token { headers.append(name: "Authorization", value: "Bearer \(token)") }
        return try await transport.send(HTTPRequest(method: .get, url: url, headers: headers))
    }

    func post(_ url: URL, form: [(String, String)]) async throws -> VaultOAuth.HTTPResponse {
        try await transport.send(
            HTTPRequest(
                method: .post, url: url, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(Self.formEncode(form).utf8)))
    }

    func admin(_ path: String, _ json: String) async throws -> VaultOAuth.HTTPResponse {
        try await transport.send(
            HTTPRequest(
                method: .post, url: gateway.baseURL.appendingPathComponent(path),
                headers: ["Content-Type": "application/json"], body: Data(json.utf8)))
    }

    /// `grant_type=refresh_token` for the public client, one `resource` parameter per resource.
    func refresh(_ refreshToken: String, resources: [String], scope: String? = nil) async throws -> VaultOAuth.HTTPResponse {
        var form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", GatewayResourceIndicatorTests.client)]
        form += resources.map { ("resource", $0) }
        if let scope { form.append(("scope", scope)) }
        return try await post(gateway.tokenEndpoint, form: form)
    }

    func whoAmI(_ server: String, token: String?) async throws -> VaultOAuth.HTTPResponse {
        try await get(gateway.baseURL.appendingPathComponent("rs/\(server)/whoami"), bearer: token)
    }

    func profile(token: String) async throws -> VaultOAuth.HTTPResponse {
        try await get(gateway.baseURL.appendingPathComponent("api/profile"), bearer: token)
    }

    /// The JWKS, fetched over HTTP, as a JWTKit key collection.
    func publishedKeys() async throws -> JWTKeyCollection {
        let jwks = try await get(gateway.jwksURL)
        return try await JWTKeyCollection().add(jwksJSON: String(decoding: jwks.body, as: UTF8.self))
    }

    static func formEncode(_ fields: [(String, String)]) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        return fields.map { name, value in
            "\(name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")=\(value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")"
        }.joined(separator: "&")
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension VaultOAuth.HTTPResponse {
    fileprivate func jsonBody() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
    }

    /// The OAuth `error` of a JSON error body, if any.
    fileprivate var oauthErrorCode: String? { (try? jsonBody())?["error"] as? String }

    /// The `access_token` of a token response.
    fileprivate func accessTokenValue() throws -> String {
        try TokenResponse.parse(body).accessToken
    }
}

/// A compact JWS's header and payload, decoded without checking the signature (JWTKit does
/// that), to see the JSON shapes as sent.
private struct CompactJWS {
    let header: [String: Any]
    let payload: [String: Any]

    init(_ token: String) throws {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        header = try Self.decodeJSON(parts[0])
        payload = try Self.decodeJSON(parts[1])
    }

    private static func decodeJSON(_ part: Substring) throws -> [String: Any] {
        var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let data = try #require(Data(base64Encoded: base64))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

/// The RFC 9068 claims the tests read; the signature is checked by JWTKit, the claims by the tests.
private struct AccessTokenPayload: JWTPayload {
    let iss: String
    let sub: String
    let aud: AudienceClaim
    let clientID: String
    let scope: String
    let iat: Int
    let exp: Int
    let jti: String

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud
        case clientID = "client_id"
        case scope, iat, exp, jti
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
