// DevGateway — a development identity server: real HTTP on 127.0.0.1, in-memory state.
//
// HTTP API
// ========
// Every JSON response carries `Content-Type: application/json` and `Cache-Control: no-store`.
// OAuth errors are RFC 6749 §5.2 bodies: `{"error": "<code>", "error_description": "<text>"}`.
//
// Times of the sign-in endpoints (ID tokens, codes, device codes, polling) come from the token
// clock, `setClock(_:)`; the issuer is `baseURL` exactly, e.g. `http://127.0.0.1:41234`.
//
// GET  /.well-known/openid-configuration   OpenID Provider metadata (OpenID Connect Discovery 1.0 §4)
// GET  /.well-known/oauth-authorization-server  the same document (RFC 8414 §3)
//   200 {"issuer", "authorization_endpoint", "token_endpoint", "revocation_endpoint",
//   "device_authorization_endpoint", "jwks_uri", "response_types_supported": ["code"],
//   "response_modes_supported": ["query"], "grant_types_supported", "code_challenge_methods_supported":
//   ["S256"], "subject_types_supported", "id_token_signing_alg_values_supported" (of the published keys),
//   "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"], "scopes_supported",
//   "claims_supported", "prompt_values_supported", "authorization_response_iss_parameter_supported": true,
//   "guest_endpoint", "guest_conversion_endpoint" (absent when conversion is off)}
//   /admin/discovery can turn the first into a 404, publish another issuer, or leave fields out.
// GET  /oauth/jwks                      200 {"keys": [{"kty", "kid", "alg", "use": "sig", "crv"?, "x"?, "y"?,
//                                       "n"?, "e"?}]}: the current signing key and earlier unretired ones
//
// GET  /oauth/authorize?response_type=code&client_id&redirect_uri&scope&state&code_challenge
//      &code_challenge_method=S256[&nonce][&max_age][&prompt=login|none]   (RFC 6749 §4.1, RFC 7636)
//   400 text/html               unknown client, missing redirect_uri, or one that is not
//                               http://127.0.0.1:<any port>/<path> or http://[::1]:… (RFC 8252 §7.3): never redirected
//   200 text/html               nobody is signed in at the browser session: a sign-in page, no redirect
//   302 redirect_uri?code=…&state=…&iss=<issuer>       the browser user approves (RFC 9207 `iss`)
//   302 redirect_uri?error=…&error_description=…&state=…&iss=…   access_denied (the user denies),
//       invalid_request (no PKCE from a public client, a method other than S256, bad max_age),
//       unsupported_response_type, login_required (prompt=none and a sign-in would be needed)
//   max_age=N (N seconds since the last authentication passed, or N == 0) or prompt=login makes
//   the user authenticate again: auth_time moves to now. A code is single use, lives 60 s, and is
//   bound to client, redirect_uri, code_challenge, nonce, scope, subject and auth_time.
//
// POST /oauth/device_authorization      (form: client_id or HTTP Basic, scope; RFC 8628 §3.1)
//   200 {"device_code", "user_code": "BCDF-GHJK", "verification_uri": <base>/device,
//        "verification_uri_complete", "expires_in" (600), "interval" (5)}
// GET  /device                          text/html naming the admin endpoint that approves a user code
//
// POST /guest/register                  (form: client_id or HTTP Basic, scope)
//   200 a token response for a new subject `guest-<hex>`; its ID token has "guest": true
// POST /guest/convert                   `Authorization: Bearer <registered user's access token>`,
//                                       form guest_refresh_token (+ client_id of the same client)
//   200 {"converted": true, "guest_subject", "subject"}: the guest's grants are revoked
//   400 invalid_grant (unknown, revoked or rotated guest token), 400 invalid_request,
//   401 invalid_token (bad bearer), 404 when conversion is turned off
//
// POST /oauth/token                     (application/x-www-form-urlencoded, RFC 6749 §4.1.3, §6; RFC 8628 §3.4)
//   grant_type=refresh_token: refresh_token (required), scope (optional, a subset of the grant's).
//   grant_type=authorization_code: code, redirect_uri (as in the authorization request), code_verifier
//     (BASE64URL(SHA256(verifier)) must be the code_challenge). Any attempt spends the code; a code
//     presented again revokes the grant it opened.
//   grant_type=urn:ietf:params:oauth:grant-type:device_code: device_code. 400 authorization_pending
//     until the user answers, 400 slow_down when polled sooner than `interval` after the previous poll
//     (the code's interval then grows by 5 s), 400 access_denied, 400 expired_token; tokens once, then
//     invalid_grant.
//   Client authentication: public clients send client_id in the body; confidential clients send
//   `Authorization: Basic base64(formEncode(client_id) ":" formEncode(secret))` (RFC 6749 §2.3.1).
//   200 {"access_token","token_type":"Bearer","expires_in","refresh_token"?,"scope","id_token"?}
//       The presented refresh token is rotated: a new one is returned and the old one is spent.
//       With rotation off (per grant or globally) no refresh_token is returned: keep the old one.
//       id_token (scope with openid only): a JWS {alg, kid, typ: "JWT"} signed by the current key with
//       iss, sub, aud = azp = client_id, iat, exp (iat + 10 min), auth_time, nonce (code grant, when
//       the authorization request had one), "guest": true for guests. Refreshes get a fresh one.
//   400 invalid_request         missing/repeated parameter, body not form-encoded
//   401 invalid_client          unknown client, wrong or missing secret (with WWW-Authenticate: Basic)
//   400 unsupported_grant_type  any other grant_type
//   400 invalid_grant           unknown token, token of another client, revoked grant, or a spent
//                               (rotated) token presented again — which revokes the whole family
//                               (RFC 9700 §4.14.2), so every token of that grant fails from then on;
//                               unknown, used, expired or other client's code, wrong code_verifier,
//                               redirect_uri mismatch
//   400 invalid_scope           scope wider than the grant
//   Injected faults and latency (see /admin/faults) apply here, to every grant type. A delayed request
//   is processed after the delay even if the client has given up, like a real server whose answer is lost.
//
// POST /oauth/revoke                    (application/x-www-form-urlencoded, RFC 7009)
//   token (required), token_type_hint (optional: refresh_token | access_token); client auth as above.
//   200 (empty)                 the token's grant is revoked, or the token was unknown
//   400 unsupported_token_type  token_type_hint is neither refresh_token nor access_token
//   400 unauthorized_client     the token belongs to another client
//   400 invalid_request, 401 invalid_client as for /oauth/token
//
// Admin (no authentication: loopback only, for tests and demos)
// POST /admin/grants                    JSON {"subject", "client_id", "client_secret"?, "scope"?,
//                                       "access_token_lifetime"? (seconds), "rotate_refresh_tokens"?}
//   201 the token response above plus "grant_id"; 400 {"error":"invalid_request"} for bad JSON
// POST /admin/grants/{subject}/revoke   revoke every grant of the (percent-encoded) subject
//   200 {"revoked_grants": n}
// POST /admin/faults/token-failures     JSON {"status", "count"? (default 1), "retry_after"?, "error"?, "body"?,
//                                       "echo_request"? (error_description repeats the request in many encodings)}
// POST /admin/faults/revocation-failures  same, for /oauth/revoke
//   204; the next `count` requests get `status` (with Retry-After, a JSON OAuth `error`, or a raw
//   text body when given; plain text "injected failure" otherwise) and change no state
// POST /admin/faults/token-latency      JSON {"milliseconds"} — delay before every token response; 204
// POST /admin/faults/reset              clear queued failures and latency; 204
// POST /admin/settings                  JSON {"rotate_refresh_tokens": bool} — default for grants
//                                       that did not choose; 204
// GET  /admin/stats                     200 {"token_requests", "token_responses", "revocation_requests",
//                                       "reuse_detections", "presented_refresh_tokens": [...],
//                                       "authorization_requests", "reauthentications", "device_authorizations",
//                                       "device_polls", "slow_downs", "guest_registrations", "guest_conversions"}
//
// Sign-in admin (no authentication)
// POST /admin/clients                   {"client_id", "client_secret"?}: register a client; 204
// POST /admin/browser-user              {"subject": string | null, "mode"?: "approve" | "deny"}: who is signed
//                                       in at the browser session (their last authentication is now); 204
// POST /admin/discovery                 {"openid_configuration"? (default true), "issuer"?, "omit"?: [field]};
//                                       replaces the discovery settings; 204
// POST /admin/keys/rotate               {"algorithm"?: "ES256" | "RS256" | "EdDSA", "retire_previous"?: bool}
//                                       200 {"kid"}: a new signing key; earlier ones stay published unless retired
// POST /admin/faults/id-token           {"fault", "count"?}: defects for the next ID tokens; fault is one of
//                                       bad_signature, alg_none, hs256, unknown_key, wrong_issuer, wrong_audience,
//                                       expired, issued_in_future, wrong_nonce, omitted; 204
// POST /admin/device-grant              {"interval"? (s, 0 = no slow_down), "expires_in"? (s)}; 204
// POST /admin/device/approve            {"user_code", "subject"}: the user approves (and authenticates)
// POST /admin/device/deny               {"user_code"}
// POST /admin/device/expire             {"user_code"}
//   200 {"ok": true} | 404 {"ok": false} (unknown, already answered or expired code)
//
// Devices and notifications                (JSON; times are milliseconds since 1970)
// Every call sends `Authorization: Bearer <access token>` issued by this gateway; the token's
// grant names the subject (account), and the device that grant registered as is the caller.
//   401 invalid_token          no, unknown or revoked access token (WWW-Authenticate: Bearer)
//   401 device_revoked         the caller's device was revoked (its grants are revoked with it)
//   403 device_not_registered  the grant has not registered a device yet
//   403 device_not_active      the caller's device is not active (body has "status")
// Errors are {"error", "error_description"} plus the fields named below.
// A device is {"registration_id", "device_id", "name", "platform", "status": pending | active |
//   rejected | revoked | expired, "activation_method"?: primary | verify | fallback,
//   "status_reason"?, "created_at", "updated_at", "last_activity_at"?}. One registration per
//   subject and device id; its id never changes.
// POST /devices                         {"device_id", "name", "platform"}: register the caller's device
//   200 {"device", "options"?}  active (primary) when the subject has no other active device;
//                               else pending with "options": ["verify", "fallback"] (the codelab's
//                               addNewDeviceOptions). Binds the grant to the device.
//   409 grant_bound_to_other_device
// GET  /devices                         200 {"devices": [...]} (active caller)
// GET  /devices/{device_id}             200 {"device"}; the caller's own at any status, others if active
// POST /devices/{device_id}/verify      the caller's own pending device: an approval notification
//                                       (actions approve/reject) goes to the subject's active devices
//   202 {"notification_uuid", "expires_at", "device"}; 409 not_pending {"status"}, 409 no_active_device
// POST /devices/{device_id}/fallback    issue an activation code, delivered out of band
//   202 {"method": "activation_code", "delivery": "out_of_band", "code_length", "device"}
// POST /devices/{device_id}/activate    {"code"}  200 {"device"} active (fallback);
//   400 invalid_code {"attempts_left", "status"} — after 5 wrong codes the device is rejected;
//   409 fallback_not_started, 409 not_pending
// POST /devices/{device_id}/cancel      {"reason": "cancelled" | "expired"}: end a pending activation;
//   the approval request is dismissed (or expired); 200 {"device"} status expired with the reason
// POST /devices/{device_id}/rename      {"name"}  200 {"device"} (active caller)
// POST /devices/{device_id}/revoke      terminate a device of the subject, the caller's too (active
//                                       caller); its grants are revoked. 200 {"device"}
// GET  /notifications?record_count=&start_index=&start_date=&end_date=   (active caller)
//   Newest first; start_index counts from 1; record_count 0 = all; start_date <= created < end_date.
//   200 {"notifications": [{"notification_uuid", "subject", "message", "actions": [{"label",
//   "action", "auth_level"?}], "created_at", "expires_at"?, "status": pending | answered | expired
//   | dismissed, "action_performed"?, "answered_at"?, "answered_by_device"?}], "total_count",
//   "start_index", "record_count"}
// POST /notifications/{uuid}/answer     {"action"} (active caller): the first answer wins
//   200 {"notification"}; answering an approval request "approve" activates the waiting device
//   (verify), "reject" rejects it
//   409 already_answered {"action_performed", "answered_by_device", "answered_at"}
//   410 expired {"expired_at"}, 410 dismissed, 400 unknown_action {"offered_actions"}, 404 not_found
// A pending notification past its expiry is expired (an approval request's device with it).
// POST /sessions/extend                 (any valid access token) the codelab's extendSessionIdleTimeout:
//   200 {"status_code": 200}; refused (DevGateway.setExtensionRefusal): 403 {"status_code": 403,
//   "error_code", "error_message", "error", "error_description"}
//
// Protected resource (RFC 6750)
// GET  /api/profile                     Bearer access token: 200 {"sub", "scope", "client_id"};
//                                       401 invalid_token (WWW-Authenticate: Bearer) otherwise
// POST /admin/tokens/invalidate         {"subject"}: the resource refuses that subject's access
//                                       tokens issued so far (grants stay; a refresh gets a new one)
//                                       200 {"invalidated": n}
//
// Device admin (no authentication)
// POST /admin/devices/{subject}/{device_id}/revoke          200 {"revoked": bool}
// GET  /admin/devices/{subject}/{device_id}/activation-code 200 {"code"} | 404 (the out-of-band channel)
// POST /admin/notifications             JSON {"subject", "message", "title"?, "actions"?: [{"label",
//                                       "action", "auth_level"?}], "expires_in"? (seconds)}
//   201 {"notification"}
// POST /admin/clock                     {"advance_seconds"}: move the device area's clock; 204
// POST /admin/device-settings           {"approval_lifetime"? (seconds, default 300)}; 204

import FlyingFox
import Foundation
import Logging

/// A development identity server on 127.0.0.1: OpenID Connect discovery, signed ID tokens, the
/// authorization-code (PKCE) and device grants, token and revocation endpoints over real HTTP,
/// with rotation, reuse detection, fault injection and counters for tests.
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
        self.baseURL = URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/")
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
    public func revokeGrants(subject: String) -> Int {
        let count = state.tokens.revokeGrants(subject: subject)
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

    /// Clears queued failures and latency, and releases held token requests.
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
