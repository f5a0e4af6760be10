import FlyingFox
import Foundation
import Logging

// MARK: - Device authorization grant (RFC 8628)

extension DevGateway {
    nonisolated static var deviceGrantRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /oauth/device_authorization") { gateway, request in
                await gateway.handleDeviceAuthorization(request, body: body(of: request))
            },
            GatewayRoute(route: "GET /device") { gateway, request in
                await gateway.verificationPage(request)
            },
            GatewayRoute(route: "POST /admin/device/approve") { gateway, request in
                guard let answer = AdminJSON.decode(AdminJSON.DeviceApproval.self, from: await body(of: request)),
                    !answer.subject.isEmpty
                else {
                    return AdminJSON.badRequest
                }
                return deviceAnswer(await gateway.approveDeviceCode(userCode: answer.userCode, subject: answer.subject))
            },
            GatewayRoute(route: "POST /admin/device/deny") { gateway, request in
                guard let answer = AdminJSON.decode(AdminJSON.DeviceCodeReference.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                return deviceAnswer(await gateway.denyDeviceCode(userCode: answer.userCode))
            },
            GatewayRoute(route: "POST /admin/device/expire") { gateway, request in
                guard let answer = AdminJSON.decode(AdminJSON.DeviceCodeReference.self, from: await body(of: request)) else {
                    return AdminJSON.badRequest
                }
                return deviceAnswer(await gateway.expireDeviceCode(userCode: answer.userCode))
            },
            GatewayRoute(route: "POST /admin/device-grant") { gateway, request in
                guard let settings = AdminJSON.decode(AdminJSON.DeviceGrantSettings.self, from: await body(of: request)),
                    (settings.interval ?? 0) >= 0, (settings.expiresIn ?? 1) > 0
                else {
                    return AdminJSON.badRequest
                }
                await gateway.updateDeviceGrantSettings(interval: settings.interval, lifetime: settings.expiresIn)
                return .empty(status: 204)
            },
        ]
    }

    /// 200 {"ok": true}, or 404 {"ok": false} when the user code matched nothing it could change.
    nonisolated static func deviceAnswer(_ ok: Bool) -> HTTPResponse {
        .json(["ok": ok], status: ok ? 200 : 404)
    }

    /// `POST` here to start a device authorization (RFC 8628 §3.1).
    public nonisolated var deviceAuthorizationEndpoint: URL { baseURL.appendingPathComponent("oauth/device_authorization") }

    /// The `verification_uri` shown to the user (RFC 8628 §3.2).
    public nonisolated var deviceVerificationURL: URL { baseURL.appendingPathComponent("device") }

    /// Sets the polling interval (seconds; 0 turns `slow_down` off) and the device-code lifetime
    /// (seconds) of device authorizations started from now on.
    ///
    /// ```swift
    /// await gateway.setDeviceGrantSettings(interval: 0)
    /// ```
    public func setDeviceGrantSettings(interval: Int = 5, lifetime: Int = 600) {
        updateDeviceGrantSettings(interval: interval, lifetime: lifetime)
    }

    func updateDeviceGrantSettings(interval: Int?, lifetime: Int?) {
        if let interval { state.deviceGrants.interval = max(0, interval) }
        if let lifetime { state.deviceGrants.lifetime = max(1, lifetime) }
    }

    /// The user approves the device authorization with `userCode` as `subject`, who thereby
    /// authenticates (their `auth_time` is now). Case and dashes in `userCode` do not matter.
    /// False if the code is unknown, already answered or expired.
    ///
    /// ```swift
    /// let code = try #require(await gateway.pendingUserCodes().first)
    /// #expect(await gateway.approveDeviceCode(userCode: code, subject: "alice"))
    /// ```
    @discardableResult
    public func approveDeviceCode(userCode: String, subject: String) -> Bool {
        let now = signInNow()
        let approved = state.deviceGrants.approve(userCode: userCode, subject: subject, now: now)
        if approved { state.authorization.authenticate(subject, at: now) }
        logger.debug("device code answered", metadata: ["gateway.answer": "approve", "gateway.ok": "\(approved)"])
        return approved
    }

    /// The user denies the device authorization with `userCode`; false if there was nothing to deny.
    @discardableResult
    public func denyDeviceCode(userCode: String) -> Bool {
        let denied = state.deviceGrants.deny(userCode: userCode, now: signInNow())
        logger.debug("device code answered", metadata: ["gateway.answer": "deny", "gateway.ok": "\(denied)"])
        return denied
    }

    /// Expires the device authorization with `userCode` now; its next poll gets `expired_token`.
    @discardableResult
    public func expireDeviceCode(userCode: String) -> Bool {
        state.deviceGrants.expire(userCode: userCode, now: signInNow())
    }

    /// User codes waiting for an answer, oldest first, as shown to users (`BCDF-GHJK`).
    public func pendingUserCodes() -> [String] {
        state.deviceGrants.pendingUserCodes(now: signInNow())
    }

    /// `POST /oauth/device_authorization` (RFC 8628 §3.1-3.2).
    func handleDeviceAuthorization(_ request: HTTPRequest, body: Data) -> HTTPResponse {
        var metadata: Logger.Metadata = ["gateway.endpoint": "/oauth/device_authorization"]
        let outcome: Result<DeviceGrantLedger.Authorization, OAuthRejection> = {
            let parameters: FormBody
            let clientID: String
            switch authenticatedForm(request, body: body) {
            case .success(let form): (parameters, clientID) = form
            case .failure(let rejection): return .failure(rejection)
            }
            metadata["gateway.client_id"] = "\(clientID)"
            return .success(state.deviceGrants.start(clientID: clientID, scope: parameters["scope"] ?? "openid profile", now: signInNow()))
        }()
        switch outcome {
        case .success(let authorization):
            state.stats.deviceAuthorizations += 1
            statsDidChange()
            metadata["gateway.outcome"] = "device_code_issued"
            logger.debug("device authorization request", metadata: metadata)
            let userCode = DeviceGrantLedger.display(authorization.userCode)
            return .json(
                GatewayJSON.DeviceAuthorization(
                    deviceCode: authorization.deviceCode,
                    userCode: userCode,
                    verificationURI: deviceVerificationURL.absoluteString,
                    verificationURIComplete: Self.appendingQuery([("user_code", userCode)], to: deviceVerificationURL.absoluteString),
                    expiresIn: Int(authorization.expiresAt.timeIntervalSince(authorization.createdAt)),
                    interval: authorization.interval))
        case .failure(let rejection):
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("device authorization request", metadata: metadata)
            return .oauthError(rejection)
        }
    }

    /// `GET /device`: where a user would type the code; here it names the admin endpoint.
    func verificationPage(_ request: HTTPRequest) -> HTTPResponse {
        let typed = request.query["user_code"].map(DeviceGrantLedger.normalize) ?? ""
        let shown = typed.isEmpty ? "<user code>" : DeviceGrantLedger.display(typed)
        let approve = baseURL.appendingPathComponent("admin/device/approve").absoluteString
        let deny = baseURL.appendingPathComponent("admin/device/deny").absoluteString
        return .html(
            title: "Device sign-in at the development gateway",
            paragraphs: [
                "This development gateway has no login form. Approve the device as a user with:",
                #"curl -X POST \#(approve) -H 'Content-Type: application/json' -d '{"user_code": "\#(shown)", "subject": "alice"}'"#,
                #"or deny it: curl -X POST \#(deny) -H 'Content-Type: application/json' -d '{"user_code": "\#(shown)"}'"#,
            ])
    }

    /// The device-code grant at the token endpoint (RFC 8628 §3.4-3.5), for an authenticated
    /// client; with `dpopThumbprint` (the poll's DPoP proof) the grant is bound to that key.
    func pollDeviceCode(_ parameters: FormBody, clientID: String, dpopThumbprint: String?) -> Result<IssuedTokens, OAuthRejection> {
        state.stats.devicePolls += 1
        defer { statsDidChange() }
        guard let deviceCode = parameters["device_code"], !deviceCode.isEmpty else {
            return .failure(.invalidRequest("device_code is required"))
        }
        let now = signInNow()
        switch state.deviceGrants.poll(deviceCode: deviceCode, clientID: clientID, now: now) {
        case .approved(let subject, let scope):
            let authTime = state.authorization.lastAuthentication[subject] ?? now
            return .success(
                state.tokens.openGrant(subject: subject, clientID: clientID, scope: scope, authTime: authTime, dpopThumbprint: dpopThumbprint))
        case .rejected(let rejection, let slowedDown):
            if slowedDown { state.stats.slowDowns += 1 }
            return .failure(rejection)
        }
    }
}

extension GatewayJSON {
    /// RFC 8628 §3.2.
    struct DeviceAuthorization: Encodable {
        let deviceCode: String
        let userCode: String
        let verificationURI: String
        let verificationURIComplete: String
        let expiresIn: Int
        let interval: Int

        enum CodingKeys: String, CodingKey {
            case deviceCode = "device_code"
            case userCode = "user_code"
            case verificationURI = "verification_uri"
            case verificationURIComplete = "verification_uri_complete"
            case expiresIn = "expires_in"
            case interval
        }
    }
}

extension AdminJSON {
    struct DeviceApproval: Decodable {
        let userCode: String
        let subject: String

        enum CodingKeys: String, CodingKey {
            case userCode = "user_code"
            case subject
        }
    }

    struct DeviceCodeReference: Decodable {
        let userCode: String

        enum CodingKeys: String, CodingKey {
            case userCode = "user_code"
        }
    }

    struct DeviceGrantSettings: Decodable {
        let interval: Int?
        let expiresIn: Int?

        enum CodingKeys: String, CodingKey {
            case interval
            case expiresIn = "expires_in"
        }
    }
}
