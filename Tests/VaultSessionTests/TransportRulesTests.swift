import Foundation
import Logging
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultSync
import VaultTestSupport

/// Issue 12, parts 2 and 3, through the session service: where a credential may go (at import
/// and at every request), the total deadline of every request, and SPKI pins.
@Suite("Transport rules through the session service", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct TransportRulesTests {
    /// Hosts that only look like this machine, and URLs whose user information hides the host.
    static let lookAlikes = [
        "http://127.evil.example/token", "http://127.0.0.1.nip.io/token", "http://localhost.example/token",
        "http://0x7f.1/token", "http://127.1/token", "http://2130706433/token",
        "http://127.0.0.1@evil.example/token", "https://user:pw@id.example.com/token",
    ]

    // MARK: - Look-alike hosts

    @Test("a look-alike host is refused at sign-in, with nothing stored", arguments: lookAlikes)
    func lookAlikeRefusedAtImport(_ endpoint: String) async throws {
        try await TransportWorld.run { world in
            let url = try #require(URL(string: endpoint))
            for client in [
                OAuthClientSettings(tokenEndpoint: url, clientID: "vault-cli"),
                OAuthClientSettings(
                    tokenEndpoint: world.server.url("/oauth/token"), revocationEndpoint: url,
                    clientID: "vault-cli"),
            ] {
                await #expect(throws: EndpointError.self) {
                    try await world.service.signIn(world.account(client), tokens: world.tokens(expiresIn: .seconds(3600)))
                }
            }
            #expect(try world.vault.accounts.ids().isEmpty, "nothing stored")
        }
    }

    @Test(
        "a look-alike host stored anyway (by the store alone) is sent nothing: token, revocation and device requests",
        arguments: lookAlikes)
    func lookAlikeRefusedAtRequestTime(_ endpoint: String) async throws {
        try await TransportWorld.run { world in
            let url = try #require(URL(string: endpoint))
            let stored = try world.vault.accounts.signIn(
                world.account(OAuthClientSettings(tokenEndpoint: url, revocationEndpoint: url, clientID: "vault-cli")),
                tokens: world.tokens(expiresIn: .seconds(5)), policy: .tokensOnly)
            let alice = stored.account.id
            let refresh = await sessionError { try await world.service.validAccessToken(for: alice) }
            guard case .clientMisconfigured(_, let code, _)? = refresh else {
                Issue.record("expected the endpoint to be refused, got \(String(describing: refresh))")
                return
            }
            #expect(code == "insecure_endpoint")

            let api = HTTPDeviceNotificationAPI(baseURL: url, session: world.service, transport: world.transport)
            await #expect(throws: DeviceAPIError.self) { _ = try await api.devices(account: alice) }

            try await world.service.signOut(alice)  // revocation: refused too, and never blocks the removal
            #expect(world.transport.requests.isEmpty, "nothing was sent anywhere")
        }
    }

    // MARK: - The total deadline

    @Test("a token endpoint trickling one byte every 1.5 s is cut off at requestDeadline: a transient timeout, tokens kept")
    func tricklingTokenEndpoint() async throws {
        var configuration = SessionConfiguration()
        configuration.requestDeadline = .seconds(5)
        let answer = #"{"access_token":"access-too-late","refresh_token":"refresh-too-late","token_type":"Bearer","expires_in":3600}"#
        try await TransportWorld.run(answer: .trickle(answer, every: .milliseconds(1500)), configuration: configuration) { world in
            let alice = try await world.signIn(expiresIn: .zero)
            let ask = Task { await sessionError { try await world.service.validAccessToken() } }
            #expect(await world.server.wait { $0.requests.count == 1 })
            // The request's deadline is the sleeper until +5 s (the lease renewal sleeps until +20 s).
            #expect(await world.time.waitForSleeper(until: world.time.at(.seconds(5))))
            await world.time.advance(by: .seconds(5))
            guard case .temporarilyUnavailable(let account, let reason, _)? = await ask.value else {
                Issue.record("expected a transient failure")
                return
            }
            #expect(account == alice)
            #expect(reason.contains("did not answer in time"), "\(reason)")
            #expect(await world.server.wait { $0.closedConnections == 1 }, "the request outlived its deadline")
            #expect(try world.vault.tokens.current(for: alice)?.tokens.refreshToken == "refresh-before")
        }
    }

    @Test("a device request has the same deadline")
    func silentDeviceAPI() async throws {
        var configuration = SessionConfiguration()
        configuration.requestDeadline = .seconds(5)
        try await TransportWorld.run(answer: .silence, configuration: configuration) { world in
            let alice = try await world.signIn(expiresIn: .seconds(3600))
            let api = HTTPDeviceNotificationAPI(
                baseURL: world.server.url(""), session: world.service,
                transport: world.transport, clock: world.time.clock)
            let call = Task { () -> (any Error)? in
                do {
                    _ = try await api.devices(account: alice)
                    return nil
                } catch {
                    return error
                }
            }
            #expect(await world.server.wait { $0.requests.count == 1 })
            #expect(await world.time.advanceWhenSleeping(by: .seconds(5)))
            let error = await call.value
            #expect((error as? DeviceAPIError) == .unreachable(.timedOut), "\(String(describing: error))")
            #expect(await world.server.wait { $0.closedConnections == 1 })
        }
    }

    // MARK: - Pins

    @Test("pins are checked at sign-in: malformed or over plain http refused, others kept in canonical form")
    func pinsAtImport() async throws {
        let chain = try TestChain()
        try await TransportWorld.run(chain: chain) { world in
            var client = OAuthClientSettings(
                tokenEndpoint: world.server.url("/oauth/token"), clientID: "vault-cli",
                pins: ["sha256/not-base64"])
            await #expect(throws: PinError.self) { try await world.service.signIn(world.account(client), tokens: world.tokens()) }
            client.pins = [chain.leaf.pin]
            client.tokenEndpoint = try #require(URL(string: "http://127.0.0.1:\(world.server.port)/oauth/token"))
            await #expect(throws: EndpointError.self) { try await world.service.signIn(world.account(client), tokens: world.tokens()) }
            #expect(try world.vault.accounts.ids().isEmpty)

            let alice = try await world.signIn(pins: [chain.leaf.pin, chain.intermediate.pin, chain.leaf.pin])
            #expect(try world.vault.accounts.find(alice)?.client.pins == [chain.leaf.pin, chain.intermediate.pin])
        }
    }

    @Test("the matching pin: the refresh goes through and its tokens are stored")
    func matchingPinRefreshes() async throws {
        let chain = try TestChain()
        let answer = #"{"access_token":"access-pinned","refresh_token":"refresh-pinned","token_type":"Bearer","expires_in":3600}"#
        try await TransportWorld.run(chain: chain, answer: .json(200, answer)) { world in
            let alice = try await world.signIn(expiresIn: .zero, pins: [TestChain.unrelatedPin, chain.leaf.pin])
            #expect(try await world.service.validAccessToken().value == "access-pinned")
            #expect(try world.vault.tokens.current(for: alice)?.tokens.refreshToken == "refresh-pinned")
            #expect(world.server.log.value.requests.count == 1)
        }
    }

    @Test("an account's own CA file: its refresh trusts that bundle though the service's roots do not; another account's is refused")
    func accountCAFile() async throws {
        let chain = try TestChain()
        let directory = try TemporaryDirectory()
        let bundle = directory.url.appending(path: "corp-ca.pem")
        let base64 = Data(chain.root.der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        try Data("-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n".utf8).write(to: bundle)
        let answer = #"{"access_token":"access-private-ca","refresh_token":"refresh-private-ca","token_type":"Bearer","expires_in":3600}"#
        try await TransportWorld.run(chain: chain, serviceTrustsChain: false, answer: .json(200, answer)) { world in
            let alice = try await world.signIn(expiresIn: .zero, caFile: bundle.path)
            #expect(try world.vault.accounts.find(alice)?.client.caFile == bundle.path, "kept with the account")
            #expect(try await world.service.validAccessToken(for: alice).value == "access-private-ca")
            let bob = try await world.signIn(expiresIn: .zero, subject: "bob")
            await #expect(throws: SessionError.self) { try await world.service.validAccessToken(for: bob) }
            #expect(world.server.log.value.requests.count == 1, "only the account trusting the CA reached the server")
        }
    }

    @Test("a wrong pin: nothing sent, reported as pinning (not revoked, not unavailable), tokens and session kept, every time")
    func wrongPinIsItsOwnFailure() async throws {
        let chain = try TestChain()
        try await TransportWorld.run(chain: chain, answer: .json(200, #"{"access_token":"never","token_type":"Bearer"}"#)) { world in
            let alice = try await world.signIn(expiresIn: .zero, pins: [TestChain.unrelatedPin])
            for _ in 0..<2 {
                let error = await sessionError { try await world.service.validAccessToken() }
                guard case .pinningFailed(let account, let host, _)? = error else {
                    Issue.record("expected a pinning failure, got \(String(describing: error))")
                    return
                }
                #expect(account == alice)
                #expect(host == "127.0.0.1:\(world.server.port)")
            }
            #expect(try await world.service.status(of: alice) == .active)
            #expect(try world.vault.tokens.current(for: alice)?.tokens.refreshToken == "refresh-before")
            #expect(try world.vault.leases.state(for: alice).lastFailure?.contains("pinning failed") == true)
            #expect(await world.server.wait { $0.connections == 2 && $0.closedConnections == 2 })
            #expect(world.server.log.value.applicationBytes == 0, "not a byte of a request")
        }
    }

    @Test("a pinned account's bearer token never reaches a device API whose key is not pinned")
    func deviceRequestsCarryThePins() async throws {
        let chain = try TestChain()
        try await TransportWorld.run(chain: chain, answer: .json(200, #"{"devices":[]}"#)) { world in
            let alice = try await world.signIn(expiresIn: .seconds(3600), pins: [TestChain.unrelatedPin])
            let api = HTTPDeviceNotificationAPI(baseURL: world.server.url(""), session: world.service, transport: world.transport)
            do {
                _ = try await api.devices(account: alice)
                Issue.record("the device request went through a wrong pin")
            } catch DeviceAPIError.pinningFailed(let host, _) {
                #expect(host == "127.0.0.1:\(world.server.port)")
            }
            #expect(world.server.log.value.applicationBytes == 0)
        }
    }
}

// MARK: - World

/// A key-file vault on test time, a session service whose OAuth client sends through a
/// ``NIOTransport`` trusting the test chain (deadlines on the same test clock), and a loopback
/// server (TLS when a chain is given).
struct TransportWorld {
    let time: TestTime
    let vault: Vault
    let service: SessionService
    let server: LoopbackServer
    let transport: CountingTransport

    static func run(
        chain: TestChain? = nil, serviceTrustsChain: Bool = true, answer: LoopbackServer.Answer = .silence,
        configuration: SessionConfiguration = SessionConfiguration(),
        _ body: (TransportWorld) async throws -> Void
    ) async throws {
        let time = TestTime()
        let store = try TestVault(.keyFile)
        let vault = try store.create(clock: time.wallClock)
        let roots = try chain.flatMap { serviceTrustsChain ? try NIOTransport.TrustRoots(derCertificates: [$0.root.der]) : nil } ?? .system
        let transport = CountingTransport(NIOTransport(timeout: .seconds(600), trustRoots: roots))
        let oauth = OAuthClient(
            transport: transport, logger: store.logs.logger(label: "oauth"),
            requestDeadline: configuration.requestDeadline, clock: time.clock)
        let service = SessionService(
            vault: vault, oauth: oauth, clock: time.clock, wallClock: time.wallClock,
            configuration: configuration, logger: store.logs.logger(label: "session"))
        let server = try await LoopbackServer.start(tls: chain?.serverIdentity, answer: answer)
        let world = TransportWorld(time: time, vault: vault, service: service, server: server, transport: transport)
        do {
            try await body(world)
        } catch {
            await world.shutdown()
            throw error
        }
        await world.shutdown()
    }

    private func shutdown() async {
        await service.stop()
        await server.stop()
        if !vault.isClosed { vault.close() }
    }

    func account(_ client: OAuthClientSettings) -> NewAccount {
        NewAccount(issuer: "https://id.example.test", subject: "alice", client: client)
    }

    func tokens(expiresIn: Duration = .seconds(3600)) -> TokenSet {
        TokenSet(
            accessToken: "access-before", refreshToken: "refresh-before", idToken: nil, tokenType: "Bearer",
            accessTokenExpiresAt: time.now().addingTimeInterval(expiresIn.timeInterval), scopes: [])
    }

    /// Signs alice in against the loopback server's endpoints.
    func signIn(expiresIn: Duration = .seconds(3600), pins: [String] = [], caFile: String? = nil, subject: String = "alice") async throws -> AccountID {
        let client = OAuthClientSettings(
            tokenEndpoint: server.url("/oauth/token"), revocationEndpoint: server.url("/oauth/revoke"),
            clientID: "vault-cli", pins: pins, caFile: caFile)
        var new = account(client)
        new.subject = subject
        return try await service.signIn(new, tokens: tokens(expiresIn: expiresIn), policy: .tokensOnly).id
    }
}

/// Counts what it is asked to send, then sends it through the real transport.
final class CountingTransport: HTTPTransport {
    private let base: any HTTPTransport
    private let sent = Locked<[HTTPRequest]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    var requests: [HTTPRequest] { sent.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        sent.withLock { $0.append(request) }
        return try await base.send(request)
    }

    func trusting(caFile path: String) throws(TrustRootsError) -> any HTTPTransport {
        CountingTransport(try base.trusting(caFile: path))
    }
}
