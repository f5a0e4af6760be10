import FlyingFox
import Foundation
import Logging

// MARK: - Authorization endpoint (RFC 6749 §4.1, RFC 7636, RFC 8252 §7.3, RFC 9207) and the browser session

extension DevGateway {
    nonisolated static var authorizationRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "GET /oauth/authorize") { gateway, request in
                await gateway.handleAuthorize(request)
            },
            GatewayRoute(route: "POST /admin/browser-user") { gateway, request in
                guard let user = AdminJSON.decode(AdminJSON.BrowserUser.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                await gateway.signInBrowserUser(user.subject, mode: user.mode ?? .approve)
                return .empty(status: 204)
            },
            GatewayRoute(route: "POST /admin/clients") { gateway, request in
                guard let client = AdminJSON.decode(AdminJSON.Client.self, from: await body(of: request)), !client.clientID.isEmpty else {
                    return AdminJSON.badRequest
                }
                await gateway.registerClient(id: client.clientID, secret: client.clientSecret)
                return .empty(status: 204)
            },
        ]
    }

    /// Send the user's browser here (`GET`) to sign in (RFC 6749 §4.1.1).
    public nonisolated var authorizationEndpoint: URL { baseURL.appendingPathComponent("oauth/authorize") }

    /// Reads the sign-in time from `now` instead of the system clock: ID-token `iat`, `exp`
    /// and `auth_time`, authorization-code and device-code expiry, the device polling interval.
    /// (The device-registration area has its own, see ``useClock(_:)``.)
    ///
    /// ```swift
    /// await gateway.setClock { testTime.now() }
    /// ```
    public func setClock(_ now: @escaping @Sendable () -> Date) {
        state.signIn.now = now
    }

    /// Signs `subject` in at the gateway's pretend browser session (their last authentication is
    /// now), or signs the session out with nil. The authorization endpoint then answers for
    /// them at once: with a code (`.approve`) or `error=access_denied` (`.deny`). With nobody
    /// signed in it shows a sign-in page and never redirects.
    ///
    /// ```swift
    /// await gateway.signInBrowserUser("alice")
    /// ```
    public func signInBrowserUser(_ subject: String?, mode: BrowserUserMode = .approve) {
        state.authorization.browserUser = subject
        state.authorization.browserMode = mode
        if let subject { state.authorization.authenticate(subject, at: signInNow()) }
        logger.debug("browser session", metadata: ["gateway.signed_in": "\(subject != nil)", "gateway.mode": "\(mode.rawValue)"])
    }

    /// Registers (or updates) a client for the authorization, device and guest endpoints:
    /// confidential (HTTP Basic) with a secret, public without.
    ///
    /// ```swift
    /// await gateway.registerClient(id: "vault-cli")
    /// ```
    public func registerClient(id: String, secret: String? = nil) {
        state.tokens.registerClient(id: id, secret: secret)
    }

    /// When `subject` last authenticated at the gateway (their ID tokens' `auth_time`), if ever.
    public func lastAuthentication(of subject: String) -> Date? {
        state.authorization.lastAuthentication[subject]
    }

    /// `GET /oauth/authorize`: checks the client and redirect URI (errors there are shown, never
    /// redirected, RFC 6749 §4.1.2.1), then answers for the browser user.
    func handleAuthorize(_ request: HTTPRequest) -> HTTPResponse {
        state.stats.authorizationRequests += 1
        statsDidChange()
        var metadata: Logger.Metadata = ["gateway.endpoint": "/oauth/authorize"]
        func shown(_ status: Int, _ message: String) -> HTTPResponse {
            metadata["gateway.outcome"] = "shown_error"
            logger.debug("authorization request", metadata: metadata)
            return .html(title: "Authorization request refused", paragraphs: [message], status: status)
        }

        let query = Self.queryString(of: request)
        let parameters: FormBody
        switch FormBody.parse(Data(query.utf8)) {
        case .success(let value): parameters = value
        case .failure(let rejection): return shown(400, rejection.description)
        }
        guard let clientID = parameters["client_id"], !clientID.isEmpty else {
            return shown(400, "client_id is required")
        }
        metadata["gateway.client_id"] = "\(clientID)"
        guard let client = state.tokens.clients[clientID] else {
            return shown(400, "unknown client \(clientID)")
        }
        guard let redirectURI = parameters["redirect_uri"] else {
            return shown(400, "redirect_uri is required")
        }
        guard AuthorizationLedger.isLoopbackRedirect(redirectURI) else {
            return shown(400, "redirect_uri must be http://127.0.0.1:<port>/<path> or http://[::1]:<port>/<path> (RFC 8252 §7.3)")
        }

        // From here on, errors go back to the client (RFC 6749 §4.1.2.1).
        let clientState = parameters["state"]
        func redirect(_ fields: [(String, String)], outcome: String) -> HTTPResponse {
            metadata["gateway.outcome"] = "\(outcome)"
            logger.debug("authorization request", metadata: metadata)
            var all = fields
            if let clientState { all.append(("state", clientState)) }
            all.append(("iss", issuer))
            return .redirect(to: Self.appendingQuery(all, to: redirectURI))
        }
        func refused(_ error: String, _ description: String) -> HTTPResponse {
            redirect([("error", error), ("error_description", description)], outcome: error)
        }

        guard parameters["response_type"] == "code" else {
            return refused("unsupported_response_type", "only response_type=code is supported")
        }
        if let challenge = parameters["code_challenge"] {
            guard parameters["code_challenge_method"] == "S256" else {
                return refused("invalid_request", "code_challenge_method must be S256")
            }
            guard AuthorizationLedger.isWellFormedChallenge(challenge) else {
                return refused("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters)")
            }
        } else if client.secret == nil {
            return refused("invalid_request", "public clients must send a code_challenge (PKCE, S256)")
        }
        var maxAge: Int?
        if let text = parameters["max_age"] {
            guard let value = Int(text), value >= 0 else { return refused("invalid_request", "max_age must be a non-negative integer") }
            maxAge = value
        }
        let prompts = Set((parameters["prompt"] ?? "").split(separator: " ").map(String.init))
        if prompts.contains("none"), prompts.count > 1 {
            return refused("invalid_request", "prompt=none cannot be combined with other values")
        }
        let scope = parameters["scope"] ?? "openid profile"
        // RFC 9449 §10: a JWK SHA-256 thumbprint, 43 base64url characters.
        if let jkt = parameters["dpop_jkt"], !AuthorizationLedger.isWellFormedChallenge(jkt) {
            return refused("invalid_request", "dpop_jkt must be the base64url SHA-256 thumbprint of a JWK (43 characters)")
        }

        guard let subject = self.state.authorization.browserUser else {
            if prompts.contains("none") { return refused("login_required", "nobody is signed in at the gateway") }
            metadata["gateway.outcome"] = "sign_in_page"
            logger.debug("authorization request", metadata: metadata)
            return .html(
                title: "Sign in at the development gateway",
                paragraphs: [
                    "Nobody is signed in at this development gateway, so this request waits here.",
                    "A test or demo signs a user in with POST \(baseURL.appendingPathComponent("admin/browser-user").absoluteString) "
                        + #"and {"subject": "alice", "mode": "approve"}, then starts the sign-in again."#,
                ])
        }
        guard self.state.authorization.browserMode == .approve else {
            return refused("access_denied", "the user denied the request")
        }
        let now = signInNow()
        if self.state.authorization.needsReauthentication(subject, maxAge: maxAge, promptLogin: prompts.contains("login"), now: now) {
            if prompts.contains("none") { return refused("login_required", "the user must sign in again") }
            if self.state.authorization.lastAuthentication[subject] != nil {
                self.state.stats.reauthentications += 1
                statsDidChange()
                metadata["gateway.reauthenticated"] = "true"
            }
            self.state.authorization.authenticate(subject, at: now)
        }
        let authTime = self.state.authorization.lastAuthentication[subject] ?? now
        let code = self.state.authorization.issueCode(
            clientID: clientID, redirectURI: redirectURI, codeChallenge: parameters["code_challenge"], nonce: parameters["nonce"],
            scope: scope, subject: subject, authTime: authTime, now: now, dpopJKT: parameters["dpop_jkt"])
        return redirect([("code", code)], outcome: "code_issued")
    }

    /// The raw query of the request target (after `?`), or empty.
    nonisolated static func queryString(of request: HTTPRequest) -> String {
        let target = request.target.rawValue
        guard let mark = target.firstIndex(of: "?") else { return "" }
        return String(target[target.index(after: mark)...])
    }

    /// `uri` with `fields` added to its query, each form-encoded (only unreserved characters kept).
    nonisolated static func appendingQuery(_ fields: [(String, String)], to uri: String) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        func encode(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }
        let added = fields.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
        return uri + (uri.contains("?") ? "&" : "?") + added
    }
}

extension AdminJSON {
    struct BrowserUser: Decodable {
        let subject: String?
        let mode: BrowserUserMode?
    }

    struct Client: Decodable {
        let clientID: String
        let clientSecret: String?

        enum CodingKeys: String, CodingKey {
            case clientID = "client_id"
            case clientSecret = "client_secret"
        }
    }
}
