import DevGateway
import Foundation
import Logging
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultSync
import VaultTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `SessionService.signIn(using:)` end to end against the development gateway on loopback:
/// discovery, the device grant, the browser flow with PKCE and a loopback redirect, verified ID
/// tokens, re-login, step-up and guests. Time is a test clock shared by the gateway (ID-token
/// and device-code times), the vault and the client's polling; nothing sleeps on real time.
@Suite("Sign-in: device, browser, guest, verified ID tokens, step-up")
struct SignInTests {
    static let clientID = "vault-cli"

    /// One test's world: the gateway on the test clock, a vault, and a service whose OAuth
    /// client polls and times out on that clock.
    final class World: Sendable {
        let gateway: DevGateway
        let store: TestVault
        let time = TestTime()
        let vault: Vault
        let service: SessionService
        let presented = Watched<DeviceAuthorization?>(nil)

        init() async throws {
            store = try TestVault(.keyFile)
            gateway = try await DevGateway.start(logger: Logger(label: "gateway", factory: { _ in SwiftLogNoOpLogHandler() }))
            let time = self.time
            await gateway.setClock { time.now() }
            await gateway.registerClient(id: SignInTests.clientID)
            await gateway.setDeviceGrantSettings(interval: 5, lifetime: 600)
            // Requests are bounded in real time by the transport. Their deadlines on the test
            // clock are out of reach: the device flow's player advances that clock whenever
            // anything sleeps on it, and under load a request still in flight was cut off by
            // those advances ("did not answer in time", then "device_code was already used").
            let oauth = OAuthClient(
                transport: NIOTransport(timeout: TestTimeScale.scaled(.seconds(10))), logger: store.logs.logger(label: "oauth"),
                requestDeadline: Self.unreachable, clock: time.clock, now: time.wallClock.now)
            vault = try store.create(clock: time.wallClock)
            var configuration = SessionConfiguration()
            configuration.requestDeadline = Self.unreachable
            configuration.leaseDuration = Self.unreachable * 2
            service = SessionService(
                vault: vault, oauth: oauth, clock: time.clock, wallClock: time.wallClock, configuration: configuration,
                logger: store.logs.logger(label: "session"))
        }

        func close() async {
            await service.stop()
            vault.close()
            await gateway.stop()
        }

        func provider() async throws -> ProviderMetadata {
            try await service.discoverProvider(issuer: gateway.baseURL)
        }

        func request(
            _ method: SignInMethod, scopes: [String] = ["openid", "offline_access"], account: AccountID? = nil,
            maxAge: Duration? = nil
        ) async throws -> SignInRequest {
            SignInRequest(
                provider: try await provider(), clientID: SignInTests.clientID, scopes: scopes, method: method,
                account: account, maxAge: maxAge)
        }

        /// The device method: remembers what the user was shown.
        var device: SignInMethod {
            .device { [presented] authorization in presented.update { $0 = authorization } }
        }

        /// Runs a device sign-in, playing the user with `user` once the code is shown, and the
        /// clock until the sign-in ends.
        func deviceSignIn(_ request: SignInRequest, user: @escaping @Sendable (DevGateway, String) async -> Void) async -> Result<SignInResult, any Error> {
            let service = self.service
            let task = Task { try await service.signIn(using: request) }
            guard await presented.wait(upTo: TestTimeScale.scaled(.seconds(20)), until: { $0 != nil }),
                let code = presented.value?.userCode
            else {
                task.cancel()
                return .failure(SignInError.cancelled)
            }
            await user(gateway, code)
            // Play the clock poll by poll until the sign-in ends: a poll that takes long in real
            // time (a loaded machine) only delays the next advance, it never ends the playing
            // while the sign-in still waits on the clock (which hung the test). Bounded in real
            // time; a sign-in still waiting then is cancelled and reported.
            let finished = Watched(false)
            let watcher = Task {
                _ = await task.result
                finished.update { $0 = true }
            }
            defer { watcher.cancel() }
            let start = ContinuousClock.now
            while !finished.value, ContinuousClock.now - start < TestTimeScale.scaled(.seconds(60)) {
                if await finished.wait(upTo: .milliseconds(20), until: { $0 }) { break }
                _ = await time.advanceWhenSleeping(by: .seconds(5), timeout: .milliseconds(200))
            }
            if !finished.value {
                task.cancel()
                Issue.record("the device sign-in still waited after a minute of playing the clock")
            }
            return await task.result
        }

