// DevGateway: a development and test identity server (real HTTP on 127.0.0.1, in-memory
// state). Its HTTP API, every endpoint with its fields and errors, is the DocC article
// DevGateway.docc/HTTPAPI.md (`make docs`).

import FlyingFox
import Foundation
import Logging

/// A development identity server on 127.0.0.1: OpenID Connect discovery, signed ID tokens, the
/// authorization-code (PKCE), device and client credentials grants (the last with
/// `client_secret_basic`, `client_secret_post` or `private_key_jwt` service clients, see
/// ``registerServiceClient(id:authentication:scopes:accessTokenLifetime:)``), token and revocation endpoints over real HTTP,
/// with rotation, reuse detection, DPoP-bound tokens (RFC 9449: ``requireDPoPNonce(_:)``,
/// ``requireDPoP(forClient:)``), fault injection and counters for tests.
///
/// ```swift
/// let gateway = try await DevGateway.start(logger: logger)
/// let tokens = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
/// let client = OAuthClient(logger: logger)
/// let refreshed = try await client.refresh(
///     refreshToken: tokens.refreshToken ?? "",
///     endpoint: gateway.tokenEndpoint,
///     client: ClientCredentials(clientID: "vault-cli")
/// )
/// await gateway.stop()
/// ```
public actor DevGateway {
    /// `http://127.0.0.1:<port>`.
    public nonisolated let baseURL: URL
    /// `POST` here to refresh (RFC 6749 §6).
    public nonisolated var tokenEndpoint: URL { baseURL.appendingPathComponent("oauth/token") }
    /// `POST` here to revoke (RFC 7009).
    public nonisolated var revocationEndpoint: URL { baseURL.appendingPathComponent("oauth/revoke") }

    let logger: Logger
    var state = GatewayState()
    private let server: HTTPServer
    private var statsWaiters: [UUID: StatsWaiter] = [:]
    /// Token requests waiting for ``releaseTokenResponses()``: resumed with true on release,
    /// false when the gateway stops or the request's handler is cancelled.
    private var heldTokenRequests: [UUID: CheckedContinuation<Bool, Never>] = [:]
    private var isStopped = false

    private struct StatsWaiter {
        let predicate: @Sendable (GatewayStats) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private init(server: HTTPServer, port: UInt16, logger: Logger) {
        self.server = server
        self.logger = logger
        // An IPv4 literal and a port always make a valid URL.
        let baseURL = URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/")
        self.state.resources = ResourceServers(defaultsAt: baseURL)
        self.baseURL = baseURL
    }

    /// Starts a gateway on 127.0.0.1 with a port the system picks; returns once it accepts connections.
    ///
    /// ```swift
    /// let gateway = try await DevGateway.start(logger: Logger(label: "dev-gateway"))
    /// ```
    public static func start(logger: Logger = Logger(label: "DevGateway")) async throws -> DevGateway {
        let server = try LoopbackServer.make(logger: logger)
        let run = Task { try await server.run() }
        do {
            // A bound, not a wait: on a loaded 2-core machine the default 5 s was seen to run out.
            try await server.waitUntilListening(timeout: 60)
        } catch {
            run.cancel()
            throw DevGatewayError(message: "the gateway did not start listening on 127.0.0.1: \(error)")
        }
        guard let port = await LoopbackServer.port(of: server) else {
            await server.stop()
            throw DevGatewayError(message: "the gateway is listening but reports no IPv4 port")
        }
        let gateway = DevGateway(server: server, port: port, logger: logger)
        await gateway.registerRoutes(on: server)
        logger.debug("dev gateway listening", metadata: ["gateway.url": "\(gateway.baseURL)"])
        return gateway
    }

    /// Stops listening and drops open connections; later requests are refused. Idempotent.
    public func stop() async {
        guard !isStopped else { return }
        isStopped = true
        resumeHeldTokenRequests(released: false)
        await server.stop(timeout: 0)
        for waiter in statsWaiters.values { waiter.continuation.resume() }
        statsWaiters = [:]
        logger.debug("dev gateway stopped", metadata: ["gateway.url": "\(baseURL)"])
    }

    // MARK: - Grants

    /// Opens a grant for `subject` and returns its first tokens; registers (or updates) the client.
    /// With `openid` in `scope` the tokens carry a signed ID token whose `auth_time` is now.
    ///
    /// A `clientSecret` makes the client confidential (HTTP Basic); without one it is public.
    /// `rotatesRefreshTokens` overrides the gateway-wide setting for this grant.
    ///
    /// ```swift
    /// let tokens = await gateway.issueGrant(subject: "alice", clientID: "sync", clientSecret: "s3cr3t")
    /// ```
    public func issueGrant(
        subject: String,
        clientID: String,
        clientSecret: String? = nil,
        scope: String = "openid profile",
        accessTokenLifetime: Duration = .seconds(3600),
        rotatesRefreshTokens: Bool? = nil
    ) async -> IssuedTokens {
        let tokens = state.tokens.issueGrant(
            subject: subject,
            clientID: clientID,
            clientSecret: clientSecret,
            scope: scope,
            accessTokenLifetime: accessTokenLifetime,
            rotatesRefreshTokens: rotatesRefreshTokens,
            authTime: signInNow()
        )
        logger.debug("grant issued", metadata: ["gateway.grant_id": "\(tokens.grantID)", "gateway.client_id": "\(clientID)"])
        return await attachingIDToken(to: tokens)
    }

    /// Revokes every grant of `subject`, as an administrator signing them out; returns how many.
    /// With `forcedLogout`, each later refresh is refused the way Microsoft Entra ID documents
    /// that case (``ForcedLogout``); without, with a plain `invalid_grant`.
    public func revokeGrants(subject: String, as forcedLogout: ForcedLogout? = nil) -> Int {
        let count = state.tokens.revokeGrants(subject: subject, forcedLogout: forcedLogout)
        logger.debug("grants revoked by admin", metadata: ["gateway.revoked_grants": "\(count)"])
        return count
    }

    /// Sets whether refreshes issue a new refresh token, for grants that did not choose.
    public func setRefreshTokenRotation(_ enabled: Bool) {
        state.tokens.rotatesRefreshTokens = enabled
    }

    // MARK: - Fault injection

    /// Answers the next `count` token requests with `fault` instead of processing them.
    ///
    /// ```swift
    /// await gateway.failNextTokenRequests(with: TokenFault(status: 503))
    /// ```
    public func failNextTokenRequests(_ count: Int = 1, with fault: TokenFault) {
        state.faults.pendingTokenFailures += Array(repeating: fault, count: max(0, count))
    }

    /// Answers the next `count` revocation requests with `fault` instead of processing them.
    public func failNextRevocationRequests(_ count: Int = 1, with fault: TokenFault) {
        state.faults.pendingRevocationFailures += Array(repeating: fault, count: max(0, count))
    }

    /// Delays every token response by `latency` (server-side `Task.sleep`); `.zero` turns it off.
    public func setTokenLatency(_ latency: Duration) {
        state.faults.tokenLatency = max(.zero, latency)
    }

    /// Holds every token request, once counted, until ``releaseTokenResponses()``: a server
    /// that answers only after the client gave up, without racing a real-time delay against the
    /// client's timeout. Requests held when the gateway stops get a 503.
    ///
    /// ```swift
    /// await gateway.holdTokenResponses()
    /// // … the client times out; the gateway has the request but has not processed it …
    /// await gateway.releaseTokenResponses()
    /// await gateway.waitForStats { $0.tokenResponses >= 1 }
    /// ```
    public func holdTokenResponses() {
        state.faults.holdsTokenResponses = true
    }

    /// Lets held token requests (and later ones) be processed and answered.
    public func releaseTokenResponses() {
        state.faults.holdsTokenResponses = false
        resumeHeldTokenRequests(released: true)
    }

    /// Clears queued failures and latency, releases held token requests, and restores resource
    /// indicators (honoured, JWT access tokens: see ``ignoreResourceIndicators(_:)``).
    public func resetFaults() {
        state.faults = FaultPlan()
        resumeHeldTokenRequests(released: true)
    }

    // MARK: - Observation

    /// Token requests received so far, faulted ones included.
    public func tokenRequestCount() -> Int { state.stats.tokenRequests }

    /// Every refresh token presented to `/oauth/token`, in arrival order.
    public func presentedRefreshTokens() -> [String] { state.stats.presentedRefreshTokens }

    /// Times a spent refresh token was presented again and its family revoked.
    public func reuseDetections() -> Int { state.stats.reuseDetections }

    /// All counters at once.
    public func stats() -> GatewayStats { state.stats }

    /// Suspends until the counters satisfy `predicate` (or the gateway stops): an event to await
    /// instead of sleeping.
    ///
    /// ```swift
    /// await gateway.waitForStats { $0.tokenResponses >= 1 }
    /// ```
    public func waitForStats(where predicate: @escaping @Sendable (GatewayStats) -> Bool) async {
        guard !isStopped, !predicate(state.stats) else { return }
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if Task.isCancelled {
                    continuation.resume()
                } else {
                    statsWaiters[id] = StatsWaiter(predicate: predicate, continuation: continuation)
                }
            }
        } onCancel: {
            Task { await self.cancelStatsWaiter(id) }
        }
    }

    /// Suspends until the counters satisfy `predicate`, for at most `bound` of real time;
    /// returns whether they do. The bound only turns a lost request into a failure instead of a
    /// hang: nothing waits for time to pass when the counters get there.
    ///
    /// ```swift
    /// #expect(await gateway.waitForStats(upTo: .seconds(60)) { $0.tokenRequests >= 1 })
    /// ```
    public func waitForStats(
        upTo bound: Duration,
        where predicate: @escaping @Sendable (GatewayStats) -> Bool
    ) async -> Bool {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForStats(where: predicate) }
            group.addTask { try? await Task.sleep(for: bound) }
            _ = await group.next()
            group.cancelAll()
        }
        return predicate(state.stats)
    }

    /// Resumes waiters whose condition now holds; call after every change to `state.stats`.
    func statsDidChange() {
        let stats = state.stats
        for (id, waiter) in statsWaiters where waiter.predicate(stats) {
            statsWaiters[id] = nil
            waiter.continuation.resume()
        }
    }

    private func cancelStatsWaiter(_ id: UUID) {
        statsWaiters.removeValue(forKey: id)?.continuation.resume()
    }

    /// Suspends a token request until ``releaseTokenResponses()`` (true) or until the gateway
    /// stops or the handler is cancelled (false).
    func heldUntilReleased() async -> Bool {
        guard !isStopped else { return false }
        let id = UUID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                if Task.isCancelled {
                    continuation.resume(returning: false)
                } else if !state.faults.holdsTokenResponses {
                    continuation.resume(returning: true)
                } else {
                    heldTokenRequests[id] = continuation
                }
            }
        } onCancel: {
            Task { await self.cancelHeldTokenRequest(id) }
        }
    }

    private func cancelHeldTokenRequest(_ id: UUID) {
        heldTokenRequests.removeValue(forKey: id)?.resume(returning: false)
    }

    private func resumeHeldTokenRequests(released: Bool) {
        let held = heldTokenRequests.values
        heldTokenRequests = [:]
        for continuation in held { continuation.resume(returning: released) }
    }
}

/// The gateway could not start.
public struct DevGatewayError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var message: String
    /// Same as ``message``.
    public var description: String { message }
}

extension DevGatewayError: LocalizedError {
    /// Same as ``message``.
    public var errorDescription: String? { message }
}
