import Foundation
import Logging
import VaultOAuth
import VaultStore

/// The reference ``DeviceNotificationAPI``: HTTP/JSON over an `HTTPTransport`, as served by
/// `DevGateway` (its API is documented at the top of `DevGateway.swift`).
///
/// Every call carries the account's access token from ``SessionService/validAccessToken(for:)``
/// as `Authorization: Bearer`, or for a DPoP-bound account as `Authorization: DPoP` with a proof
/// for the request (RFC 9449 §7.1; a `use_dpop_nonce` answer is retried once with the nonce). A 401 is reported with ``SessionService/reportUnauthorized(_:)``
/// and retried once with the refreshed token. A 401 or 403 whose error is `device_revoked`
/// ends the account's session as expired(device revoked), wipes its tokens and throws
/// ``SessionError/expired(_:_:)``. Logs name the method, path and status: never a token,
/// body or activation code.
///
/// Every request carries the account's SPKI pins (a pinned account's bearer token reaches only
/// a server holding a pinned key; the default `NIOTransport` checks them) and ends by the
/// session's ``SessionConfiguration/requestDeadline`` on `clock`, however slowly the server
/// answers (``DeviceAPIError/unreachable(_:)`` with `TransportError.timedOut`).
///
/// ```swift
/// let api = HTTPDeviceNotificationAPI(baseURL: identityServiceURL, session: session)
/// let inbox = NotificationInbox(session: session, api: api)
/// ```
public struct HTTPDeviceNotificationAPI: DeviceNotificationAPI, SessionExtensionAPI {
    /// Paths (`devices`, `notifications/{uuid}/answer`…) are appended to this URL.
    public let baseURL: URL
    let session: SessionService
    let transport: any HTTPTransport
    let logger: Logger
    let clock: any Clock<Duration>
    /// The `DPoP-Nonce` this API's server last sent, for the next proof (shared by copies).
    let dpopNonces = DPoPNonces()

    public init(
        baseURL: URL, session: SessionService, transport: any HTTPTransport = NIOTransport(),
        logger: Logger = Logger(label: "credentialvault.devices.http"), clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.baseURL = baseURL
        self.session = session
        self.transport = transport
        self.logger = logger
        self.clock = clock
    }

    // MARK: - This device's activation

    public func register(_ device: DeviceDescriptor, account: AccountID) async throws -> DeviceEnrollment {
        let body = WireRegister(deviceID: device.deviceID, name: device.name, platform: device.platform)
        let enrollment = try await call(.post, ["devices"], body: body, account: account, as: WireEnrollment.self)
        return DeviceEnrollment(device: try enrollment.device.value(), options: (enrollment.options ?? []).map(ActivationOption.init(rawValue:)))
    }

    public func device(_ deviceID: String, account: AccountID) async throws -> RemoteDevice {
        try await call(.get, ["devices", deviceID], account: account, as: WireOneDevice.self).device.value()
    }

    public func startVerification(_ deviceID: String, account: AccountID) async throws -> ApprovalRequest {
        let answer = try await call(.post, ["devices", deviceID, "verify"], body: WireEmpty(), account: account, as: WireVerification.self)
        return ApprovalRequest(notificationUUID: answer.notificationUUID, expiresAt: answer.expiresAt.map(Date.init(milliseconds:)))
    }

    public func startFallback(_ deviceID: String, account: AccountID) async throws -> FallbackChallenge {
        let answer = try await call(.post, ["devices", deviceID, "fallback"], body: WireEmpty(), account: account, as: WireFallback.self)
        return FallbackChallenge(method: answer.method, delivery: answer.delivery, codeLength: answer.codeLength)
    }

    public func activate(_ deviceID: String, code: ActivationCode, account: AccountID) async throws -> RemoteDevice {
        try await call(
            .post, ["devices", deviceID, "activate"], body: WireCode(code: code.value), account: account,
            as: WireOneDevice.self
        ).device.value()
    }