        var accountCount: Int { (try? vault.accounts.all().count) ?? -1 }

        /// A request deadline the test clock never reaches in a test (its advances add up to minutes).
        static let unreachable = Duration.seconds(86_400)
    }

    static func withWorld(_ body: (World) async throws -> Void) async throws {
        let world = try await World()
        do {
            try await body(world)
        } catch {
            await world.close()
            throw error
        }
        await world.close()
    }

    // MARK: - Device grant

    @Test("device flow: the code is shown, the user approves, the account is stored with a verified subject and the provider's metadata")
    func deviceFlow() async throws {
        try await Self.withWorld { world in
            let result = try await world.deviceSignIn(try await world.request(world.device)) { gateway, code in
                _ = await gateway.approveDeviceCode(userCode: code, subject: "alice")
            }.get()
            #expect(result.account.subject == "alice")
            #expect(result.account.subjectSource == .verified)
            #expect(result.account.kind == .registered)
            let stored = try #require(result.account.providerMetadata.flatMap(ProviderMetadata.decoded))
            #expect(stored.issuer == world.gateway.baseURL.absoluteString)
            #expect(stored.deviceAuthorizationEndpoint != nil)
            // The device API's base (an extension member) is kept with the account, for the device commands.
            #expect(stored.deviceAPIEndpoint == world.gateway.baseURL)
            #expect(try world.vault.accounts.activeID() == result.account.id)
            // The session's authentication time is the one the provider reported (auth_time).
            let session = try #require(try world.vault.sessions.current(for: result.account.id))
            let authenticated = try #require(await world.gateway.lastAuthentication(of: "alice"))
            #expect(abs(session.lastAuthentication.timeIntervalSince(authenticated)) < 1)
            // And the tokens work: a refresh at the gateway.
            let token = try await world.service.validAccessToken()
            #expect(!token.value.isEmpty)
        }
    }

    @Test("a confidential client signs in with HTTP Basic on both flows; its secret is stored sealed and never logged", arguments: [true, false])
    func confidentialClient(device: Bool) async throws {
        try await Self.withWorld { world in
            let secret = "confidential-client-secret-0123456789"
            await world.gateway.registerClient(id: "vault-confidential", secret: secret)
            await world.gateway.signInBrowserUser("dora")
            var request = try await world.request(device ? world.device : .browser(open: Self.followRedirects))
            request.clientID = "vault-confidential"
            request.clientSecret = secret
            let result: SignInResult
            if device {
                result = try await world.deviceSignIn(request) { gateway, code in
                    _ = await gateway.approveDeviceCode(userCode: code, subject: "dora")
                }.get()
            } else {
                result = try await world.service.signIn(using: request)
            }
            #expect(result.account.subject == "dora")
            #expect(result.account.hasClientSecret)
            #expect(try world.vault.accounts.clientSecret(for: result.account.id) == secret)
            // Without the secret the same client is refused by the provider.
            request.clientSecret = nil
            await #expect(throws: SignInError.self) { _ = try await world.service.signIn(using: request) }
            #expect(!world.store.logs.lines.joined(separator: "\n").contains(secret))
        }
    }

    @Test("device flow: access_denied stops with its own error and stores nothing")
    func deviceDenied() async throws {
        try await Self.withWorld { world in
            let result = await world.deviceSignIn(try await world.request(world.device)) { gateway, code in
                _ = await gateway.denyDeviceCode(userCode: code)
            }
            guard case .failure(let error) = result, case .authorizationDenied? = error as? SignInError else {
                Issue.record("expected access_denied, got \(result)")
                return
            }
            #expect(world.accountCount == 0)
        }
    }

    @Test("device flow: an expired code stops with its own error and stores nothing")
    func deviceExpired() async throws {
        try await Self.withWorld { world in
            let result = await world.deviceSignIn(try await world.request(world.device)) { gateway, code in
                _ = await gateway.expireDeviceCode(userCode: code)
            }
            guard case .failure(let error) = result, case .deviceCodeExpired? = error as? SignInError else {
                Issue.record("expected expired_token, got \(result)")
                return
            }
            #expect(world.accountCount == 0)
        }
    }

