import Foundation
import Logging
import VaultCrypto

/// One authorization code request (RFC 6749 §4.1.1) with PKCE S256 (RFC 7636), a `state`
/// bound to this attempt, and for OpenID Connect a `nonce`: the URL to open, and what the
/// answer and the code exchange are checked against. Its description shows none of the
/// verifier, the state or the nonce.
///
/// ```swift
/// let request = try AuthorizationRequest(endpoint: metadata.authorizationEndpoint!, clientID: "cli",
///                                        redirectURI: listener.redirectURI, scopes: ["openid"])
/// open(request.url)
/// ```
public struct AuthorizationRequest: Sendable, CustomStringConvertible {
    /// The URL to open in the browser.
    public let url: URL
    /// Where the browser is sent back (the loopback listener's URI).
    public let redirectURI: URL
    /// `state`: 256 random bits, base64url.
    public let state: String
    /// `nonce`: 256 random bits, base64url; nil without `openid`.
    public let nonce: String?
    /// The PKCE code verifier: 256 random bits, base64url (43 characters, RFC 7636 §4.1).
    public let codeVerifier: String
    /// `BASE64URL(SHA256(code_verifier))` (RFC 7636 §4.2).
    public let codeChallenge: String

    /// Builds the request. `maxAge` and `prompt` are OpenID Connect's (§3.1.2.1): `maxAge: .zero`
    /// or `prompt: "login"` make the provider authenticate the user again.
    public init(
        endpoint: URL, clientID: String, redirectURI: URL, scopes: [String],
        maxAge: Duration? = nil, prompt: String? = nil, loginHint: String? = nil
    ) throws(SignInError) {
        if let reason = EndpointRule.violation(endpoint) { throw .insecureEndpoint(field: "authorization_endpoint", reason: reason) }
        guard var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false) else {
            throw .insecureEndpoint(field: "authorization_endpoint", reason: "it is not a URL")
        }
        do {
            state = Base64URL.encode(try Random.bytes(32))
            nonce = scopes.contains("openid") ? Base64URL.encode(try Random.bytes(32)) : nil
            codeVerifier = Base64URL.encode(try Random.bytes(32))
        } catch {
            throw .listenerFailed(reason: "no randomness from libsodium")
        }
        codeChallenge = Self.challenge(for: codeVerifier)
        self.redirectURI = redirectURI
        var items = components.queryItems ?? []
        items += [
            URLQueryItem(name: "response_type", value: "code"),
            URLQueryItem(name: "client_id", value: clientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI.absoluteString),
            URLQueryItem(name: "state", value: state),
            URLQueryItem(name: "code_challenge", value: codeChallenge),
            URLQueryItem(name: "code_challenge_method", value: "S256"),
        ]
        if !scopes.isEmpty { items.append(URLQueryItem(name: "scope", value: scopes.joined(separator: " "))) }
        if let nonce { items.append(URLQueryItem(name: "nonce", value: nonce)) }
        if let maxAge { items.append(URLQueryItem(name: "max_age", value: "\(max(0, maxAge.components.seconds))")) }
        if let prompt { items.append(URLQueryItem(name: "prompt", value: prompt)) }
        if let loginHint { items.append(URLQueryItem(name: "login_hint", value: loginHint)) }
        // URLComponents leaves '+' alone in a query, and servers decode it as a space.
        components.percentEncodedQuery = items.map { item in
            FormURLEncoding.encode(item.name) + "=" + FormURLEncoding.encode(item.value ?? "")
        }.joined(separator: "&")
        guard let url = components.url else { throw .insecureEndpoint(field: "authorization_endpoint", reason: "it is not a URL") }
        self.url = url
    }

    /// `BASE64URL(SHA256(ASCII(verifier)))` (RFC 7636 §4.2).
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(Digest.sha256(Array(verifier.utf8)))
    }

    /// Checks the redirect's query (RFC 6749 §4.1.2; RFC 9207 §2.4) and returns the code.
    ///
    /// The `state` is checked first: an answer meant for another attempt is refused whatever it
    /// says. Then `iss`, when present or when the provider promised it, must be `issuer`. Then
    /// an `error` is the provider's refusal; else `code` is required.
    public func code(from query: [URLQueryItem], issuer: String?, issuerRequired: Bool = false) throws(SignInError) -> String {
        func value(_ name: String) -> String? { query.first { $0.name == name }?.value }
        guard let returned = value("state"), ConstantTime.equals(returned, state) else { throw .stateMismatch }
        if let iss = value("iss") {
            guard let issuer, iss == issuer else { throw .issuerParameterMismatch }
        } else if issuerRequired {
            throw .issuerParameterMismatch
        }
        let redaction = Redaction(secrets: [state, codeVerifier] + (nonce.map { [$0] } ?? []))
        if let error = value("error") {
            let detail = value("error_description").map { redaction.apply(to: OAuthClient.printable($0), limit: 300) }
            if error == "access_denied" { throw .authorizationDenied(description: detail) }
            throw .authorizationFailed(code: OAuthClient.printable(String(error.prefix(64))), description: detail)
        }
        guard let code = value("code"), !code.isEmpty, code.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw .malformedResponse(endpoint: "authorization endpoint", reason: "the redirect carries neither a code nor an error")
        }
        return code
    }

    public var description: String {
        "AuthorizationRequest(endpoint: \(url.hostForMessages), redirect: \(redirectURI.absoluteString), state: \(redacted(state)), verifier: \(redacted(codeVerifier)))"
    }
}