    public func cancelActivation(_ deviceID: String, reason: ActivationCancelReason, account: AccountID) async throws -> RemoteDevice {
        try await call(
            .post, ["devices", deviceID, "cancel"], body: WireCancel(reason: reason.rawValue), account: account,
            as: WireOneDevice.self
        ).device.value()
    }

    // MARK: - The account's devices

    public func devices(account: AccountID) async throws -> [RemoteDevice] {
        try await call(.get, ["devices"], account: account, as: WireDeviceList.self).devices.map { try $0.value() }
    }

    public func rename(_ deviceID: String, to name: String, account: AccountID) async throws -> RemoteDevice {
        try await call(
            .post, ["devices", deviceID, "rename"], body: WireRename(name: name), account: account,
            as: WireOneDevice.self
        ).device.value()
    }

    public func revoke(_ deviceID: String, account: AccountID) async throws -> RemoteDevice {
        try await call(.post, ["devices", deviceID, "revoke"], body: WireEmpty(), account: account, as: WireOneDevice.self).device.value()
    }

    // MARK: - Notifications

    public func notifications(_ page: NotificationPageRequest, account: AccountID) async throws -> RemoteNotificationPage {
        var query = [
            URLQueryItem(name: "record_count", value: String(page.recordCount)),
            URLQueryItem(name: "start_index", value: String(page.startIndex)),
        ]
        if let start = page.startDate { query.append(URLQueryItem(name: "start_date", value: String(start.milliseconds))) }
        if let end = page.endDate { query.append(URLQueryItem(name: "end_date", value: String(end.milliseconds))) }
        let answer = try await call(.get, ["notifications"], query: query, account: account, as: WireNotificationPage.self)
        // A status this client does not know (a newer server's) skips that notification, not the page.
        var items: [RemoteNotification] = []
        var skipped: [String] = []
        for wire in answer.notifications {
            if let status = NotificationStatus(rawValue: wire.status) {
                items.append(wire.value(status))
            } else {
                skipped.append("notification \(ServerInput.shown(wire.notificationUUID)): unknown status \(ServerInput.shown(wire.status))")
            }
        }
        return RemoteNotificationPage(notifications: items, totalCount: answer.totalCount, startIndex: answer.startIndex, skipped: skipped)
    }

    public func answer(_ uuid: String, action: String, account: AccountID) async throws -> RemoteNotification {
        do {
            return try await call(
                .post, ["notifications", uuid, "answer"], body: WireAnswer(action: action), account: account,
                as: WireOneNotification.self
            ).notification.value()
        } catch DeviceAPIError.rejected(410, _, _) {
            // 410 Gone without one of the codes above: the server no longer has it to answer.
            throw DeviceAPIError.notificationDismissed
        }
    }

    // MARK: - Session extension

    /// `POST {base}/sessions/extend`: `{"status_code", "error_code"?, "error_message"?}`; a
    /// refusal may come as a non-2xx status with the standard `error` / `error_description`.
    public func extendSessionIdleTimeout(account: AccountID) async throws -> ExtensionResponse {
        do {
            let (answer, token) = try await callReturningToken(.post, ["sessions", "extend"], body: WireEmpty(), account: account, as: WireExtension.self)
            // The server's words may echo the request's bearer token, on this path as on a refusal's.
            let redaction = Redaction(secrets: [token])
            return ExtensionResponse(
                statusCode: answer.statusCode ?? 200, errorCode: answer.errorCode.map { redaction.apply(to: $0, limit: 128) },
                errorMessage: answer.errorMessage.map { redaction.apply(to: $0) })
        } catch DeviceAPIError.rejected(let status, let error, let description) {
            return ExtensionResponse(statusCode: status, errorCode: error.isEmpty ? nil : error, errorMessage: description)
        }
    }

    // MARK: - Exchange

    private func call<Answer: Decodable>(
        _ method: HTTPRequest.Method, _ path: [String], query: [URLQueryItem] = [],
        account: AccountID, as: Answer.Type
    ) async throws -> Answer {
        try await call(method, path, query: query, body: Optional<WireEmpty>.none, account: account, as: Answer.self)
    }

