import Foundation
import Logging

/// A device authorization response (RFC 8628 §3.2): what to show the user, and the device
/// code to poll with. Its description never shows the device code.
public struct DeviceAuthorization: Sendable, Hashable, CustomStringConvertible {
    /// The code this client polls with (`device_code`): a credential, never shown.
    public var deviceCode: String
    /// The code the user types (`user_code`).
    public var userCode: String
    /// Where the user types it (`verification_uri`).
    public var verificationURI: URL
    /// The same page with the code filled in (`verification_uri_complete`), if offered.
    public var verificationURIComplete: URL?
    /// Seconds until the codes expire (`expires_in`).
    public var expiresIn: Int
    /// Seconds to wait between polls (`interval`, default 5 — RFC 8628 §3.2).
    public var interval: Int

    public init(
        deviceCode: String, userCode: String, verificationURI: URL, verificationURIComplete: URL? = nil,
        expiresIn: Int, interval: Int = 5
    ) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresIn = expiresIn
        self.interval = interval
    }

    public var description: String {
        "DeviceAuthorization(userCode: \(userCode), verify: \(verificationURI.hostForMessages), expiresIn: \(expiresIn), interval: \(interval), deviceCode: \(redacted(deviceCode)))"
    }
}

// MARK: - Device authorization grant (RFC 8628)

extension OAuthClient {
    /// The grant type of a device access token request (RFC 8628 §3.4).
    public static let deviceCodeGrantType = "urn:ietf:params:oauth:grant-type:device_code"

    /// Asks the device authorization endpoint for a device code and a user code (RFC 8628 §3.1).
    public func requestDeviceAuthorization(
        endpoint: URL, client: ClientCredentials, scopes: [String], pins: [SPKIPin] = []
    ) async throws(SignInError) -> DeviceAuthorization {
        if let reason = EndpointRule.violation(endpoint) { throw .insecureEndpoint(field: "device_authorization_endpoint", reason: reason) }
        let logger = logger(for: endpoint, operation: "device_authorization")
        var form: [(String, String)] = []
        if !scopes.isEmpty { form.append(("scope", scopes.joined(separator: " "))) }
        var plain = client
        plain.dpopKey = nil  // not a token endpoint: no DPoP proof (RFC 9449 §5)
        let (request, sent) = await formRequest(to: endpoint, form: form, client: plain, pins: pins)
        let response = try await sendSignInRequest(request, step: .deviceAuthorization, secrets: client.secrets + sent, logger: logger)
        guard response.isSuccess else {
            throw Self.authorizationFailure(
                response, endpoint: "device authorization endpoint", step: .deviceAuthorization, secrets: client.secrets + sent, now: now())
        }
        guard let fields = JSONFields.parse(response.body), response.body.count <= TokenResponse.maximumBodySize else {
            throw .malformedResponse(endpoint: "device authorization endpoint", reason: "the body is not a JSON object")
        }
        func string(_ name: String) throws(SignInError) -> String {
            guard case .string(let value)? = fields[name], !value.isEmpty, value.utf8.count <= 4096,
                value.utf8.allSatisfy({ (0x20...0x7E).contains($0) })
            else {
                throw .malformedResponse(endpoint: "device authorization endpoint", reason: "\(name) is missing or not a string of visible ASCII")
            }
            return value
        }
        func integer(_ name: String, default fallback: Int?) throws(SignInError) -> Int {
            switch fields[name] {
            case .integer(let value)? where value >= 0 && value <= 86_400: return value
            case nil where fallback != nil, .null? where fallback != nil: return fallback ?? 0
            default: throw .malformedResponse(endpoint: "device authorization endpoint", reason: "\(name) is missing or not a number of seconds")
            }
        }
        let verification = try string("verification_uri")
        guard let verificationURI = URL(string: verification), let scheme = verificationURI.scheme?.lowercased(),
            scheme == "https" || scheme == "http"
        else {
            throw .malformedResponse(endpoint: "device authorization endpoint", reason: "verification_uri is not an http(s) URL")
        }
        var complete: URL?
        if case .string(let text)? = fields["verification_uri_complete"], let url = URL(string: text),
            ["https", "http"].contains(url.scheme?.lowercased() ?? "")
        {
            complete = url
        }
        let authorization = DeviceAuthorization(
            deviceCode: try string("device_code"), userCode: Self.printable(try string("user_code")),
            verificationURI: verificationURI, verificationURIComplete: complete,
            expiresIn: try integer("expires_in", default: nil), interval: try integer("interval", default: 5))
        logger.debug(
            "device authorization issued", metadata: ["oauth.expires_in": "\(authorization.expiresIn)", "oauth.interval": "\(authorization.interval)"])
        return authorization
    }

