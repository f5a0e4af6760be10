import DevGateway
import Foundation
import Logging
import Testing
import VaultOAuth
import VaultSession
import VaultStore
import VaultSync
import VaultTestSupport

/// One test's world: a DevGateway on loopback, a key-file vault on disk, test time, and a
/// session service over a recording OAuth transport, all logging into captured logs.
/// ``run(configuration:transportTimeout:extensionHandler:_:)`` tears everything down.
///
/// ```swift
/// try await SessionHarness.run { h in
///     let alice = try await h.signIn("alice", expiresIn: .seconds(30))
///     let token = try await h.service.validAccessToken()
/// }
/// ```
final class SessionHarness: Sendable {
    static let clientID = "vault-cli"

    let gateway: DevGateway
    let store: TestVault
    let time: TestTime
    let transport: RecordingTransport
    let oauth: OAuthClient
    let configuration: SessionConfiguration
    let vault: Vault
    let service: SessionService
    let events: EventLog
    /// What the gateway logged (kept apart: it is not the library under test).
    let gatewayLogs = CapturedLogs()

    private let issued = Locked<[String: IssuedTokens]>([:])
    private let subjects = Locked<[AccountID: String]>([:])
    private let others = Locked<(vaults: [Vault], services: [SessionService])>(([], []))

    /// Logs of the vault, the OAuth client and the session service.
    var logs: CapturedLogs { store.logs }

    private init(
        configuration: SessionConfiguration, transportTimeout: Duration,
        extensionHandler: (@Sendable (AccountID) async -> Bool)?
    ) async throws {
        gateway = try await DevGateway.start(logger: gatewayLogs.logger(label: "gateway"))
        do {
            store = try TestVault(.keyFile)
            time = TestTime()
            transport = RecordingTransport(timeout: transportTimeout)
            oauth = OAuthClient(transport: transport, logger: store.logs.logger(label: "oauth"), now: time.wallClock.now)
            self.configuration = configuration
            vault = try store.create(clock: time.wallClock)
            service = SessionService(
                vault: vault, oauth: oauth, clock: time.clock, wallClock: time.wallClock,
                configuration: configuration, logger: store.logs.logger(label: "session"),
                extensionHandler: extensionHandler)
            events = EventLog(service)
        } catch {
            await gateway.stop()
            throw error
        }
    }

    static func run(
        configuration: SessionConfiguration = .testing,
        transportTimeout: Duration = TestTimeScale.scaled(.seconds(10)),
        extensionHandler: (@Sendable (AccountID) async -> Bool)? = nil,
        _ body: (SessionHarness) async throws -> Void
    ) async throws {
        let harness = try await SessionHarness(
            configuration: configuration, transportTimeout: transportTimeout,
            extensionHandler: extensionHandler)
        do {
            try await body(harness)
        } catch {
            await harness.shutdown()
            throw error
        }
        await harness.shutdown()
    }

    private func shutdown() async {
        await service.stop()
        let (vaults, services) = others.withLock { $0 }
        for other in services { await other.stop() }
        for other in vaults where !other.isClosed { other.close() }
        if !vault.isClosed { vault.close() }
        await gateway.stop()
    }

    // MARK: - Accounts

    /// The account as a tool would add it after an interactive sign-in at the gateway.
    /// `introspection`: the account's stored provider metadata names the gateway's
    /// introspection endpoint, as a sign-in through discovery stores it.
    func newAccount(_ subject: String, revocation: Bool = true, introspection: Bool = false) -> NewAccount {
        var provider = ProviderMetadata(issuer: gateway.baseURL.absoluteString, tokenEndpoint: gateway.tokenEndpoint)
        provider.introspectionEndpoint = gateway.introspectionEndpoint
        return NewAccount(
            issuer: gateway.baseURL.absoluteString, subject: subject, label: "\(subject) (test)", email: "\(subject)@example.test",
            client: OAuthClientSettings(
                tokenEndpoint: gateway.tokenEndpoint,
                revocationEndpoint: revocation ? gateway.revocationEndpoint : nil,
                clientID: Self.clientID, scopes: ["openid", "profile"]),
            providerMetadata: introspection ? provider.encoded() : nil)
    }

    /// Opens a grant at the gateway and signs in with its tokens, the access token expiring
    /// `expiresIn` from now (test time). Returns the new account's id.
    @discardableResult
    func signIn(
        _ subject: String, expiresIn: Duration = .seconds(3600), policy: SessionPolicy? = nil,
        rotatesRefreshTokens: Bool? = nil, revocation: Bool = true, introspection: Bool = false
    ) async throws -> AccountID {
        let tokens = await gateway.issueGrant(subject: subject, clientID: Self.clientID, rotatesRefreshTokens: rotatesRefreshTokens)
        issued.withLock { $0[subject] = tokens }
        let account = try await service.signIn(
            newAccount(subject, revocation: revocation, introspection: introspection),
            tokens: TokenSet(
                accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, idToken: tokens.idToken,
                tokenType: tokens.tokenType, accessTokenExpiresAt: time.now().addingTimeInterval(expiresIn.timeInterval),
                scopes: tokens.scope.split(separator: " ").map(String.init)),
            policy: policy)
        subjects.withLock { $0[account.id] = subject }
        return account.id
    }

    /// The tokens the gateway first issued to `subject`.
    func firstTokens(of subject: String) throws -> IssuedTokens {
        try #require(issued.withLock { $0[subject] })
    }

    func subject(of account: AccountID) -> String? { subjects.withLock { $0[account] } }