    /// Sends one request with the account's bearer token (refreshing once on a 401) and
    /// decodes a 2xx answer; any other answer becomes a ``DeviceAPIError``.
    private func call<Body: Encodable, Answer: Decodable>(
        _ method: HTTPRequest.Method, _ path: [String], query: [URLQueryItem] = [], body: Body?,
        account: AccountID, as: Answer.Type
    ) async throws -> Answer {
        try await callReturningToken(method, path, query: query, body: body, account: account, as: Answer.self).answer
    }

    /// ``call(_:_:query:body:account:as:)``, also returning the bearer token the answer came to
    /// (to redact the server's words of it).
    private func callReturningToken<Body: Encodable, Answer: Decodable>(
        _ method: HTTPRequest.Method, _ path: [String], query: [URLQueryItem] = [], body: Body?,
        account: AccountID, as: Answer.Type
    ) async throws -> (answer: Answer, token: String) {
        let url = try endpoint(path, query: query)
        // Checked on every request, before a token is even asked for: the base URL may have been
        // configured by the tool, and a bearer token is a credential like any other.
        do { try EndpointRule.check(url, role: "device API") } catch { throw DeviceAPIError.refusedEndpoint(error) }
        let payload = try body.map { try JSONEncoder().encode($0) } ?? Data()
        let route = "/" + path.joined(separator: "/")
        var token = try await session.validAccessToken(for: account)
        let (pins, caFile) = try await session.serverTrust(for: account)
        // An account whose provider chains to a private CA: that bundle, on this transport's terms.
        let transport = try caFile.map { try self.transport.trusting(caFile: $0) } ?? self.transport
        if let reason = EndpointRule.pinViolation(url, pins: pins) {
            throw DeviceAPIError.pinningFailed(host: url.hostForMessages, reason: reason)
        }
        var refreshed = false
        var nonceRetried = false
        while true {
            var headers: HTTPHeaderFields = ["Accept": "application/json", "Authorization": token.authorizationHeader]
            if body != nil { headers["Content-Type"] = "application/json" }
            if token.isDPoPBound {
                // RFC 9449 §7.1: a bound token goes with a proof for this request that names it.
                headers["DPoP"] = try await session.dpopProof(
                    for: account, method: method.rawValue, url: url, accessToken: token, nonce: dpopNonces.nonce(for: url))
            }
            let response: HTTPResponse
            do {
                response = try await transport.send(
                    HTTPRequest(method: method, url: url, headers: headers, body: payload, pins: pins),
                    deadline: session.configuration.requestDeadline, clock: clock)
            } catch TransportError.pinningFailed(let host, let reason) {
                logger.warning("device API: no pinned key presented; nothing was sent", metadata: ["http.method": "\(method)", "http.route": "\(route)"])
                throw DeviceAPIError.pinningFailed(host: host, reason: reason)
            } catch let error as TransportError {
                logger.debug("device API unreachable", metadata: ["http.method": "\(method)", "http.route": "\(route)", "error": "\(error)"])
                throw DeviceAPIError.unreachable(error)
            }
            logger.debug("device API", metadata: ["http.method": "\(method)", "http.route": "\(route)", "http.status": "\(response.status)"])
            // A server that wants its nonce in proofs (RFC 9449 §9) is asked once more with it.
            let freshNonce = token.isDPoPBound && dpopNonces.remember(response, from: url)
            if freshNonce, !nonceRetried, response.asksForDPoPNonce {
                nonceRetried = true
                continue
            }
            if response.isSuccess {
                do {
                    return (try JSONDecoder().decode(Answer.self, from: response.body), token.value)
                } catch let error as DecodingError {
                    throw DeviceAPIError.malformedResponse("\(route) answered JSON of another shape (\(Self.shape(error)))")
                } catch {
                    throw DeviceAPIError.malformedResponse("\(route) answered JSON of another shape")
                }
            }
            let failure = try? JSONDecoder().decode(WireFailure.self, from: response.body)
            if response.status == 401 || response.status == 403, failure?.error == "device_revoked" {
                throw await session.deviceWasRevoked(account)
            }
            // A refused proof (or a nonce asked for again) is no reason to refresh the token:
            // a refresh rotates it and changes nothing about the proof.
            let proofRefused =
                token.isDPoPBound && response.status == 401
                && ["invalid_dpop_proof", "use_dpop_nonce"].contains { response.headers["WWW-Authenticate"]?.contains($0) ?? false }
            if response.status == 401, !refreshed, !proofRefused {
                refreshed = true
                token = try await session.reportUnauthorized(token)
                continue
            }
            // The server's words may echo the request: the bearer token, an activation code.
            let secrets = [token.value] + ((body as? WireCode).map { [$0.code] } ?? [])
            throw Self.error(status: response.status, failure, redaction: Redaction(secrets: secrets))
        }
    }