    @Test("device flow: slow_down makes every later poll wait five seconds more")
    func slowDown() async throws {
        try await Self.withWorld { world in
            await world.gateway.failNextTokenRequests(1, with: TokenFault(status: 400, error: "slow_down"))
            let service = world.service
            let request = try await world.request(world.device)
            let task = Task { try await service.signIn(using: request) }
            #expect(await world.presented.wait(upTo: TestTimeScale.scaled(.seconds(20))) { $0 != nil })
            let start = world.time.now()
            #expect(await world.time.waitForSleeper(until: start.addingTimeInterval(5)))
            await world.time.advance(by: .seconds(5))  // first poll: slow_down
            #expect(await world.time.waitForSleeper(until: start.addingTimeInterval(15)), "next poll after 5 + 10 s: \(world.time.sleepingUntil)")
            task.cancel()
            _ = await task.result
            #expect(world.accountCount == 0)
        }
    }

    @Test("device flow: cancelling the task (Ctrl-C) stops polling and stores nothing")
    func deviceCancelled() async throws {
        try await Self.withWorld { world in
            let service = world.service
            let request = try await world.request(world.device)
            let task = Task { try await service.signIn(using: request) }
            #expect(await world.presented.wait(upTo: TestTimeScale.scaled(.seconds(20))) { $0 != nil })
            task.cancel()
            guard case .failure(let error) = await task.result, case .cancelled? = error as? SignInError else {
                Issue.record("expected cancelled")
                return
            }
            #expect(world.accountCount == 0)
        }
    }

    // MARK: - ID token failures

    @Test(
        "an ID token that fails a check stores nothing, names the check, and the grant is revoked at the provider",
        arguments: [
            (IDTokenFault.badSignature, "signature"), (.wrongIssuer, "issuer"), (.wrongAudience, "audience"),
            (.expired, "exp"), (.issuedInFuture, "iat"), (.algNone, "algorithm"), (.hs256, "algorithm"), (.unknownKey, "kid"),
        ])
    func rejectedIDToken(fault: IDTokenFault, check: String) async throws {
        try await Self.withWorld { world in
            await world.gateway.corruptNextIDTokens(1, with: fault)
            let result = await world.deviceSignIn(try await world.request(world.device)) { gateway, code in
                _ = await gateway.approveDeviceCode(userCode: code, subject: "alice")
            }
            guard case .failure(let error) = result, case .idTokenRejected(let failure)? = error as? SignInError else {
                Issue.record("expected an ID-token rejection, got \(result)")
                return
            }
            #expect(failure.check == check)
            #expect(world.accountCount == 0)
            #expect(await world.gateway.stats().revocationRequests == 1)
        }
    }

    @Test("--dpop at a provider that ignores DPoP: refused as dpop_binding, nothing stored, what it issued revoked")
    func dpopIgnoredByTheProvider() async throws {
        try await Self.withWorld { world in
            await world.gateway.ignoreDPoP(true)
            var request = try await world.request(world.device)
            request.dpop = true
            let result = await world.deviceSignIn(request) { gateway, code in
                _ = await gateway.approveDeviceCode(userCode: code, subject: "alice")
            }
            guard case .failure(let error) = result, case .tokenRequestFailed(.clientMisconfigured("dpop_binding", _), .devicePoll)? = error as? SignInError
            else {
                Issue.record("expected dpop_binding at the device poll, got \(result)")
                return
            }
            #expect(world.accountCount == 0)
            let stats = await world.gateway.stats()
            #expect(stats.tokenResponses == 1 && stats.dpopBoundTokens == 0, "a bearer token was issued")
            #expect(stats.revocationRequests == 1, "and revoked, not left standing at the provider")
        }
    }

    @Test("--dpop device sign-in without an ID token: the userinfo endpoint is asked with the bound token and a proof, and names the user")
    func dpopUserinfo() async throws {
        try await Self.withWorld { world in
            await world.gateway.setUserinfo(enabled: true)
            await world.gateway.corruptNextIDTokens(1, with: .omitted)
            var request = try await world.request(world.device)
            request.dpop = true
            let result = try await world.deviceSignIn(request) { gateway, code in
                _ = await gateway.approveDeviceCode(userCode: code, subject: "alice")
            }.get()
            #expect(result.account.subject == "alice" && result.subjectFromUserinfo)
            let stats = await world.gateway.stats()
            #expect(stats.userinfoAnswers == 1 && stats.dpopBoundTokens == 1)
            #expect(stats.boundTokenBearerRefusals == 0 && stats.refusedDPoPProofs.isEmpty)
        }
    }