    /// The access token the vault holds for the account now.
    func storedAccessToken(_ account: AccountID) throws -> String? {
        try vault.tokens.current(for: account)?.tokens.accessToken
    }

    // MARK: - Other instances ("other processes" in this process)

    /// Opens the same vault file again: its own connections and keys, like another process.
    func openAnotherVault() throws -> Vault {
        let other = try store.open(clock: time.wallClock)
        others.withLock { $0.vaults.append(other) }
        return other
    }

    /// A service on `vault` with this test's clocks and transport.
    func makeService(on vault: Vault, configuration: SessionConfiguration? = nil) -> SessionService {
        let other = SessionService(
            vault: vault, oauth: oauth, clock: time.clock, wallClock: time.wallClock,
            configuration: configuration ?? self.configuration,
            logger: store.logs.logger(label: "session.other"))
        others.withLock { $0.services.append(other) }
        return other
    }

    /// Starts a SessionProbe child on this vault at this test's wall-clock time (or `now`).
    func probe(_ operation: String, _ argument: String, now: Date? = nil) throws -> ChildProgram {
        guard case .keyFile(let keyFile) = store.credential else { throw ProbeError(message: "probes need a key-file vault") }
        return try .sessionProbe(vault: store.url, keyFile: keyFile, operation: operation, argument: argument, now: now ?? time.now())
    }

    /// Waits until the gateway's counters satisfy `predicate` (a real event: a request
    /// arrived or was answered); false, with an issue, if that does not happen in `timeout`.
    @discardableResult
    func waitForGateway(
        timeout: Duration = TestTimeScale.scaled(.seconds(10)), sourceLocation: SourceLocation = #_sourceLocation,
        _ predicate: @escaping @Sendable (GatewayStats) -> Bool
    ) async -> Bool {
        let met = await gateway.waitForStats(upTo: timeout, where: predicate)
        let stats = await gateway.stats()
        #expect(met, "the gateway did not get there in \(timeout): \(stats)", sourceLocation: sourceLocation)
        return met
    }

    /// Checks how many requests reached the gateway's token endpoint so far.
    func expectTokenRequests(_ expected: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        let received = await gateway.tokenRequestCount()
        #expect(received == expected, "token requests received by the gateway", sourceLocation: sourceLocation)
    }

    // MARK: - Token bookkeeping

    /// Every token value that crossed the wire or was issued at sign-in.
    var everyTokenValue: Set<String> {
        var values = Set<String>()
        for tokens in issued.withLock({ Array($0.values) }) {
            values.formUnion([tokens.accessToken, tokens.refreshToken, tokens.idToken].compactMap { $0 })
        }
        for exchange in transport.exchanges {
            values.formUnion([exchange.presentedRefreshToken, exchange.revokedToken].compactMap { $0 })
            if let response = exchange.response {
                values.formUnion([response.accessToken, response.refreshToken, response.idToken].compactMap { $0 })
            }
        }
        return values
    }

    /// The subject whose grant issued `accessToken`, following each refresh token through
    /// its rotations from the sign-in; nil for a token the test never saw.
    func owner(ofAccessToken accessToken: String) -> String? {
        var ownerOfRefreshToken: [String: String] = [:]
        var ownerOfAccessToken: [String: String] = [:]
        for (subject, tokens) in issued.withLock({ $0 }) {
            ownerOfAccessToken[tokens.accessToken] = subject
            if let refresh = tokens.refreshToken { ownerOfRefreshToken[refresh] = subject }
        }
        for exchange in transport.exchanges {
            guard let presented = exchange.presentedRefreshToken, let subject = ownerOfRefreshToken[presented],
                let response = exchange.response
            else { continue }
            ownerOfAccessToken[response.accessToken] = subject
            if let rotated = response.refreshToken { ownerOfRefreshToken[rotated] = subject }
        }
        return ownerOfAccessToken[accessToken]
    }

    /// Records an issue for every token value found in the captured logs.
    func expectNoTokenInLogs(sourceLocation: SourceLocation = #_sourceLocation) {
        let values = everyTokenValue
        #expect(!values.isEmpty, sourceLocation: sourceLocation)
        let leaked = values.filter { logs.contains($0) }
        #expect(leaked.isEmpty, "\(leaked.count) token value(s) appear in the session, OAuth or vault logs", sourceLocation: sourceLocation)
        #expect(!logs.lines.isEmpty, "nothing was logged: the check above proves nothing", sourceLocation: sourceLocation)
    }
}

extension SessionConfiguration {
    /// Defaults, but the watch for other processes ticks rarely, so advancing the test clock
    /// by minutes does not wake it thousands of times. Tests of the watch set their own.
    static var testing: SessionConfiguration {
        var configuration = SessionConfiguration()
        configuration.observationInterval = .seconds(3600)
        return configuration
    }
}

extension SessionPolicy {
    /// No idle timeout, a day of absolute lifetime: for tests about tokens, not timeouts.
    static var tokensOnly: SessionPolicy { SessionPolicy(idleTimeout: nil, absoluteLifetime: .seconds(24 * 3600)) }
}

/// Runs `body` expecting it to throw a ``SessionError``; returns it (nil, with an issue, otherwise).
func sessionError<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T) async -> SessionError? {
    do {
        let value = try await body()
        Issue.record("expected a SessionError, got \(value)", sourceLocation: sourceLocation)
        return nil
    } catch let error as SessionError {
        return error
    } catch {
        Issue.record("expected a SessionError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
