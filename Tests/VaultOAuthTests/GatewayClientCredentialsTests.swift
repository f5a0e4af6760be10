import DevGateway
import Foundation
import JWTKit
import Logging
import Testing
import VaultOAuth
import VaultSync

/// The client credentials grant at the dev gateway (RFC 6749 §4.4) with each client
/// authentication method: HTTP Basic, a secret in the body, and a signed client assertion
/// (RFC 7523 §2.2). Spoken to over plain HTTP on loopback; the form bodies, Basic headers and
/// assertions are made here, not by the vault's client.
@Suite("Client credentials at the dev gateway")
struct GatewayClientCredentialsTests {
    static let secret = "made up s3cr3t+/&=%"

    /// The three methods, for the tests every method must pass.
    enum Method: String, CaseIterable, CustomTestStringConvertible {
        case basic, post, privateKeyJWT

        var testDescription: String { rawValue }
    }

    @Test("each method gets a token for the client itself: no refresh token, accepted at /api/profile, revoked the same way", arguments: Method.allCases)
    func eachMethodGetsAToken(_ method: Method) async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(method, id: "svc-\(method.rawValue)", lifetime: .seconds(900))

            let response = try await wire.grant(try await client.proof())
            #expect(response.status == 200)
            let body = try response.json()
            #expect(body["refresh_token"] == nil, "RFC 6749 §4.4.3: no refresh token")
            #expect(body["id_token"] == nil, "no user, so no ID token")
            #expect(body["token_type"] as? String == "Bearer")
            #expect(body["expires_in"] as? Int == 900, "the lifetime the client was registered with")
            #expect(body["scope"] as? String == DevGateway.defaultServiceClientScopes.joined(separator: " "))
            let token = try #require(body["access_token"] as? String)

            let profile = try await wire.profile(token: token)
            #expect(profile.status == 200)
            let owner = try profile.json()
            #expect(owner["sub"] as? String == client.id, "RFC 9068 §2.2: the client is the subject")
            #expect(owner["client_id"] as? String == client.id)