    @Test("openid asked and no id_token in the response: refused, nothing stored")
    func missingIDToken() async throws {
        try await Self.withWorld { world in
            await world.gateway.corruptNextIDTokens(1, with: .omitted)
            let result = await world.deviceSignIn(try await world.request(world.device)) { gateway, code in
                _ = await gateway.approveDeviceCode(userCode: code, subject: "alice")
            }
            guard case .failure(let error) = result, case .missingIDToken? = error as? SignInError else {
                Issue.record("expected missing_id_token, got \(result)")
                return
            }
            #expect(world.accountCount == 0)
        }
    }

    @Test("a nonce other than the one sent (a replayed ID token) is refused in the browser flow")
    func wrongNonce() async throws {
        try await Self.withWorld { world in
            await world.gateway.signInBrowserUser("bob")
            await world.gateway.corruptNextIDTokens(1, with: .wrongNonce)
            let request = try await world.request(.browser(open: Self.followRedirects, timeout: .seconds(300)))
            await #expect(throws: SignInError.idTokenRejected(.nonce)) { try await world.service.signIn(using: request) }
            #expect(world.accountCount == 0)
        }
    }

    // MARK: - Discovery

    @Test("discovery falls back to RFC 8414 metadata when there is no OpenID configuration")
    func discoveryFallback() async throws {
        try await Self.withWorld { world in
            await world.gateway.setDiscovery(DiscoverySettings(openIDConfiguration: false))
            let metadata = try await world.provider()
            #expect(metadata.source == .authorizationServer)
            #expect(metadata.tokenEndpoint == world.gateway.tokenEndpoint)
        }
    }

    @Test("discovery merges the documents: a revocation endpoint only the RFC 8414 document names is used")
    func discoveryMerges() async throws {
        try await Self.withWorld { world in
            await world.gateway.setDiscovery(DiscoverySettings(omitFromOpenID: ["revocation_endpoint", "revocation_endpoint_auth_methods_supported"]))
            let metadata = try await world.provider()
            #expect(metadata.source == .openIDConfiguration)
            #expect(metadata.revocationEndpoint == world.gateway.revocationEndpoint)
            #expect(metadata.revocationEndpointAuthMethods.contains("none"))
            #expect(metadata.jwksURI != nil && metadata.deviceAuthorizationEndpoint != nil)
        }
    }