    /// Where a decoding failed, in the client's own field names (never a value the server sent).
    static func shape(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            let parts = keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return parts.hasPrefix(".") ? String(parts.dropFirst()) : (parts.isEmpty ? "the body" : parts)
        }
        switch error {
        case .keyNotFound(let key, let context): return "\(path(context.codingPath + [key])) missing"
        case .valueNotFound(_, let context): return "\(path(context.codingPath)) is null"
        case .typeMismatch(_, let context): return "\(path(context.codingPath)) has the wrong type"
        case .dataCorrupted(let context): return context.codingPath.isEmpty ? "not JSON" : "\(path(context.codingPath)) is unreadable"
        @unknown default: return "unreadable"
        }
    }

    private func endpoint(_ path: [String], query: [URLQueryItem]) throws -> URL {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove("/")
        let suffix = try path.map { segment -> String in
            guard let encoded = segment.addingPercentEncoding(withAllowedCharacters: allowed), !encoded.isEmpty else {
                throw DeviceAPIError.notFound("an empty or unencodable id")
            }
            return encoded
        }.joined(separator: "/")
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false) else {
            throw DeviceAPIError.malformedResponse("the base URL cannot be parsed")
        }
        let base = components.percentEncodedPath.hasSuffix("/") ? String(components.percentEncodedPath.dropLast()) : components.percentEncodedPath
        components.percentEncodedPath = base + "/" + suffix
        components.queryItems = query.isEmpty ? nil : query
        guard let url = components.url else { throw DeviceAPIError.malformedResponse("could not build the request URL") }
        return url
    }

    /// The error for a refused request, from its status and the server's error code. The
    /// server's free text (its description, an unknown code) is kept only through `redaction`.
    static func error(status: Int, _ failure: WireFailure?, redaction: Redaction = .none) -> DeviceAPIError {
        let deviceStatus = failure?.status.flatMap(DeviceStatus.init(rawValue:))
        let detail = failure?.errorDescription.map { redaction.apply(to: $0) }
        switch failure?.error {
        case "device_revoked": return .deviceRevoked
        case "invalid_token": return .unauthorized(detail)
        case "device_not_registered": return .notRegistered
        case "device_not_active": return .notActive(deviceStatus)
        case "not_this_device": return .notThisDevice
        case "not_found": return .notFound(detail)
        case "not_pending": return .notPending(deviceStatus)
        case "no_active_device": return .noApprovingDevice
        case "fallback_not_started": return .fallbackNotStarted
        case "invalid_code": return .invalidActivationCode(attemptsLeft: failure?.attemptsLeft, status: deviceStatus)
        case "already_answered":
            return .alreadyAnswered(
                action: failure?.actionPerformed, byDevice: failure?.answeredByDevice,
                at: failure?.answeredAt.map(Date.init(milliseconds:)))
        case "expired": return .notificationExpired(at: failure?.expiredAt.map(Date.init(milliseconds:)))
        case "dismissed": return .notificationDismissed
        case "unknown_action": return .actionNotOffered(offered: failure?.offeredActions ?? [])
        case let code?: return .rejected(status: status, error: redaction.apply(to: code, limit: 128), description: detail)
        case nil: return .rejected(status: status, error: "http_\(status)", description: nil)
        }
    }
}
