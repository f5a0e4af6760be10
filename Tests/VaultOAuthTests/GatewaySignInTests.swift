import Crypto
import DevGateway
import Foundation
import JWTKit
import Testing
import VaultOAuth
import VaultSync
import VaultURLSession

/// The sign-in side of the dev gateway, spoken to over plain HTTP as any OIDC client would:
/// discovery, the JWKS and signed ID tokens, the authorization-code grant with PKCE, the device
/// grant, re-authentication, guests.
@Suite("Sign-in at the dev gateway")
struct GatewaySignInTests {
    @Test("both discovery documents publish the same endpoints; settings hide one, change the issuer, drop fields")
    func discovery() async throws {
        try await withGateway { gateway in
            let wire = Wire(gateway: gateway)
            let openID = try await wire.get(gateway.openIDConfigurationURL)
            #expect(openID.status == 200)
            let metadata = try openID.jsonObject()
            #expect(metadata["issuer"] as? String == gateway.baseURL.absoluteString)
            #expect(gateway.issuer.hasSuffix("/") == false)
            #expect(metadata["token_endpoint"] as? String == gateway.tokenEndpoint.absoluteString)
            #expect(metadata["revocation_endpoint"] as? String == gateway.revocationEndpoint.absoluteString)
            #expect(metadata["authorization_endpoint"] as? String == gateway.authorizationEndpoint.absoluteString)
            #expect(metadata["device_authorization_endpoint"] as? String == gateway.deviceAuthorizationEndpoint.absoluteString)
            #expect(metadata["jwks_uri"] as? String == gateway.jwksURL.absoluteString)
            #expect(metadata["guest_endpoint"] as? String == gateway.guestRegistrationEndpoint.absoluteString)
            #expect(metadata["guest_conversion_endpoint"] as? String == gateway.guestConversionEndpoint.absoluteString)
            #expect(metadata["code_challenge_methods_supported"] as? [String] == ["S256"])
            #expect(metadata["response_types_supported"] as? [String] == ["code"])
            #expect(metadata["id_token_signing_alg_values_supported"] as? [String] == ["ES256"])
            #expect((metadata["grant_types_supported"] as? [String])?.contains("urn:ietf:params:oauth:grant-type:device_code") == true)
            #expect(metadata["authorization_response_iss_parameter_supported"] as? Bool == true)

            let rfc8414 = try await wire.get(gateway.authorizationServerMetadataURL)
            #expect(rfc8414.status == 200)
            #expect(rfc8414.body == openID.body)

            let changed = try await wire.admin(
                "admin/discovery",
                #"{"openid_configuration": false, "issuer": "https://elsewhere.example", "omit": ["jwks_uri", "guest_endpoint"]}"#)
            #expect(changed.status == 204)
            #expect(try await wire.get(gateway.openIDConfigurationURL).status == 404)
            let fallback = try await wire.get(gateway.authorizationServerMetadataURL).jsonObject()
            #expect(fallback["issuer"] as? String == "https://elsewhere.example")
            #expect(fallback["jwks_uri"] == nil && fallback["guest_endpoint"] == nil)
            #expect(fallback["token_endpoint"] as? String == gateway.tokenEndpoint.absoluteString)

            await gateway.setDiscovery(DiscoverySettings())
            await gateway.setGuestConversion(enabled: false)
            let withoutConversion = try await wire.get(gateway.openIDConfigurationURL).jsonObject()
            #expect(withoutConversion["guest_conversion_endpoint"] == nil)
            #expect(withoutConversion["guest_endpoint"] != nil)
            #expect(try await wire.post(gateway.guestConversionEndpoint, form: [("guest_refresh_token", "x")]).status == 404)
        }
    }

    @Test("ID tokens verify with JWTKit against the published JWKS across rotations; a retired key no longer verifies")
    func jwksAndRotation() async throws {
        try await withGateway { gateway in
            let wire = Wire(gateway: gateway)
            let first = try #require(try await wire.get(gateway.jwksURL).jsonObject()["keys"] as? [[String: Any]])
            #expect(first.count == 1)
            let key = try #require(first.first)
            #expect(key["kty"] as? String == "EC" && key["crv"] as? String == "P-256")
            #expect(key["alg"] as? String == "ES256" && key["use"] as? String == "sig")
            #expect(key["kid"] as? String == (await gateway.publishedKeyIDs()).first)
            #expect(key["d"] == nil, "a private key part was published")

            let es256 = try #require(await gateway.issueGrant(subject: "alice", clientID: "vault-cli").idToken)
            let rotated = try await wire.admin("admin/keys/rotate", #"{"algorithm": "RS256"}"#)
            let rsaKID = try #require(try rotated.jsonObject()["kid"] as? String)
            let rs256 = try #require(await gateway.issueGrant(subject: "alice", clientID: "vault-cli").idToken)
            let edKID = await gateway.rotateSigningKey(algorithm: .eddsa)
            let eddsa = try #require(await gateway.issueGrant(subject: "alice", clientID: "vault-cli").idToken)

            #expect(try JWSParts(es256).header["alg"] as? String == "ES256")
            #expect(try JWSParts(rs256).header["alg"] as? String == "RS256")
            #expect(try JWSParts(rs256).header["kid"] as? String == rsaKID)
            #expect(try JWSParts(eddsa).header["kid"] as? String == edKID)
            #expect(try JWSParts(eddsa).header["typ"] as? String == "JWT")
            let algorithms = try await wire.get(gateway.openIDConfigurationURL).jsonObject()["id_token_signing_alg_values_supported"]
            #expect(algorithms as? [String] == ["ES256", "RS256", "EdDSA"])

            let keys = try await wire.publishedKeys()
            for token in [es256, rs256, eddsa] {
                let claims = try await keys.verify(token, as: SignedClaims.self)
                #expect(claims.iss == gateway.issuer)
                #expect(claims.sub == "alice" && claims.aud == "vault-cli" && claims.azp == "vault-cli")
                #expect(claims.exp - claims.iat == 600)
                #expect(claims.nonce == nil && claims.guest == nil)
            }

            await gateway.rotateSigningKey(retirePrevious: true)
            let remaining = try await wire.publishedKeys()
            await #expect(throws: (any Error).self) { _ = try await remaining.verify(eddsa, as: SignedClaims.self) }
            #expect(await gateway.publishedKeyIDs().count == 1)
        }
    }

    @Test("an authorization-code sign-in with PKCE: tokens once for the right verifier; a wrong verifier and a reused code are refused")
    func authorizationCodeWithPKCE() async throws {
        try await withGateway { gateway in
            let wire = Wire(gateway: gateway)
            await gateway.registerClient(id: "vault-app")
            let pkce = PKCE()
            let redirect = "http://127.0.0.1:53117/callback"

            // Nobody signed in: a page, never a redirect (the browser never comes back).
            let waiting = try await wire.authorize(client: "vault-app", redirect: redirect, challenge: pkce.challenge, extra: [])
            #expect(waiting.status == 200)
            #expect(waiting.headers["content-type"]?.hasPrefix("text/html") == true)
            #expect(waiting.headers["location"] == nil)

            // A redirect URI that is not loopback is shown an error, never redirected to.
            let foreign = try await wire.authorize(client: "vault-app", redirect: "http://evil.example/cb", challenge: pkce.challenge, extra: [])
            #expect(foreign.status == 400 && foreign.headers["location"] == nil)
            let unknown = try await wire.authorize(client: "nobody", redirect: redirect, challenge: pkce.challenge, extra: [])
            #expect(unknown.status == 400 && unknown.headers["location"] == nil)

            await gateway.signInBrowserUser("alice")
            let plain = try await wire.authorize(
                client: "vault-app", redirect: redirect, challenge: pkce.challenge,
                extra: [("code_challenge_method", "plain")])
            #expect(try plain.redirectQuery()["error"] == "invalid_request")

            let wrongTry = try await wire.authorize(client: "vault-app", redirect: redirect, challenge: pkce.challenge, extra: [("nonce", "n-1")])
            #expect(wrongTry.status == 302)
            let wrongCode = try #require(try wrongTry.redirectQuery()["code"])
            let wrong = try await wire.exchange(code: wrongCode, verifier: PKCE().verifier, client: "vault-app", redirect: redirect)
            #expect(wrong.status == 400)
            #expect(try wrong.jsonObject()["error"] as? String == "invalid_grant")

            let approved = try await wire.authorize(
                client: "vault-app", redirect: redirect + "?from=test", challenge: pkce.challenge,
                extra: [("nonce", "n-2"), ("state", "s+1 /x")])
            let query = try approved.redirectQuery()
            #expect(query["state"] == "s+1 /x")
            #expect(query["iss"] == gateway.issuer)
            #expect(query["from"] == "test")
            let code = try #require(query["code"])
            let mismatch = try await wire.exchange(code: code, verifier: pkce.verifier, client: "vault-app", redirect: redirect)
            #expect(try mismatch.jsonObject()["error"] as? String == "invalid_grant", "redirect_uri differs, and the attempt spends the code")

            let fresh = try await wire.authorize(client: "vault-app", redirect: redirect, challenge: pkce.challenge, extra: [("nonce", "n-3")])
            let freshCode = try #require(try fresh.redirectQuery()["code"])
            let granted = try await wire.exchange(code: freshCode, verifier: pkce.verifier, client: "vault-app", redirect: redirect)
            #expect(granted.status == 200)
            let tokens = try TokenResponse.parse(granted.body)
            let claims = try await wire.publishedKeys().verify(try #require(tokens.idToken), as: SignedClaims.self)
            #expect(claims.nonce == "n-3" && claims.sub == "alice" && claims.aud == "vault-app")

            let reused = try await wire.exchange(code: freshCode, verifier: pkce.verifier, client: "vault-app", redirect: redirect)
            #expect(try reused.jsonObject()["error"] as? String == "invalid_grant")
            let (client, _) = makeClient()
            let afterReuse = await refreshFailure(
                client, refreshToken: try #require(tokens.refreshToken),
                endpoint: gateway.tokenEndpoint, credentials: ClientCredentials(clientID: "vault-app"))
            #expect(afterReuse?.isInvalidGrant == true, "a reused code revokes the grant it produced (RFC 6749 §4.1.2)")

            await gateway.signInBrowserUser("alice", mode: .deny)
            let denied = try await wire.authorize(client: "vault-app", redirect: redirect, challenge: pkce.challenge, extra: [("state", "s2")])
            let deniedQuery = try denied.redirectQuery()
            #expect(deniedQuery["error"] == "access_denied" && deniedQuery["state"] == "s2" && deniedQuery["iss"] == gateway.issuer)
            #expect(await gateway.stats().authorizationRequests == 8)
        }
    }

    @Test("max_age=0 and prompt=login make the user authenticate again, so auth_time moves forward; a refresh keeps it")
    func reauthenticationMovesAuthTime() async throws {
        try await withGateway { gateway in
            let wire = Wire(gateway: gateway)
            let clock = WallClock()
            await gateway.setClock { clock.now() }
            await gateway.registerClient(id: "vault-app")
            await gateway.signInBrowserUser("alice")
            let signedIn = Int(clock.now().timeIntervalSince1970)
            clock.advance(by: 120)

            let plain = try await wire.signIn(client: "vault-app", extra: [])
            #expect(plain.claims.authTime == signedIn)
            #expect(plain.claims.iat == signedIn + 120)

            clock.advance(by: 60)
            let stepUp = try await wire.signIn(client: "vault-app", extra: [("max_age", "0")])
            #expect(stepUp.claims.authTime == signedIn + 180)
            #expect(await gateway.stats().reauthentications == 1)

            clock.advance(by: 30)
            let recent = try await wire.signIn(client: "vault-app", extra: [("max_age", "3600")])
            #expect(recent.claims.authTime == signedIn + 180, "authenticated 30 s ago: no new sign-in")
            let forced = try await wire.signIn(client: "vault-app", extra: [("prompt", "login")])
            #expect(forced.claims.authTime == signedIn + 210)
            #expect(await gateway.stats().reauthentications == 2)

            clock.advance(by: 60)
            let (client, _) = makeClient()
            let refreshed = try await client.refresh(
                refreshToken: try #require(forced.tokens.refreshToken),
                endpoint: gateway.tokenEndpoint, client: ClientCredentials(clientID: "vault-app"))
            let again = try await wire.publishedKeys().verify(try #require(refreshed.idToken), as: SignedClaims.self)
            #expect(again.authTime == signedIn + 210 && again.iat == signedIn + 270)
            #expect(again.nonce == nil)
        }
    }

    @Test("a device sign-in is pending until approved, then gets tokens once; denial, expiry and slow_down are reported")
    func deviceFlow() async throws {
        try await withGateway { gateway in
            let wire = Wire(gateway: gateway)
            let clock = WallClock()
            await gateway.setClock { clock.now() }
            await gateway.registerClient(id: "tv-app")
            await gateway.setDeviceGrantSettings(interval: 0)

            let started = try await wire.post(gateway.deviceAuthorizationEndpoint, form: [("client_id", "tv-app"), ("scope", "openid offline_access")])
            #expect(started.status == 200)
            let authorization = try started.jsonObject()
            let userCode = try #require(authorization["user_code"] as? String)
            let deviceCode = try #require(authorization["device_code"] as? String)
            #expect(userCode.wholeMatch(of: /[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}/) != nil)
            #expect(authorization["verification_uri"] as? String == gateway.deviceVerificationURL.absoluteString)
            #expect((authorization["verification_uri_complete"] as? String)?.hasSuffix("/device?user_code=\(userCode)") == true)
            #expect(authorization["expires_in"] as? Int == 600 && authorization["interval"] as? Int == 0)

            #expect(try await wire.poll(deviceCode, client: "tv-app").oauthError == "authorization_pending")
            #expect(await gateway.pendingUserCodes() == [userCode])
            let complete = try #require((authorization["verification_uri_complete"] as? String).flatMap(URL.init(string:)))
            let page = try await wire.get(complete)
            #expect(page.status == 200 && String(decoding: page.body, as: UTF8.self).contains("admin/device/approve"))
            #expect(await gateway.approveDeviceCode(userCode: userCode.lowercased().replacingOccurrences(of: "-", with: ""), subject: "alice"))

            let granted = try await wire.poll(deviceCode, client: "tv-app")
            #expect(granted.status == 200)
            let tokens = try TokenResponse.parse(granted.body)
            #expect(tokens.refreshToken != nil)
            let claims = try await wire.publishedKeys().verify(try #require(tokens.idToken), as: SignedClaims.self)
            #expect(claims.sub == "alice" && claims.aud == "tv-app" && claims.nonce == nil)
            #expect(claims.authTime == Int(clock.now().timeIntervalSince1970))
            #expect(try await wire.poll(deviceCode, client: "tv-app").oauthError == "invalid_grant", "a device code gets tokens once")

            let toDeny = try await wire.startDevice(client: "tv-app")
            let deny = try await wire.admin("admin/device/deny", #"{"user_code": "\#(toDeny.userCode)"}"#)
            #expect(deny.status == 200 && String(decoding: deny.body, as: UTF8.self) == #"{"ok":true}"#)
            #expect(try await wire.poll(toDeny.deviceCode, client: "tv-app").oauthError == "access_denied")
            #expect(try await wire.admin("admin/device/approve", #"{"user_code": "\#(toDeny.userCode)", "subject": "bob"}"#).status == 404)

            let toExpire = try await wire.startDevice(client: "tv-app")
            #expect(await gateway.expireDeviceCode(userCode: toExpire.userCode))
            #expect(try await wire.poll(toExpire.deviceCode, client: "tv-app").oauthError == "expired_token")
            await gateway.setDeviceGrantSettings(interval: 0, lifetime: 30)
            let outlived = try await wire.startDevice(client: "tv-app")
            clock.advance(by: 30)
            #expect(try await wire.poll(outlived.deviceCode, client: "tv-app").oauthError == "expired_token")

            #expect(try await wire.admin("admin/device-grant", #"{"interval": 5, "expires_in": 600}"#).status == 204)
            let eager = try await wire.startDevice(client: "tv-app")
            #expect(try await wire.poll(eager.deviceCode, client: "tv-app").oauthError == "authorization_pending")
            #expect(try await wire.poll(eager.deviceCode, client: "tv-app").oauthError == "slow_down")
            clock.advance(by: 5)
            #expect(try await wire.poll(eager.deviceCode, client: "tv-app").oauthError == "slow_down", "the interval grew to 10 s")
            clock.advance(by: 15)
            #expect(
                try await wire.poll(eager.deviceCode, client: "tv-app").oauthError == "authorization_pending",
                "each slow_down added 5 s: 15 s now")
            #expect(try await wire.poll(eager.deviceCode, client: "other-app").status == 401, "an unknown client is refused")

            let stats = await gateway.stats()
            #expect(stats.deviceAuthorizations == 5 && stats.slowDowns == 2 && stats.devicePolls == 10)
        }
    }

    @Test("each ID-token fault is a defect a verifying client must catch; the token after it is sound again")
    func idTokenFaults() async throws {
        try await withGateway { gateway in
            let wire = Wire(gateway: gateway)
            let keys = try await wire.publishedKeys()
            let now = Int(Date().timeIntervalSince1970)
            for fault in IDTokenFault.allCases {
                if fault == .wrongAudience {
                    #expect(try await wire.admin("admin/faults/id-token", #"{"fault": "wrong_audience"}"#).status == 204)
                } else {
                    await gateway.corruptNextIDTokens(with: fault)
                }
                let token = await gateway.issueGrant(subject: "alice", clientID: "vault-cli").idToken
                switch fault {
                case .omitted:
                    #expect(token == nil)
                case .badSignature, .algNone, .hs256, .unknownKey:
                    let token = try #require(token)
                    await #expect(throws: (any Error).self, "\(fault)") { _ = try await keys.verify(token, as: SignedClaims.self) }
                    let header = try JWSParts(token).header
                    switch fault {
                    case .algNone: #expect(header["alg"] as? String == "none" && token.hasSuffix("."))
                    case .hs256: #expect(header["alg"] as? String == "HS256")
                    case .unknownKey: #expect(!(await gateway.publishedKeyIDs()).contains(header["kid"] as? String ?? ""))
                    default: break
                    }
                case .wrongIssuer, .wrongAudience, .expired, .issuedInFuture, .wrongNonce:
                    let claims = try await keys.verify(try #require(token), as: SignedClaims.self)
                    switch fault {
                    case .wrongIssuer: #expect(claims.iss != gateway.issuer)
                    case .wrongAudience: #expect(claims.aud != "vault-cli")
                    case .expired: #expect(claims.exp <= now - 3600 + Int(5 * testTimeScale))
                    case .issuedInFuture: #expect(claims.iat >= now + 3600 - Int(5 * testTimeScale))
                    case .wrongNonce: #expect(claims.nonce != nil)
                    default: break
                    }
                }
            }
            let sound = try await keys.verify(
                try #require(await gateway.issueGrant(subject: "alice", clientID: "vault-cli").idToken),
                as: SignedClaims.self)
            #expect(sound.iss == gateway.issuer && sound.aud == "vault-cli" && sound.nonce == nil)
            #expect(
                await gateway.issueGrant(subject: "alice", clientID: "vault-cli", scope: "profile").idToken == nil,
                "no openid, no ID token")
        }
    }

    @Test("a guest registers without credentials and converts into a registered account; the guest's grant ends")
    func guestRegisterAndConvert() async throws {
        try await withGateway { gateway in
            let wire = Wire(gateway: gateway)
            await gateway.registerClient(id: "vault-app")
            let registered = try await wire.post(gateway.guestRegistrationEndpoint, form: [("client_id", "vault-app"), ("scope", "openid offline_access")])
            #expect(registered.status == 200)
            let guestTokens = try TokenResponse.parse(registered.body)
            let guestClaims = try await wire.publishedKeys().verify(try #require(guestTokens.idToken), as: SignedClaims.self)
            #expect(guestClaims.guest == true && guestClaims.sub.hasPrefix("guest-"))
            let guestRefresh = try #require(guestTokens.refreshToken)

            let alice = await gateway.issueGrant(subject: "alice", clientID: "vault-app")
            let badBearer = try await wire.post(
                gateway.guestConversionEndpoint, form: [("guest_refresh_token", guestRefresh)],
                headers: ["Authorization": "Bearer not-a-token"])
            #expect(badBearer.status == 401 && badBearer.oauthError == "invalid_token")
            let asGuest = try await wire.post(
                gateway.guestConversionEndpoint, form: [("guest_refresh_token", guestRefresh)],
                headers: ["Authorization": "Bearer \(guestTokens.accessToken)"])
            #expect(asGuest.status == 400, "a guest cannot convert a guest")

            let converted = try await wire.post(
                gateway.guestConversionEndpoint,
                form: [("guest_refresh_token", guestRefresh), ("client_id", "vault-app")],
                headers: ["Authorization": "Bearer \(alice.accessToken)"])
            #expect(converted.status == 200)
            let answer = try converted.jsonObject()
            #expect(answer["converted"] as? Bool == true)
            #expect(answer["guest_subject"] as? String == guestClaims.sub && answer["subject"] as? String == "alice")
            #expect(await gateway.guestConversion(of: guestClaims.sub) == "alice")

            let (client, _) = makeClient()
            let guestRefreshed = await refreshFailure(
                client, refreshToken: guestRefresh, endpoint: gateway.tokenEndpoint,
                credentials: ClientCredentials(clientID: "vault-app"))
            #expect(guestRefreshed?.isInvalidGrant == true)
            let twice = try await wire.post(
                gateway.guestConversionEndpoint, form: [("guest_refresh_token", guestRefresh)],
                headers: ["Authorization": "Bearer \(alice.accessToken)"])
            #expect(twice.status == 400 && twice.oauthError == "invalid_grant")

            let stats = await gateway.stats()
            #expect(stats.guestRegistrations == 1 && stats.guestConversions == 1)
        }
    }
}

// MARK: - Helpers

/// Plain HTTP to the gateway, as a client that knows only the RFCs would send it.
private struct Wire {
    let gateway: DevGateway
    let transport = URLSessionTransport(timeout: scaled(.seconds(10)))

    func get(_ url: URL) async throws -> VaultOAuth.HTTPResponse {
        try await transport.send(HTTPRequest(method: .get, url: url))
    }

    func post(_ url: URL, form: [(String, String)], headers: HTTPHeaderFields = [:]) async throws -> VaultOAuth.HTTPResponse {
        var headers = headers
        headers.append(name: "Content-Type", value: "application/x-www-form-urlencoded")
        return try await transport.send(HTTPRequest(method: .post, url: url, headers: headers, body: Data(Self.formEncode(form).utf8)))
    }

    func admin(_ path: String, _ json: String) async throws -> VaultOAuth.HTTPResponse {
        try await transport.send(
            HTTPRequest(
                method: .post, url: gateway.baseURL.appendingPathComponent(path),
                headers: ["Content-Type": "application/json"], body: Data(json.utf8)))
    }

    /// The JWKS, fetched over HTTP, as a JWTKit key collection.
    func publishedKeys() async throws -> JWTKeyCollection {
        let jwks = try await get(gateway.jwksURL)
        return try await JWTKeyCollection().add(jwksJSON: String(decoding: jwks.body, as: UTF8.self))
    }

    func authorize(client: String, redirect: String, challenge: String, extra: [(String, String)]) async throws -> VaultOAuth.HTTPResponse {
        var fields = [
            ("response_type", "code"), ("client_id", client), ("redirect_uri", redirect), ("scope", "openid offline_access"),
            ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ]
        for (name, value) in extra {
            fields.removeAll { $0.0 == name }
            fields.append((name, value))
        }
        let url = try #require(URL(string: gateway.authorizationEndpoint.absoluteString + "?" + Self.formEncode(fields)))
        return try await get(url)
    }

    func exchange(code: String, verifier: String, client: String, redirect: String) async throws -> VaultOAuth.HTTPResponse {
        try await post(
            gateway.tokenEndpoint,
            form: [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect),
                ("code_verifier", verifier), ("client_id", client),
            ])
    }

    /// A whole authorization-code sign-in for the browser user; the tokens and their verified ID token.
    func signIn(client: String, extra: [(String, String)]) async throws -> (tokens: TokenResponse, claims: SignedClaims) {
        let pkce = PKCE()
        let redirect = "http://[::1]:61000/done"
        let response = try await authorize(client: client, redirect: redirect, challenge: pkce.challenge, extra: extra)
        let code = try #require(try response.redirectQuery()["code"])
        let exchanged = try await exchange(code: code, verifier: pkce.verifier, client: client, redirect: redirect)
        let tokens = try TokenResponse.parse(exchanged.body)
        return (tokens, try await publishedKeys().verify(try #require(tokens.idToken), as: SignedClaims.self))
    }

    func startDevice(client: String) async throws -> (deviceCode: String, userCode: String) {
        let started = try await post(gateway.deviceAuthorizationEndpoint, form: [("client_id", client), ("scope", "openid")]).jsonObject()
        return (try #require(started["device_code"] as? String), try #require(started["user_code"] as? String))
    }

    func poll(_ deviceCode: String, client: String) async throws -> VaultOAuth.HTTPResponse {
        try await post(
            gateway.tokenEndpoint,
            form: [
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", deviceCode), ("client_id", client),
            ])
    }

    static func formEncode(_ fields: [(String, String)]) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        return fields.map { name, value in
            "\(name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")=\(value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")"
        }.joined(separator: "&")
    }
}

extension VaultOAuth.HTTPResponse {
    func jsonObject() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
    }

    /// The OAuth `error` of a JSON error body, if any.
    var oauthError: String? { (try? jsonObject())?["error"] as? String }

    /// The query of a 302's `Location`, form-decoded.
    func redirectQuery() throws -> [String: String] {
        #expect(status == 302)
        let location = try #require(headers["location"])
        let query = try #require(URLComponents(string: location)?.percentEncodedQuery)
        var result: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            result[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return result
    }
}

/// A PKCE pair (RFC 7636 §4.1-4.2).
private struct PKCE {
    let verifier: String
    let challenge: String

    init() {
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        verifier = Self.base64URL(Data(bytes))
        challenge = Self.base64URL(Data(SHA256.hash(data: Data(verifier.utf8))))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// The three parts of a compact JWS; the header decoded.
private struct JWSParts {
    let header: [String: Any]

    init(_ token: String) throws {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        var base64 = parts[0].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let data = try #require(Data(base64Encoded: base64))
        header = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

/// The ID-token claims the tests read; the signature is checked by JWTKit, the claims by the tests.
struct SignedClaims: JWTPayload {
    let iss: String
    let sub: String
    let aud: String
    let azp: String
    let exp: Int
    let iat: Int
    let authTime: Int
    let nonce: String?
    let guest: Bool?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, azp, exp, iat
        case authTime = "auth_time"
        case nonce, guest
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A wall clock the test moves by hand, shared with the gateway through `setClock`.
private final class WallClock: Sendable {
    private let time = Locked(Date(timeIntervalSince1970: 1_760_000_000))

    func now() -> Date { time.withLock { $0 } }

    func advance(by seconds: TimeInterval) { time.withLock { $0 = $0.addingTimeInterval(seconds) } }
}