    @Test("documents that disagree on an endpoint, or an RFC 8414 document naming another issuer, are refused")
    func discoveryConflicts() async throws {
        try await Self.withWorld { world in
            let elsewhere = "http://127.0.0.1:1/elsewhere/revoke"
            await world.gateway.setDiscovery(DiscoverySettings(authorizationServerOverrides: ["revocation_endpoint": elsewhere]))
            await #expect {
                _ = try await world.provider()
            } throws: { error in
                guard case .metadataConflict(let field, _, let second)? = error as? SignInError else { return false }
                return field == "revocation_endpoint" && second.contains(elsewhere)
            }
            await world.gateway.setDiscovery(DiscoverySettings(authorizationServerOverrides: ["issuer": "https://impostor.example.test"]))
            await #expect(throws: SignInError.issuerMismatch(expected: world.gateway.baseURL.absoluteString, found: "https://impostor.example.test")) {
                _ = try await world.provider()
            }
        }
    }

    @Test("metadata naming another issuer is refused; metadata without a token endpoint too")
    func discoveryRefusals() async throws {
        try await Self.withWorld { world in
            await world.gateway.setDiscovery(DiscoverySettings(issuer: "https://impostor.example.test"))
            await #expect(throws: SignInError.issuerMismatch(expected: world.gateway.baseURL.absoluteString, found: "https://impostor.example.test")) {
                _ = try await world.provider()
            }
            await world.gateway.setDiscovery(DiscoverySettings(omit: ["token_endpoint"]))
            await #expect(throws: SignInError.missingMetadata(field: "token_endpoint")) { _ = try await world.provider() }
        }
    }

    // MARK: - Browser

    /// A browser: GETs the authorization URL, follows the redirect to the loopback listener.
    /// The user's browser: given the one-time opener link, as `xdg-open` would be.
    static let followRedirects: @Sendable (BrowserSignInLinks) async -> Void = { links in
        Task.detached { _ = try? await URLSession.shared.data(from: links.opener) }
    }

    @Test("browser flow: PKCE, state and nonce checked, the redirect lands on 127.0.0.1, the account is stored verified")
    func browserFlow() async throws {
        try await Self.withWorld { world in
            await world.gateway.signInBrowserUser("bob")
            let result = try await world.service.signIn(using: try await world.request(.browser(open: Self.followRedirects)))
            #expect(result.account.subject == "bob")
            #expect(result.account.subjectSource == .verified)
            #expect(await world.gateway.stats().authorizationRequests == 1)
        }
    }

    @Test("browser flow: a redirect with another state is ignored (400); the sign-in waits for its own and stores only that")
    func browserWrongState() async throws {
        try await Self.withWorld { world in
            await world.gateway.signInBrowserUser("bob")
            let forgedStatus = Watched<Int?>(nil)
            let open: @Sendable (BrowserSignInLinks) async -> Void = { links in
                let items = URLComponents(url: links.authorization, resolvingAgainstBaseURL: false)?.queryItems ?? []
                guard let redirect = items.first(where: { $0.name == "redirect_uri" })?.value,
                    let target = URL(string: redirect + "?code=stolen&state=not-ours")
                else { return }
                // A page (or another process of this user) pokes the well-known callback first;
                // then the user's browser comes back with the real answer.
                Task.detached {
                    let answer = try? await URLSession.shared.data(from: target)
                    forgedStatus.update { $0 = (answer?.1 as? HTTPURLResponse)?.statusCode ?? -1 }
                    await SignInTests.followRedirects(links)
                }
            }
            let result = try await world.service.signIn(using: try await world.request(.browser(open: open)))
            #expect(result.account.subject == "bob")
            #expect(forgedStatus.value == 400, "the forged answer was turned away")
            #expect(await world.gateway.stats().tokenRequests == 1, "only the real code was exchanged")
        }
    }

    @Test("browser flow: the user declines at the provider (error=access_denied)")
    func browserDenied() async throws {
        try await Self.withWorld { world in
            await world.gateway.signInBrowserUser("bob", mode: .deny)
            do {
                _ = try await world.service.signIn(using: try await world.request(.browser(open: Self.followRedirects)))
                Issue.record("signed in although the user declined")
            } catch let error as SignInError {
                guard case .authorizationDenied = error else {
                    Issue.record("got \(error)")
                    return
                }
            }
            #expect(world.accountCount == 0)
        }
    }

    @Test("browser flow: a browser that never comes back times out on the clock, nothing stored")
    func browserTimeout() async throws {
        try await Self.withWorld { world in
            let service = world.service
            let request = try await world.request(.browser(open: { _ in }, timeout: .seconds(120)))
            let task = Task { try await service.signIn(using: request) }
            #expect(await world.time.advanceWhenSleeping(by: .seconds(120)))
            await #expect(throws: SignInError.timedOut(seconds: 120)) { try await task.value }
            #expect(world.accountCount == 0)
        }
    }

    // MARK: - Re-login and step-up

    @Test("signing an account in again keeps its id and history; another user is refused and the account is untouched")
    func reLogin() async throws {
        try await Self.withWorld { world in
            await world.gateway.signInBrowserUser("alice")
            let first = try await world.service.signIn(using: try await world.request(.browser(open: Self.followRedirects)))
            let again = try await world.service.signIn(using: try await world.request(.browser(open: Self.followRedirects), account: first.account.id))
            #expect(again.account.id == first.account.id)
            #expect(again.replacedExisting)
            #expect(try world.vault.sessions.all(for: first.account.id).count == 2)

            await world.gateway.signInBrowserUser("bob")
            let before = try world.vault.sessions.current(for: first.account.id)
            do {
                _ = try await world.service.signIn(using: try await world.request(.browser(open: Self.followRedirects), account: first.account.id))
                Issue.record("bob signed into alice's account")
            } catch let error as SignInError {
                #expect(error.code == "wrong_account")
                #expect(error.description.contains("signed in as bob"))
            }
            #expect(try world.vault.accounts.all().count == 1)
            #expect(try world.vault.sessions.current(for: first.account.id) == before)
        }
    }

    @Test("step-up: a token for a sensitive action needs a recent authentication; max_age 0 re-authenticates the same account")
    func stepUp() async throws {
        try await Self.withWorld { world in
            await world.gateway.signInBrowserUser("alice")
            let first = try await world.service.signIn(using: try await world.request(.browser(open: Self.followRedirects)))
            await world.time.advance(by: .seconds(600))
            do {
                _ = try await world.service.validAccessToken(maxAuthenticationAge: .seconds(300))
                Issue.record("a token was served for an authentication ten minutes old")
            } catch SessionError.authenticationTooOld(let account, _, let maximum) {
                #expect(account == first.account.id && maximum == .seconds(300))
            }
            let reauthentications = await world.gateway.stats().reauthentications
            let again = try await world.service.signIn(
                using: try await world.request(
                    .browser(open: Self.followRedirects), account: first.account.id, maxAge: .zero))
            #expect(again.account.id == first.account.id)
            #expect(await world.gateway.stats().reauthentications == reauthentications + 1)
            let token = try await world.service.validAccessToken(maxAuthenticationAge: .seconds(300))
            #expect(token.account == first.account.id)
        }
    }

    // MARK: - Guests

    @Test(
        "a guest upgraded by signing in: devices, notifications and history move, the guest session ends upgraded, nothing is left behind",
        arguments: [true, false])
    func guestUpgrade(conversionAtProvider: Bool) async throws {
        try await Self.withWorld { world in
            await world.gateway.setGuestConversion(enabled: conversionAtProvider)
            let guest = try await world.service.signIn(using: try await world.request(.guest)).account
            #expect(guest.kind == .guest)
            try world.vault.devices.save(
                DeviceRegistration(
                    id: "reg-guest", account: guest.id, deviceID: world.vault.deviceID, name: "Guest laptop", platform: "linux",
                    status: .active, activationMethod: .primary, createdAt: world.time.now(), updatedAt: world.time.now()))
            try world.vault.notifications.upsert(
                NotificationRecord(
                    uuid: "n-guest", account: guest.id, subject: "Hello", message: "sealed words", actions: [],
                    createdAt: world.time.now(), expiresAt: nil))
            let revocationsBefore = await world.gateway.stats().revocationRequests

            let result = try await world.deviceSignIn(try await world.request(world.device)) { gateway, code in
                _ = await gateway.approveDeviceCode(userCode: code, subject: "carol")
            }.get()
            let upgrade = try #require(result.upgradedGuest)
            #expect(upgrade.guest == guest.id)
            #expect(upgrade.devicesMoved == 1 && upgrade.notificationsMoved == 1)
            #expect(result.convertedAtProvider == conversionAtProvider)
            #expect(try world.vault.devices.all(for: result.account.id).map(\.name) == ["Guest laptop"])
            #expect(try world.vault.notifications.find("n-guest", account: result.account.id)?.message == "sealed words")
            #expect(try world.vault.devices.all(for: guest.id).isEmpty)
            #expect(try world.vault.tokens.current(for: guest.id) == nil)
            #expect(try world.vault.sessions.current(for: guest.id)?.endReason == "upgraded")
            #expect(try world.vault.accounts.find(guest.id)?.upgradedTo == result.account.id)
            let stats = await world.gateway.stats()
            if conversionAtProvider {
                #expect(stats.guestConversions == 1)
            } else {
                #expect(stats.revocationRequests == revocationsBefore + 1)
            }
            #expect(try world.vault.maintenance.verify().passed)
        }
    }

    @Test("a guest taken over by a --dpop sign-in: the conversion presents the bound token with a proof naming it, as RFC 9449 §7.1 asks")
    func guestUpgradeWithDPoP() async throws {
        try await Self.withWorld { world in
            await world.gateway.setGuestConversion(enabled: true)
            let guest = try await world.service.signIn(using: try await world.request(.guest)).account
            var request = try await world.request(world.device)
            request.dpop = true
            let result = try await world.deviceSignIn(request) { gateway, code in
                _ = await gateway.approveDeviceCode(userCode: code, subject: "carol")
            }.get()
            #expect(result.upgradedGuest?.guest == guest.id)
            #expect(result.convertedAtProvider, "the provider took the bound token with its proof")
            let stats = await world.gateway.stats()
            #expect(stats.guestConversions == 1 && stats.dpopBoundTokens == 1)
            #expect(stats.boundTokenBearerRefusals == 0 && stats.refusedDPoPProofs.isEmpty && stats.replayedDPoPProofs == 0)
        }
    }
}