// MARK: - Code exchange (RFC 6749 §4.1.3, RFC 7636 §4.5)

extension OAuthClient {
    /// Exchanges an authorization code for tokens, proving possession of the PKCE verifier.
    /// With a DPoP key in `client`, whether the server bound the tokens to it is the caller's
    /// to judge (``TokenResponse/dpopBindingProblem(for:)``), so it can revoke what was issued
    /// when it did not.
    public func exchangeCode(
        _ code: String, of request: AuthorizationRequest, tokenEndpoint: URL, client: ClientCredentials, pins: [SPKIPin] = []
    ) async throws(SignInError) -> TokenResponse {
        if let reason = EndpointRule.violation(tokenEndpoint) { throw .insecureEndpoint(field: "token_endpoint", reason: reason) }
        let logger = logger(for: tokenEndpoint, operation: "authorization_code")
        let form = [
            ("grant_type", "authorization_code"), ("code", code),
            ("redirect_uri", request.redirectURI.absoluteString), ("code_verifier", request.codeVerifier),
        ]
        let (response, sent) = try await sendSignInForm(to: tokenEndpoint, form: form, client: client, pins: pins, step: .codeExchange, logger: logger)
        let secrets = [code, request.codeVerifier] + client.secrets + sent
        switch Self.classifyRefresh(response, secrets: secrets, now: now()) {
        case .success(let tokens):
            logger.debug("code exchanged", metadata: ["oauth.outcome": "success"])
            return tokens
        case .failure(let failure):
            logger.debug("code exchange failed", metadata: ["oauth.outcome": "\(failure.outcomeName)"])
            throw .tokenRequestFailed(failure, step: .codeExchange)
        }
    }

    /// Sends a form to a sign-in endpoint that answers with a token response (the guest
    /// protocol's registration); maps the answer like a token request.
    func tokenResponse(
        from endpoint: URL, field: String, step: SignInStep, form: [(String, String)], client: ClientCredentials,
        headers extra: HTTPHeaderFields = [:], secrets: [String] = [], pins: [SPKIPin]
    ) async throws(SignInError) -> TokenResponse {
        if let reason = EndpointRule.violation(endpoint) { throw .insecureEndpoint(field: field, reason: reason) }
        let logger = logger(for: endpoint, operation: field)
        var (request, sent) = await formRequest(to: endpoint, form: form, client: client, pins: pins)
        for field in extra { request.headers[field.name] = field.value }
        let allSecrets = secrets + client.secrets + sent
        let response = try await sendSignInRequest(request, step: step, secrets: allSecrets, logger: logger)
        switch Self.classifyRefresh(response, secrets: allSecrets, now: now()) {
        case .success(let tokens): return tokens
        case .failure(let failure): throw .tokenRequestFailed(failure, step: step)
        }
    }
}