            // OpenID Connect Core §9: the token endpoint is the audience at the revocation endpoint too.
            let misaddressed = try await wire.revoke(token, try await client.proof(audience: wire.gateway.revocationEndpoint.absoluteString))
            if method == .privateKeyJWT { #expect(misaddressed.status == 401, "an assertion naming the revocation endpoint is refused") }
            let revoked = try await wire.revoke(token, try await client.proof(audience: wire.gateway.tokenEndpoint.absoluteString))
            #expect(revoked.status == 200)
            #expect(try await wire.profile(token: token).status == 401, "revoked")

            let stats = await wire.gateway.stats()
            #expect(stats.clientCredentialsGrants == 1)
            #expect(stats.refusedClientAuthentications == (method == .privateKeyJWT ? ["private_key_jwt": 1] : [:]))
        }
    }

    @Test("a wrong secret is invalid_client; only the Basic attempt is answered with a Basic challenge")
    func wrongSecretIsInvalidClient() async throws {
        try await withServiceGateway { wire in
            let basic = try await wire.register(.basic, id: "svc-basic")
            let post = try await wire.register(.post, id: "svc-post")

            let viaBasic = try await wire.grant(.basic(id: basic.id, secret: "not-the-secret"))
            #expect(viaBasic.status == 401 && viaBasic.oauthErrorCode == "invalid_client")
            #expect(viaBasic.headers["WWW-Authenticate"]?.hasPrefix("Basic") == true)

            let viaPost = try await wire.grant(.post(id: post.id, secret: "not-the-secret"))
            #expect(viaPost.status == 401 && viaPost.oauthErrorCode == "invalid_client")
            #expect(viaPost.headers["WWW-Authenticate"] == nil)

            let stats = await wire.gateway.stats()
            #expect(stats.refusedClientAuthentications == ["client_secret_basic": 1, "client_secret_post": 1])
            #expect(stats.clientCredentialsGrants == 0)
        }
    }

    @Test("a client must use the method it registered: its secret sent another way is refused")
    func registeredMethodIsEnforced() async throws {
        try await withServiceGateway { wire in
            let basic = try await wire.register(.basic, id: "svc-basic")
            let post = try await wire.register(.post, id: "svc-post")
            let signed = try await wire.register(.privateKeyJWT, id: "svc-jwt")

            let postClientViaBasic = try await wire.grant(.basic(id: post.id, secret: Self.secret))
            #expect(postClientViaBasic.status == 401 && postClientViaBasic.oauthErrorCode == "invalid_client")
            let hint = try postClientViaBasic.json()["error_description"] as? String
            #expect(hint?.contains("must authenticate with client_secret_post") == true, "the refusal names the registered method")
            let basicClientViaPost = try await wire.grant(.post(id: basic.id, secret: Self.secret))
            #expect(basicClientViaPost.status == 401 && basicClientViaPost.oauthErrorCode == "invalid_client")
            let basicClientWithoutSecret = try await wire.grant(.publicClient(id: basic.id))
            #expect(basicClientWithoutSecret.oauthErrorCode == "invalid_client")
            let signedClientViaBasic = try await wire.grant(.basic(id: signed.id, secret: Self.secret))
            #expect(signedClientViaBasic.oauthErrorCode == "invalid_client")
            // Refused for the method, before any key is looked at.
            let assertion = try await wire.assertion(by: TestSigningKey(), for: post.id)
            #expect(try await wire.grant(.assertion(clientID: post.id, assertion)).oauthErrorCode == "invalid_client")

            // Two methods at once are refused even with good credentials.
            let both = try await wire.grant(.basicAndPost(id: basic.id, secret: Self.secret))
            #expect(both.oauthErrorCode == "invalid_client")

            #expect(await wire.gateway.stats().clientCredentialsGrants == 0)
            #expect(try await wire.grant(try await basic.proof()).status == 200, "the right method still works")
        }
    }

    @Test("an assertion signed by a key not registered for the client is refused, with or without a kid")
    func unregisteredKeyIsRefused() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.privateKeyJWT, id: "svc-jwt")
            let claims = TestAssertionClaims.valid(for: client.id, at: wire.now, audience: wire.tokenAudience)
            let stranger = TestSigningKey()

            for assertion in [
                try await stranger.assertion(claims),
                try await stranger.assertion(claims, withKid: false),
                // The registered key's kid on a stranger's signature.
                try await stranger.assertion(claims, kid: try #require(client.key).kid),
            ] {
                let refused = try await wire.grant(.assertion(clientID: client.id, assertion))
                #expect(refused.status == 401 && refused.oauthErrorCode == "invalid_client")
                #expect(refused.headers["WWW-Authenticate"] == nil)
            }
            // Signed by the registered key but without a kid: every registered key is tried.
            let withoutKid = try await wire.grant(.assertion(clientID: client.id, try await #require(client.key).assertion(claims, withKid: false)))
            #expect(withoutKid.status == 200)

            let stats = await wire.gateway.stats()
            #expect(stats.refusedClientAuthentications == ["private_key_jwt": 3])
        }
    }

    @Test("aud must name the token endpoint or the issuer; another audience is refused")
    func audienceIsChecked() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.privateKeyJWT, id: "svc-jwt")
            let key = try #require(client.key)
            let base = wire.gateway.baseURL.absoluteString

            for audience in [base + "/oauth/token/", base + "/api", "https://elsewhere.example/oauth/token", client.id] {
                let claims = TestAssertionClaims.valid(for: client.id, at: wire.now, audience: audience)
                let refused = try await wire.grant(.assertion(clientID: client.id, try await key.assertion(claims)))
                #expect(refused.oauthErrorCode == "invalid_client", "aud \(audience)")
            }
            for audience in [wire.tokenAudience, wire.gateway.issuer] {
                let claims = TestAssertionClaims.valid(for: client.id, at: wire.now, audience: audience)
                #expect(try await wire.grant(.assertion(clientID: client.id, try await key.assertion(claims))).status == 200, "aud \(audience)")
            }
            var both = TestAssertionClaims.valid(for: client.id, at: wire.now, audience: "https://elsewhere.example")
            both.aud = AudienceClaim(value: ["https://elsewhere.example", wire.tokenAudience])
            #expect(try await wire.grant(.assertion(clientID: client.id, try await key.assertion(both))).status == 200, "an array that contains it")

            // iss and sub must both be the client, and client_id in the body must agree.
            var otherSubject = TestAssertionClaims.valid(for: client.id, at: wire.now, audience: wire.tokenAudience)
            otherSubject.sub = "someone-else"
            #expect(try await wire.grant(.assertion(clientID: client.id, try await key.assertion(otherSubject))).oauthErrorCode == "invalid_client")
            let good = try await wire.assertion(by: key, for: client.id)
            #expect(try await wire.grant(.assertion(clientID: "svc-other", good)).oauthErrorCode == "invalid_client")
            #expect(try await wire.grant(.assertion(clientID: nil, good)).status == 200, "client_id is optional: the sub names the client")
        }
    }

    @Test("an expired assertion, one valid for over 10 minutes or issued in the future is refused; 60 s of skew is allowed")
    func assertionTimesAreChecked() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.privateKeyJWT, id: "svc-jwt")
            let key = try #require(client.key)
            let issued = wire.now

            let minute = try await key.assertion(.valid(for: client.id, at: issued, audience: wire.tokenAudience))
            wire.advance(by: 119)  // exp was 60 s after issue: 59 s past it is within the skew
            let late = try await key.assertion(.valid(for: client.id, at: issued, audience: wire.tokenAudience))
            #expect(try await wire.grant(.assertion(clientID: client.id, late)).status == 200, "within the skew")
            wire.advance(by: 2)
            let expired = try await wire.grant(.assertion(clientID: client.id, minute))
            #expect(expired.status == 401 && expired.oauthErrorCode == "invalid_client")

            var tooLong = TestAssertionClaims.valid(for: client.id, at: wire.now, audience: wire.tokenAudience)
            tooLong.exp = try #require(tooLong.iat) + 601
            #expect(try await wire.grant(.assertion(clientID: client.id, try await key.assertion(tooLong))).oauthErrorCode == "invalid_client")

            let future = TestAssertionClaims.valid(for: client.id, at: wire.now.addingTimeInterval(120), audience: wire.tokenAudience)
            #expect(try await wire.grant(.assertion(clientID: client.id, try await key.assertion(future))).oauthErrorCode == "invalid_client")

            var noJTI = TestAssertionClaims.valid(for: client.id, at: wire.now, audience: wire.tokenAudience)
            noJTI.jti = nil
            #expect(try await wire.grant(.assertion(clientID: client.id, try await key.assertion(noJTI))).oauthErrorCode == "invalid_client")

            #expect(await wire.gateway.stats().refusedClientAuthentications == ["private_key_jwt": 4])
        }
    }

    @Test("an assertion is accepted once: sent again it is refused and counted, while a new one works")
    func replayedAssertionIsRefused() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.privateKeyJWT, id: "svc-jwt")
            let key = try #require(client.key)
            let assertion = try await wire.assertion(by: key, for: client.id)

            #expect(try await wire.grant(.assertion(clientID: client.id, assertion)).status == 200)
            let replayed = try await wire.grant(.assertion(clientID: client.id, assertion))
            #expect(replayed.status == 401 && replayed.oauthErrorCode == "invalid_client")
            // Spent at the token endpoint, it does not authenticate a revocation either.
            #expect(try await wire.revoke("at_unknown", .assertion(clientID: client.id, assertion)).oauthErrorCode == "invalid_client")

            var stats = await wire.gateway.stats()
            #expect(stats.replayedClientAssertions == 2)
            #expect(stats.refusedClientAuthentications == ["private_key_jwt": 2])
            #expect(stats.clientCredentialsGrants == 1)

            #expect(try await wire.grant(try await client.proof()).status == 200, "a new assertion (new jti) works")
            stats = await wire.gateway.stats()
            #expect(stats.clientCredentialsGrants == 2)
        }
    }

    @Test("an injected 503 answers the grant and spends nothing: the same assertion works afterwards")
    func faultsApplyAndSpendNothing() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.privateKeyJWT, id: "svc-jwt")
            let assertion = try await wire.assertion(by: #require(client.key), for: client.id)
            await wire.gateway.failNextTokenRequests(with: TokenFault(status: 503, retryAfter: 2))

            let failed = try await wire.grant(.assertion(clientID: client.id, assertion))
            #expect(failed.status == 503 && failed.headers["Retry-After"] == "2")
            #expect(try await wire.grant(.assertion(clientID: client.id, assertion)).status == 200)
            #expect(await wire.gateway.stats().replayedClientAssertions == 0)
        }
    }

    @Test("a client not registered for the grant is unauthorized_client; an unknown one is invalid_client")
    func unregisteredClientIsUnauthorized() async throws {
        try await withServiceGateway { wire in
            await wire.gateway.registerClient(id: "web-app", secret: Self.secret)
            await wire.gateway.registerClient(id: "vault-cli")

            let confidential = try await wire.grant(.basic(id: "web-app", secret: Self.secret))
            #expect(confidential.status == 400 && confidential.oauthErrorCode == "unauthorized_client")
            let publicClient = try await wire.grant(.publicClient(id: "vault-cli"))
            #expect(publicClient.status == 400 && publicClient.oauthErrorCode == "unauthorized_client")

            let unknown = try await wire.grant(.basic(id: "nobody", secret: Self.secret))
            #expect(unknown.status == 401 && unknown.oauthErrorCode == "invalid_client")
            let unknownAssertion = try await wire.assertion(by: TestSigningKey(), for: "nobody")
            #expect(try await wire.grant(.assertion(clientID: nil, unknownAssertion)).oauthErrorCode == "invalid_client")
            #expect(await wire.gateway.stats().clientCredentialsGrants == 0)
        }
    }

    @Test("scope must stay within the registration: a subset is granted, anything else is invalid_scope")
    func scopeIsLimitedToRegistration() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.basic, id: "svc-basic", scopes: ["files.read", "files.write"])

            let narrowed = try await wire.grant(try await client.proof(), scope: "files.write")
            #expect(narrowed.status == 200)
            let token = try #require(try narrowed.json()["access_token"] as? String)
            #expect(try narrowed.json()["scope"] as? String == "files.write")
            #expect(try await wire.profile(token: token).json()["scope"] as? String == "files.write")

            for scope in ["files.read mail.read", "openid", ""] {
                let refused = try await wire.grant(try await client.proof(), scope: scope)
                #expect(refused.status == 400 && refused.oauthErrorCode == "invalid_scope", "scope \(scope)")
            }
            #expect(await wire.gateway.stats().clientCredentialsGrants == 1)
        }
    }

    @Test("resource gives an at+jwt for it with sub and client_id the client; an unknown resource is invalid_target")
    func resourceIndicatorsAreHonoured() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.privateKeyJWT, id: "svc-jwt", scopes: ["files.read"])
            let files = wire.gateway.resourceServer(named: "files")

            let response = try await wire.grant(try await client.proof(), resources: [files])
            #expect(response.status == 200)
            let token = try #require(try response.json()["access_token"] as? String)
            let jwks = try await wire.get(wire.gateway.jwksURL)
            let keys = try await JWTKeyCollection().add(jwksJSON: String(decoding: jwks.body, as: UTF8.self))
            let claims = try await keys.verify(token, as: IssuedAccessToken.self)
            #expect(claims.aud.value == [files])
            #expect(claims.sub == client.id && claims.clientID == client.id)
            #expect(claims.scope == "files.read")

            let whoAmI = try await wire.get(wire.gateway.baseURL.appendingPathComponent("rs/files/whoami"), bearer: token)
            #expect(whoAmI.status == 200)
            #expect(try whoAmI.json()["sub"] as? String == client.id)
            #expect(try await wire.profile(token: token).status == 401, "a files token is not for /api")

            let unknown = try await wire.grant(try await client.proof(), resources: [wire.gateway.resourceServer(named: "photos")])
            #expect(unknown.status == 400 && unknown.oauthErrorCode == "invalid_target")
            let stats = await wire.gateway.stats()
            #expect(stats.invalidTargetRefusals == 1 && stats.clientCredentialsGrants == 1)

            await wire.gateway.ignoreResourceIndicators(true)
            let ignored = try await wire.grant(try await client.proof(), resources: [wire.gateway.resourceServer(named: "photos")])
            let ignoredToken = try #require(try ignored.json()["access_token"] as? String)
            #expect(try await keys.verify(ignoredToken, as: IssuedAccessToken.self).aud.value == [wire.gateway.apiResource])
        }
    }

    @Test("key rollover: old and new keys both work, then the old one is refused once only the new one is registered")
    func keyRollover() async throws {
        try await withServiceGateway { wire in
            let client = try await wire.register(.privateKeyJWT, id: "svc-jwt")
            let old = try #require(client.key)
            let new = TestSigningKey()
            func grant(signedBy key: TestSigningKey) async throws -> Int {
                let assertion = try await wire.assertion(by: key, for: client.id)
                return try await wire.grant(.assertion(clientID: client.id, assertion)).status
            }
            #expect(try await grant(signedBy: new) == 401, "not registered yet")

            try await wire.gateway.setServiceClientKeys(id: client.id, jwks: Data(#"{"keys": [\#(old.publicJWK), \#(new.publicJWK)]}"#.utf8))
            #expect(try await grant(signedBy: old) == 200)
            #expect(try await grant(signedBy: new) == 200)

            try await wire.gateway.setServiceClientKeys(id: client.id, jwks: Data(new.publicJWK.utf8))
            #expect(try await grant(signedBy: old) == 401, "the old key is retired")
            #expect(try await grant(signedBy: new) == 200)

            await #expect(throws: DevGatewayError.self) {
                try await wire.gateway.setServiceClientKeys(id: client.id, jwks: Data(#"{"keys": []}"#.utf8))
            }
            await #expect(throws: DevGatewayError.self, "a secret client has no keys to replace") {
                _ = try await wire.register(.basic, id: "svc-basic")
                try await wire.gateway.setServiceClientKeys(id: "svc-basic", jwks: Data(new.publicJWK.utf8))
            }
            #expect(try await grant(signedBy: new) == 200, "a refused replacement changes nothing")
        }
    }

    @Test("another process registers a private_key_jwt client and rolls its key over the admin API")
    func adminRouteRegistersClient() async throws {
        try await withServiceGateway { wire in
            let key = TestSigningKey()
            let created = try await wire.admin(
                "admin/service-clients",
                #"{"client_id": "indexer", "token_endpoint_auth_method": "private_key_jwt", "jwks": \#(key.publicJWK), "scope": "files.read", "access_token_lifetime": 120}"#
            )
            #expect(created.status == 201)
            let registered = try created.json()
            #expect(registered["client_id"] as? String == "indexer" && registered["token_endpoint_auth_method"] as? String == "private_key_jwt")
            #expect(registered["scope"] as? String == "files.read")

            let granted = try await wire.grant(.assertion(clientID: "indexer", try await wire.assertion(by: key, for: "indexer")))
            #expect(granted.status == 200)
            #expect(try granted.json()["expires_in"] as? Int == 120)
            #expect(try granted.json()["scope"] as? String == "files.read")

            let next = TestSigningKey()
            let rolled = try await wire.admin("admin/service-clients/indexer/keys", #"{"jwks": {"keys": [\#(next.publicJWK)]}}"#)
            #expect(rolled.status == 204)
            let retired = try await wire.assertion(by: key, for: "indexer")
            #expect(try await wire.grant(.assertion(clientID: "indexer", retired)).oauthErrorCode == "invalid_client")
            let current = try await wire.assertion(by: next, for: "indexer")
            #expect(try await wire.grant(.assertion(clientID: "indexer", current)).status == 200)

            // A secret client over the same route; and what is refused, with a reason.
            let post = try await wire.admin(
                "admin/service-clients", #"{"client_id": "backup", "token_endpoint_auth_method": "client_secret_post", "client_secret": "pw"}"#)
            #expect(post.status == 201)
            #expect(try await wire.grant(.post(id: "backup", secret: "pw")).status == 200)
            #expect(!String(decoding: post.body, as: UTF8.self).contains("pw"), "the secret is not echoed")

            let privateHalf = key.publicJWK.replacingOccurrences(of: #""kty""#, with: #""d": "AAAA", "kty""#)
            for (body, reason) in [
                (#"{"client_id": "x", "token_endpoint_auth_method": "private_key_jwt", "jwks": \#(privateHalf)}"#, "private"),
                (#"{"client_id": "x", "token_endpoint_auth_method": "private_key_jwt", "jwks": {"kty": "RSA", "n": "AQAB", "e": "AQAB"}}"#, "EC P-256"),
                (#"{"client_id": "x", "token_endpoint_auth_method": "client_secret_basic"}"#, "client_secret"),
                (#"{"client_id": "x", "token_endpoint_auth_method": "none"}"#, "public"),
            ] {
                let refusedRegistration = try await wire.admin("admin/service-clients", body)
                #expect(refusedRegistration.status == 400, "\(reason)")
                #expect((try refusedRegistration.json()["error_description"] as? String)?.contains(reason) == true, "\(reason)")
            }
            #expect(try await wire.admin("admin/service-clients/nobody/keys", #"{"jwks": \#(next.publicJWK)}"#).status == 404)
        }
    }

    @Test("discovery publishes the grant, the four authentication methods and ES256 for assertions")
    func discoveryPublishesMethods() async throws {
        try await withServiceGateway { wire in
            let metadata = try await wire.get(wire.gateway.openIDConfigurationURL).json()
            #expect((metadata["grant_types_supported"] as? [String])?.contains("client_credentials") == true)
            let methods = ["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]
            #expect(metadata["token_endpoint_auth_methods_supported"] as? [String] == methods)
            #expect(metadata["revocation_endpoint_auth_methods_supported"] as? [String] == methods)
            #expect(metadata["token_endpoint_auth_signing_alg_values_supported"] as? [String] == ["ES256"])
            #expect(metadata["revocation_endpoint_auth_signing_alg_values_supported"] as? [String] == ["ES256"])
            #expect(metadata["token_endpoint"] as? String == wire.tokenAudience, "the aud an assertion names, exactly")
        }
    }

    @Test("no secret or assertion appears in the gateway's log or its error descriptions")
    func secretsStayOutOfLogs() async throws {
        let capture = LogCapture()
        try await withServiceGateway(logger: capture.logger(label: "test.gateway")) { wire in
            let basic = try await wire.register(.basic, id: "svc-basic")
            let signed = try await wire.register(.privateKeyJWT, id: "svc-jwt")
            let assertion = try await wire.assertion(by: #require(signed.key), for: signed.id)
            var bodies: [Data] = []
            bodies.append(try await wire.grant(.basic(id: basic.id, secret: Self.secret)).body)
            bodies.append(try await wire.grant(.post(id: basic.id, secret: Self.secret)).body)
            bodies.append(try await wire.grant(.assertion(clientID: signed.id, assertion)).body)
            bodies.append(try await wire.grant(.assertion(clientID: signed.id, assertion)).body)
            bodies.append(try await wire.grant(.assertion(clientID: basic.id, assertion)).body)

            let signature = try #require(assertion.split(separator: ".").last.map(String.init))
            let texts = capture.capturedLines + bodies.map { String(decoding: $0, as: UTF8.self) }
            #expect(!capture.capturedLines.isEmpty)
            for text in texts {
                #expect(!text.contains(Self.secret) && !text.contains("s3cr3t"))
                #expect(!text.contains(signature))
            }
        }
    }
}

// MARK: - Helpers

/// Runs `body` with a gateway whose clock stands still until the test moves it.
private func withServiceGateway(
    logger: Logger = Logger(label: "test.gateway") { _ in SwiftLogNoOpLogHandler() },
    _ body: (ServiceWire) async throws -> Void
) async throws {
    try await withGateway(logger: logger) { gateway in
        let wire = ServiceWire(gateway: gateway)
        let clock = wire.clock
        await gateway.setClock { clock.withLock { $0 } }
        try await body(wire)
    }
}

/// Plain HTTP to the gateway, as a service would send it, and the gateway's clock.
private struct ServiceWire {
    let gateway: DevGateway
    let transport = NIOTransport(timeout: scaled(.seconds(10)))
    let clock = Locked(Date(timeIntervalSince1970: 1_900_000_000))

    var now: Date { clock.withLock { $0 } }

    func advance(by seconds: TimeInterval) {
        clock.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// The token endpoint as discovery publishes it: the `aud` of an assertion.
    var tokenAudience: String { gateway.tokenEndpoint.absoluteString }

    /// A good assertion signed by `key` for `clientID`: issued now, for the token endpoint.
    func assertion(by key: TestSigningKey, for clientID: String) async throws -> String {
        try await key.assertion(.valid(for: clientID, at: now, audience: tokenAudience))
    }

    /// A client registered with `method`, its secret ``GatewayClientCredentialsTests/secret``
    /// or a new key.
    func register(
        _ method: GatewayClientCredentialsTests.Method, id: String, scopes: [String] = DevGateway.defaultServiceClientScopes,
        lifetime: Duration = .seconds(3600)
    ) async throws -> ServiceClient {
        let client = ServiceClient(wire: self, id: id, method: method, key: method == .privateKeyJWT ? TestSigningKey() : nil)
        let authentication: ServiceClientAuthentication =
            switch method {
            case .basic: .clientSecretBasic(GatewayClientCredentialsTests.secret)
            case .post: .clientSecretPost(GatewayClientCredentialsTests.secret)
            case .privateKeyJWT: .privateKeyJWT(jwks: Data(try #require(client.key).publicJWK.utf8))
            }
        try await gateway.registerServiceClient(id: id, authentication: authentication, scopes: scopes, accessTokenLifetime: lifetime)
        return client
    }

    func grant(_ proof: ClientProof, scope: String? = nil, resources: [String] = []) async throws -> VaultOAuth.HTTPResponse {
        var form = [("grant_type", "client_credentials")]
        if let scope { form.append(("scope", scope)) }
        form += resources.map { ("resource", $0) }
        return try await post(gateway.tokenEndpoint, form: form, proof: proof)
    }

    func revoke(_ token: String, _ proof: ClientProof) async throws -> VaultOAuth.HTTPResponse {
        try await post(gateway.revocationEndpoint, form: [("token", token), ("token_type_hint", "access_token")], proof: proof)
    }

    func post(_ url: URL, form: [(String, String)], proof: ClientProof) async throws -> VaultOAuth.HTTPResponse {
        var headers: HTTPHeaderFields = ["Content-Type": "application/x-www-form-urlencoded"]
        if let authorization = proof.authorization { headers.append(name: "Authorization", value: authorization) }
        let body = Self.formEncode(form + proof.formFields)
        return try await transport.send(HTTPRequest(method: .post, url: url, headers: headers, body: Data(body.utf8)))
    }

    func get(_ url: URL, bearer token: String? = nil) async throws -> VaultOAuth.HTTPResponse {
        var headers: HTTPHeaderFields = [:]
        if let token { headers.append(name: "Authorization", value: "Bearer \(token)") }
        return try await transport.send(HTTPRequest(method: .get, url: url, headers: headers))
    }

    func profile(token: String) async throws -> VaultOAuth.HTTPResponse {
        try await get(gateway.baseURL.appendingPathComponent("api/profile"), bearer: token)
    }

    func admin(_ path: String, _ json: String) async throws -> VaultOAuth.HTTPResponse {
        try await transport.send(
            HTTPRequest(
                method: .post, url: gateway.baseURL.appendingPathComponent(path), headers: ["Content-Type": "application/json"],
                body: Data(json.utf8)))
    }

    /// `application/x-www-form-urlencoded` (RFC 6749 Appendix B), made with Foundation.
    static func formEncode(_ fields: [(String, String)]) -> String {
        fields.map { "\(formComponent($0))=\(formComponent($1))" }.joined(separator: "&")
    }

    static func formComponent(_ text: String) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~ ")
        return (text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "").replacingOccurrences(of: " ", with: "+")
    }
}

/// A registered client and how it proves who it is.
private struct ServiceClient {
    let wire: ServiceWire
    let id: String
    let method: GatewayClientCredentialsTests.Method
    let key: TestSigningKey?

    /// Good credentials for one request: a new assertion (for `audience`) each time.
    func proof(audience: String? = nil) async throws -> ClientProof {
        switch method {
        case .basic: return .basic(id: id, secret: GatewayClientCredentialsTests.secret)
        case .post: return .post(id: id, secret: GatewayClientCredentialsTests.secret)
        case .privateKeyJWT:
            let claims = TestAssertionClaims.valid(for: id, at: wire.now, audience: audience ?? wire.tokenAudience)
            return .assertion(clientID: id, try await #require(key).assertion(claims))
        }
    }
}

/// Client authentication as a request carries it.
private enum ClientProof {
    case basic(id: String, secret: String)
    case post(id: String, secret: String)
    case assertion(clientID: String?, String)
    case publicClient(id: String)
    /// Basic and the secret in the body too: two methods.
    case basicAndPost(id: String, secret: String)

    /// RFC 6749 §2.3.1: each half form-encoded, then base64.
    var authorization: String? {
        switch self {
        case .basic(let id, let secret), .basicAndPost(let id, let secret):
            let pair = ServiceWire.formComponent(id) + ":" + ServiceWire.formComponent(secret)
            return "Basic " + Data(pair.utf8).base64EncodedString()
        case .post, .assertion, .publicClient:
            return nil
        }
    }

    var formFields: [(String, String)] {
        switch self {
        case .basic: []
        case .post(let id, let secret), .basicAndPost(let id, let secret): [("client_id", id), ("client_secret", secret)]
        case .assertion(let clientID, let assertion):
            (clientID.map { [("client_id", $0)] } ?? [])
                + [("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"), ("client_assertion", assertion)]
        case .publicClient(let id): [("client_id", id)]
        }
    }
}

/// A client's P-256 key, made here with JWTKit; its public JWK is what the gateway registers.
private struct TestSigningKey {
    let key = ES256PrivateKey()
    let kid = "key-" + UUID().uuidString.lowercased()

    /// `{"kty":"EC","crv":"P-256","x","y","kid","alg":"ES256","use":"sig"}`, as the vault prints one.
    var publicJWK: String {
        let point = key.publicKey.parameters
        return #"{"kty":"EC","crv":"P-256","x":"\#(point?.x ?? "")","y":"\#(point?.y ?? "")","kid":"\#(kid)","alg":"ES256","use":"sig"}"#
    }

    /// `claims` signed with ES256, the header naming `kid` (this key's unless given), or no kid.
    func assertion(_ claims: TestAssertionClaims, withKid: Bool = true, kid: String? = nil) async throws -> String {
        let collection = JWTKeyCollection()
        if withKid {
            let identifier = JWKIdentifier(string: kid ?? self.kid)
            await collection.add(ecdsa: key, kid: identifier)
            return try await collection.sign(claims, kid: identifier)
        }
        await collection.add(ecdsa: key)
        return try await collection.sign(claims)
    }
}

/// The claims of a client assertion (RFC 7523 §3); any may be left out or made wrong.
private struct TestAssertionClaims: JWTPayload {
    var iss: String?
    var sub: String?
    var aud: AudienceClaim?
    var iat: Int?
    var exp: Int?
    var jti: String?

    /// Good claims for `clientID`, issued `now`, valid for a minute, a new `jti`.
    static func valid(for clientID: String, at now: Date, audience: String) -> Self {
        let iat = Int(now.timeIntervalSince1970)
        return Self(iss: clientID, sub: clientID, aud: AudienceClaim(value: [audience]), iat: iat, exp: iat + 60, jti: UUID().uuidString)
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The RFC 9068 claims of an access token the gateway issued.
private struct IssuedAccessToken: JWTPayload {
    let sub: String
    let aud: AudienceClaim
    let clientID: String
    let scope: String

    enum CodingKeys: String, CodingKey {
        case sub, aud
        case clientID = "client_id"
        case scope
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

extension VaultOAuth.HTTPResponse {
    fileprivate func json() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
    }

    /// The OAuth `error` of a JSON error body, if any.
    fileprivate var oauthErrorCode: String? { (try? json())?["error"] as? String }
}
