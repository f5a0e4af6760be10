import Foundation
import Logging

/// Who signed in, as the provider's userinfo endpoint says (OpenID Connect Core §5.3): for a
/// grant that brought no ID token (django-oauth-toolkit's device grant). Nothing in it is
/// signed: a sign-in records such a subject as not verified.
///
/// ```swift
/// let user = try await oauth.userinfo(endpoint: metadata.userinfoEndpoint!, accessToken: tokens.accessToken)
/// print(user.subject, user.preferredUsername ?? "")
/// ```
public struct UserInfo: Sendable, Hashable {
    public var subject: String
    public var preferredUsername: String?
    public var name: String?
    public var email: String?

    public init(subject: String, preferredUsername: String? = nil, name: String? = nil, email: String? = nil) {
        self.subject = subject
        self.preferredUsername = preferredUsername
        self.name = name
        self.email = email
    }
}

extension OAuthClient {
    /// Asks the userinfo endpoint who holds `accessToken` (a bearer GET, §5.3.1). Its `sub` is
    /// required; a signed (`application/jwt`) answer is refused, since nothing here would check it.
    /// A token bound to `dpopKey` goes as `DPoP` with a proof naming it (RFC 9449 §7.1), and a
    /// `use_dpop_nonce` answer is asked once more with the nonce.
    public func userinfo(endpoint: URL, accessToken: String, dpopKey: DPoPKey? = nil, pins: [SPKIPin] = []) async throws(SignInError) -> UserInfo {
        if let reason = EndpointRule.violation(endpoint) { throw .insecureEndpoint(field: "userinfo_endpoint", reason: reason) }
        let logger = logger(for: endpoint, operation: "userinfo")
        var response: HTTPResponse
        var retried = false
        while true {
            var headers: HTTPHeaderFields = ["Authorization": "Bearer " + accessToken, "Accept": "application/json"]
            if let dpopKey {
                headers["Authorization"] = "DPoP " + accessToken
                headers["DPoP"] = try? dpopKey.proof(
                    method: "GET", url: endpoint, accessToken: accessToken, nonce: dpopNonces.nonce(for: endpoint), now: now())
            }
            let request = HTTPRequest(method: .get, url: endpoint, headers: headers, pins: pins)
            response = try await sendSignInRequest(request, step: .userinfo, secrets: [accessToken], logger: logger)
            let fresh = dpopKey != nil && dpopNonces.remember(response, from: endpoint)
            guard fresh, !retried, response.asksForDPoPNonce else { break }
            retried = true
        }
        guard response.isSuccess else {
            logger.debug("userinfo refused", metadata: ["http.status": "\(response.status)"])
            if case .failure(let failure) = Self.classifyRefresh(response, secrets: [accessToken], now: now()) {
                throw .tokenRequestFailed(failure, step: .userinfo)
            }
            throw .malformedResponse(endpoint: "userinfo endpoint", reason: "HTTP \(response.status)")
        }
        guard response.body.count <= TokenResponse.maximumBodySize, let fields = JSONFields.parse(response.body) else {
            throw .malformedResponse(endpoint: "userinfo endpoint", reason: "the answer is not a JSON object (a signed userinfo answer is not read)")
        }
        func text(_ name: String) -> String? {
            guard case .string(let value)? = fields[name], !value.isEmpty, value.utf8.count <= 1024 else { return nil }
            return Self.printable(value)
        }
        guard let subject = text("sub") else { throw .malformedResponse(endpoint: "userinfo endpoint", reason: "sub is missing or not a string") }
        logger.debug("userinfo read", metadata: ["oauth.outcome": "success"])
        return UserInfo(subject: subject, preferredUsername: text("preferred_username"), name: text("name"), email: text("email"))
    }
}