    /// Polls the token endpoint until the user approves or declines, the code expires, or the
    /// task is cancelled (RFC 8628 §3.4–3.5). Waits `interval` seconds between polls on
    /// ``clock``, five more after each `slow_down`, and doubles the wait after a failure that
    /// may pass (a timeout, a 5xx) as §3.5 asks. Every other failure stops at once. With a DPoP
    /// key in `client`, whether the server bound the tokens to it is the caller's to judge
    /// (``TokenResponse/dpopBindingProblem(for:)``), so it can revoke what was issued.
    ///
    /// ```swift
    /// let authorization = try await oauth.requestDeviceAuthorization(endpoint: device, client: client, scopes: ["openid"])
    /// print("Open \(authorization.verificationURI) and enter \(authorization.userCode)")
    /// let tokens = try await oauth.pollDeviceAuthorization(authorization, tokenEndpoint: token, client: client)
    /// ```
    public func pollDeviceAuthorization(
        _ authorization: DeviceAuthorization, tokenEndpoint: URL, client: ClientCredentials, pins: [SPKIPin] = []
    ) async throws(SignInError) -> TokenResponse {
        if let reason = EndpointRule.violation(tokenEndpoint) { throw .insecureEndpoint(field: "token_endpoint", reason: reason) }
        let logger = logger(for: tokenEndpoint, operation: "device_token")
        let stopwatch = Stopwatch.start(clock)
        let lifetime = Duration.seconds(authorization.expiresIn)
        // A zero interval would poll in a loop: one second is the least this client waits.
        var interval = Duration.seconds(max(1, authorization.interval))
        var wait = interval
        let form = [("grant_type", Self.deviceCodeGrantType), ("device_code", authorization.deviceCode)]
        let known = [authorization.deviceCode] + client.secrets
        while true {
            do {
                try await clock.sleep(for: min(wait, max(.zero, lifetime - stopwatch.elapsed())))
            } catch {
                throw .cancelled
            }
            guard stopwatch.elapsed() < lifetime else { throw .deviceCodeExpired }
            let secrets: [String]
            let response: HTTPResponse
            do {
                let sent: [String]
                (response, sent) = try await sendForm(to: tokenEndpoint, form: form, client: client, pins: pins, deadline: requestDeadline)
                secrets = known + sent
            } catch {
                if Task.isCancelled { throw .cancelled }
                let failure = RefreshError(transportFailure: error)
                guard failure.isTransient else { throw .tokenRequestFailed(failure, step: .devicePoll) }
                wait = min(wait * 2, .seconds(60))
                logger.debug("device token poll failed, backing off", metadata: ["oauth.outcome": "\(failure.outcomeName)"])
                continue
            }
            if response.status == 400 || response.status == 401,
                let error = OAuthErrorResponse.parse(response.body, redaction: Redaction(secrets: secrets))
            {
                switch error.error {
                case "authorization_pending":
                    wait = interval
                    continue
                case "slow_down":
                    interval += .seconds(5)
                    wait = interval
                    logger.debug("device token poll slowed down", metadata: ["oauth.interval": "\(interval.components.seconds)"])
                    continue
                case "access_denied":
                    logger.debug("device authorization finished", metadata: ["oauth.outcome": "access_denied"])
                    throw .authorizationDenied(description: error.errorDescription)
                case "expired_token":
                    logger.debug("device authorization finished", metadata: ["oauth.outcome": "expired_token"])
                    throw .deviceCodeExpired
                default:
                    break
                }
            }
            switch Self.classifyRefresh(response, secrets: secrets, now: now()) {
            case .success(let tokens):
                logger.debug("device authorization finished", metadata: ["oauth.outcome": "success"])
                return tokens
            case .failure(let failure) where failure.isTransient:
                wait = min(wait * 2, .seconds(60))
                continue
            case .failure(let failure):
                logger.debug("device authorization finished", metadata: ["oauth.outcome": "\(failure.outcomeName)"])
                throw .tokenRequestFailed(failure, step: .devicePoll)
            }
        }
    }

    /// Sends a form to a sign-in token endpoint (``sendForm(to:form:client:pins:deadline:)``:
    /// a DPoP nonce the server asks for is sent once more with); a transport failure becomes a
    /// token-request failure.
    func sendSignInForm(
        to endpoint: URL, form: [(String, String)], client: ClientCredentials, pins: [SPKIPin], step: SignInStep, logger: Logger
    ) async throws(SignInError) -> (response: HTTPResponse, secrets: [String]) {
        do {
            return try await sendForm(to: endpoint, form: form, client: client, pins: pins, deadline: requestDeadline)
        } catch {
            if Task.isCancelled { throw .cancelled }
            let failure = RefreshError(transportFailure: error)
            logger.debug("request failed", metadata: ["oauth.outcome": "\(failure.outcomeName)"])
            throw .tokenRequestFailed(failure, step: step)
        }
    }

    /// Sends a sign-in request; a transport failure becomes a token-request failure.
    func sendSignInRequest(_ request: HTTPRequest, step: SignInStep, secrets: [String], logger: Logger) async throws(SignInError) -> HTTPResponse {
        do {
            return try await transport.send(request, deadline: requestDeadline, clock: clock)
        } catch {
            if Task.isCancelled { throw .cancelled }
            let failure = RefreshError(transportFailure: error)
            logger.debug("request failed", metadata: ["oauth.outcome": "\(failure.outcomeName)"])
            throw .tokenRequestFailed(failure, step: step)
        }
    }

    /// An error answer of an authorization-side endpoint: `access_denied` and other codes keep
    /// their (redacted) description; anything else is a token-request failure by status.
    /// `now`: the client's wall clock, for a `Retry-After` date without a `Date` header.
    static func authorizationFailure(
        _ response: HTTPResponse, endpoint: String, step: SignInStep, secrets: [String], now: Date
    ) -> SignInError {
        if let error = OAuthErrorResponse.parse(response.body, redaction: Redaction(secrets: secrets)) {
            if error.error == "access_denied" { return .authorizationDenied(description: error.errorDescription) }
            return .authorizationFailed(code: printable(error.error), description: error.errorDescription)
        }
        if case .failure(let failure) = classifyRefresh(response, secrets: secrets, now: now) {
            return .tokenRequestFailed(failure, step: step)
        }
        return .malformedResponse(endpoint: endpoint, reason: "HTTP \(response.status)")
    }
}
