import FlyingFox
import Foundation
import Logging

// MARK: - Device endpoints: registration, activation by approval or fallback code, the devices screen

extension DevGateway {
    nonisolated static var deviceRoutes: [GatewayRoute] {
        [
            deviceRoute("POST /devices") { gateway, request, _ in
                await gateway.handleRegister(request, body: body(of: request))
            },
            deviceRoute("GET /devices") { gateway, request, _ in
                await gateway.handleListDevices(request)
            },
            deviceRoute("GET /devices/:device_id") { gateway, request, deviceID in
                await gateway.handleDeviceStatus(request, deviceID: deviceID)
            },
            deviceRoute("POST /devices/:device_id/verify") { gateway, request, deviceID in
                await gateway.handleStartVerify(request, deviceID: deviceID)
            },
            deviceRoute("POST /devices/:device_id/fallback") { gateway, request, deviceID in
                await gateway.handleStartFallback(request, deviceID: deviceID)
            },
            deviceRoute("POST /devices/:device_id/activate") { gateway, request, deviceID in
                await gateway.handleActivate(request, deviceID: deviceID, body: body(of: request))
            },
            deviceRoute("POST /devices/:device_id/cancel") { gateway, request, deviceID in
                await gateway.handleCancel(request, deviceID: deviceID, body: body(of: request))
            },
            deviceRoute("POST /devices/:device_id/rename") { gateway, request, deviceID in
                await gateway.handleRename(request, deviceID: deviceID, body: body(of: request))
            },
            deviceRoute("POST /devices/:device_id/revoke") { gateway, request, deviceID in
                await gateway.handleRevokeDevice(request, deviceID: deviceID)
            },
        ]
    }

    /// A device-area route: logs its pattern (never a body or token), applies expiry, then
    /// hands the decoded `:device_id` (or `:uuid`) parameter to `handle`.
    nonisolated static func deviceRoute(
        _ pattern: String,
        _ handle: @escaping @Sendable (DevGateway, HTTPRequest, String) async -> HTTPResponse
    ) -> GatewayRoute {
        GatewayRoute(route: HTTPRoute(stringLiteral: pattern)) { gateway, request in
            let parameter =
                (request.routeParameters["device_id"] ?? request.routeParameters["uuid"])
                .flatMap { $0.removingPercentEncoding } ?? ""
            await gateway.beginDeviceRequest(pattern)
            return await handle(gateway, request, parameter)
        }
    }

    func beginDeviceRequest(_ pattern: String) {
        state.deviceArea.requests.append(pattern)
        expireOverdue()
    }

    /// The device area's time: its time source (see ``useClock(_:)``) plus the offset `/admin/clock` set.
    func deviceAreaNow() -> Date {
        state.deviceArea.now().addingTimeInterval(Self.seconds(state.deviceArea.clockOffset))
    }

    /// Pending notifications past their expiry become expired; an expired approval request
    /// expires the registration waiting for it.
    func expireOverdue() {
        let now = deviceAreaNow()
        for notice in state.notifications.overdue(now: now) {
            state.notifications.setStatus(notice.uuid, .expired)
            if let registrationID = notice.approvesRegistration,
                let registration = state.devices.registration(id: registrationID),
                registration.status == .pending, registration.approvalNotification == notice.uuid
            {
                state.devices.settle(registrationID, status: .expired, reason: "the approval request expired", now: now)
            }
        }
    }

    // MARK: - Bearer authentication

    /// Who is calling: the subject and grant of the bearer access token, and the device that
    /// grant registered as (if it did).
    struct DeviceCaller: Sendable {
        let subject: String
        let grantID: String
        let registration: DeviceLedger.Registration?
    }

    /// Authenticates the caller's access token as every protected resource does
    /// (``presentedAccessToken(_:)``: `Bearer`, or `DPoP` with a proof for a bound token; a bound
    /// token as `Bearer` is refused). A revoked device gets `device_revoked` even though its
    /// grant was revoked with it.
    func authenticateCaller(_ request: HTTPRequest) async -> Result<DeviceCaller, DeviceRejection> {
        let parts = (request.headers[.authorization] ?? "").split(separator: " ", maxSplits: 1)
        if parts.count == 2, let grant = state.tokens.grant(forAccessToken: String(parts[1])),
            state.devices.registration(boundTo: grant.id)?.status == .revoked
        {
            return .failure(DeviceRejection(401, "device_revoked", "this device was revoked for the account"))
        }
        let grant: TokenLedger.Grant
        switch await presentedAccessToken(request) {
        case .success(let presented): grant = presented.grant
        case .failure(let refusal):
            let (response, error, description) = refusalResponse(refusal)
            return .failure(DeviceRejection(accessTokenRefused: response, error: error, description: description))
        }
        let registration = state.devices.registration(boundTo: grant.id)
        if let registration { state.devices.touch(registration.id, now: deviceAreaNow()) }
        return .success(
            DeviceCaller(
                subject: grant.subject, grantID: grant.id,
                registration: registration.flatMap { state.devices.registration(id: $0.id) }))
    }

    /// The caller's registration, which must be active.
    func activeDevice(_ caller: DeviceCaller) -> Result<DeviceLedger.Registration, DeviceRejection> {
        guard let registration = caller.registration else {
            return .failure(DeviceRejection(403, "device_not_registered", "register this device first"))
        }
        guard registration.status == .active else {
            return .failure(
                DeviceRejection(403, "device_not_active", "this device is not active for the account") {
                    $0.status = registration.status.rawValue
                })
        }
        return .success(registration)
    }

    /// The caller's own registration, which must be `deviceID`.
    func ownDevice(_ caller: DeviceCaller, _ deviceID: String) -> Result<DeviceLedger.Registration, DeviceRejection> {
        guard let registration = caller.registration else {
            return .failure(DeviceRejection(403, "device_not_registered", "register this device first"))
        }
        guard registration.deviceID == deviceID else {
            return .failure(DeviceRejection(403, "not_this_device", "a device activates only itself"))
        }
        return .success(registration)
    }

    /// Runs `body` with the authenticated caller; a rejection anywhere becomes its response.
    func withCaller(_ request: HTTPRequest, _ body: (DeviceCaller) throws(DeviceRejection) -> HTTPResponse) async -> HTTPResponse {
        do {
            let caller = try await authenticateCaller(request).get()
            return try body(caller)
        } catch {
            logger.debug("device request refused", metadata: ["gateway.error": "\(error.body.error)", "http.status": "\(error.status)"])
            return error.response
        }
    }

    // MARK: - Handlers

    /// `POST /devices`: registers the caller's device (active if it is the subject's first).
    func handleRegister(_ request: HTTPRequest, body: Data) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            guard let form = DeviceJSON.decode(DeviceJSON.Register.self, from: body),
                Self.isReasonable(form.deviceID), Self.isReasonable(form.name), Self.isReasonable(form.platform)
            else {
                throw .badRequest("device_id, name and platform are required (1 to 200 characters)")
            }
            // Registering again starts a new activation: an earlier approval request is withdrawn.
            if let earlier = state.devices.registration(subject: caller.subject, deviceID: form.deviceID), earlier.status != .active {
                dismissApproval(of: earlier, as: .dismissed)
            }
            switch state.devices.register(
                subject: caller.subject, grantID: caller.grantID, deviceID: form.deviceID,
                name: form.name, platform: form.platform, now: deviceAreaNow())
            {
            case .boundElsewhere:
                throw DeviceRejection(409, "grant_bound_to_other_device", "this sign-in already speaks for another device")
            case .registered(let registration):
                logger.debug(
                    "device registered",
                    metadata: [
                        "gateway.registration": "\(registration.id)",
                        "gateway.status": "\(registration.status.rawValue)",
                    ])
                let options = registration.status == .pending ? DeviceLedger.offeredMethods : nil
                return .json(DeviceJSON.Enrollment(device: DeviceJSON.Device(registration), options: options))
            }
        }
    }

    /// `GET /devices`: the subject's devices, for an active device.
    func handleListDevices(_ request: HTTPRequest) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            _ = try activeDevice(caller).get()
            return .json(DeviceJSON.DeviceList(devices: state.devices.registrations(of: caller.subject).map(DeviceJSON.Device.init)))
        }
    }

    /// `GET /devices/{device_id}`: one registration; a device may always read its own.
    func handleDeviceStatus(_ request: HTTPRequest, deviceID: String) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            if caller.registration?.deviceID != deviceID { _ = try activeDevice(caller).get() }
            guard let registration = state.devices.registration(subject: caller.subject, deviceID: deviceID) else {
                throw DeviceRejection(404, "not_found", "no such device for this account")
            }
            return .json(DeviceJSON.OneDevice(device: DeviceJSON.Device(registration)))
        }
    }

    /// `POST /devices/{device_id}/verify`: sends an approval request to the subject's active devices.
    func handleStartVerify(_ request: HTTPRequest, deviceID: String) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            var registration = try ownDevice(caller, deviceID).get()
            try Self.requirePending(registration)
            let approvers = state.devices.registrations(of: caller.subject).filter { $0.status == .active && $0.id != registration.id }
            guard !approvers.isEmpty else {
                throw DeviceRejection(409, "no_active_device", "the account has no active device to approve this one; use the fallback")
            }
            if let previous = registration.approvalNotification, state.notifications.notice(previous)?.status == .pending {
                state.notifications.setStatus(previous, .dismissed)
            }
            let now = deviceAreaNow()
            let notice = state.notifications.post(
                subject: caller.subject, title: "Activate a new device?",
                message: "\"\(registration.name)\" (\(registration.platform)) asks to be activated for your account.",
                actions: [
                    NotificationLedger.Action(label: "Approve", action: "approve", authLevel: nil),
                    NotificationLedger.Action(label: "Reject", action: "reject", authLevel: nil),
                ],
                now: now, expiresAt: now.addingTimeInterval(Self.seconds(state.deviceArea.approvalLifetime)),
                approvesRegistration: registration.id)
            registration.approvalNotification = notice.uuid
            registration.statusReason = "waiting for approval from an active device"
            registration.updatedAt = now
            state.devices.update(registration)
            state.stats.approvalRequests += 1
            statsDidChange()
            logger.debug(
                "approval requested",
                metadata: [
                    "gateway.registration": "\(registration.id)",
                    "gateway.notification": "\(notice.uuid)",
                ])
            return .json(
                DeviceJSON.Verification(
                    notificationUUID: notice.uuid, expiresAt: notice.expiresAt.map(DeviceJSON.milliseconds),
                    device: DeviceJSON.Device(registration)), status: 202)
        }
    }

    /// `POST /devices/{device_id}/fallback`: issues an activation code, delivered out of band
    /// (read it with `GET /admin/devices/{subject}/{device_id}/activation-code`).
    func handleStartFallback(_ request: HTTPRequest, deviceID: String) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            let registration = try ownDevice(caller, deviceID).get()
            try Self.requirePending(registration)
            guard let code = state.devices.issueActivationCode(registration.id, now: deviceAreaNow()),
                let updated = state.devices.registration(id: registration.id)
            else {
                throw DeviceRejection(409, "not_pending", "this device is not waiting for activation")
            }
            logger.debug("fallback activation code issued", metadata: ["gateway.registration": "\(registration.id)"])
            return .json(
                DeviceJSON.Fallback(
                    method: "activation_code", delivery: "out_of_band", codeLength: code.count,
                    device: DeviceJSON.Device(updated)), status: 202)
        }
    }

    /// `POST /devices/{device_id}/activate`: checks the fallback code.
    func handleActivate(_ request: HTTPRequest, deviceID: String, body: Data) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            let registration = try ownDevice(caller, deviceID).get()
            try Self.requirePending(registration)
            guard let form = DeviceJSON.decode(DeviceJSON.Code.self, from: body), !form.code.isEmpty else {
                throw .badRequest("code is required")
            }
            let now = deviceAreaNow()
            switch state.devices.checkActivationCode(registration.id, code: form.code, now: now) {
            case .notStarted:
                throw DeviceRejection(409, "fallback_not_started", "ask for an activation code first")
            case .wrong(let left):
                let status = state.devices.registration(id: registration.id)?.status ?? .rejected
                if status == .rejected { dismissApproval(of: registration, as: .dismissed) }
                throw DeviceRejection(400, "invalid_code", "the activation code is wrong") {
                    $0.attemptsLeft = left
                    $0.status = status.rawValue
                }
            case .accepted:
                dismissApproval(of: registration, as: .dismissed)
                logger.debug("device activated by fallback code", metadata: ["gateway.registration": "\(registration.id)"])
                return try oneDevice(registration.id)
            }
        }
    }

    /// `POST /devices/{device_id}/cancel`: ends a pending activation (`reason`: cancelled | expired).
    func handleCancel(_ request: HTTPRequest, deviceID: String, body: Data) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            let registration = try ownDevice(caller, deviceID).get()
            try Self.requirePending(registration)
            let expired = DeviceJSON.decode(DeviceJSON.Cancel.self, from: body)?.reason == "expired"
            dismissApproval(of: registration, as: expired ? .expired : .dismissed)
            state.devices.settle(
                registration.id, status: .expired,
                reason: expired ? "no approval before the device's deadline" : "activation cancelled on the device",
                now: deviceAreaNow())
            return try oneDevice(registration.id)
        }
    }

    /// `POST /devices/{device_id}/rename`.
    func handleRename(_ request: HTTPRequest, deviceID: String, body: Data) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            _ = try activeDevice(caller).get()
            guard let form = DeviceJSON.decode(DeviceJSON.Rename.self, from: body), Self.isReasonable(form.name) else {
                throw .badRequest("name is required (1 to 200 characters)")
            }
            guard var target = state.devices.registration(subject: caller.subject, deviceID: deviceID) else {
                throw DeviceRejection(404, "not_found", "no such device for this account")
            }
            target.name = form.name
            target.updatedAt = deviceAreaNow()
            state.devices.update(target)
            return try oneDevice(target.id)
        }
    }

    /// `POST /devices/{device_id}/revoke`: terminates a device of the account (this one too).
    func handleRevokeDevice(_ request: HTTPRequest, deviceID: String) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            let me = try activeDevice(caller).get()
            guard let target = state.devices.registration(subject: caller.subject, deviceID: deviceID) else {
                throw DeviceRejection(404, "not_found", "no such device for this account")
            }
            revoke(target, reason: "terminated from device \(me.deviceID)")
            return try oneDevice(target.id)
        }
    }

    // MARK: - Helpers

    func revoke(_ registration: DeviceLedger.Registration, reason: String) {
        dismissApproval(of: registration, as: .dismissed)
        state.devices.settle(registration.id, status: .revoked, reason: reason, now: deviceAreaNow())
        for grant in state.devices.grants(boundTo: registration.id) { state.tokens.revokeGrant(grant) }
        logger.debug("device revoked", metadata: ["gateway.registration": "\(registration.id)"])
    }

    /// Withdraws the registration's pending approval request, if any. `registration` may be a
    /// copy from before it settled (settling forgets the request).
    func dismissApproval(of registration: DeviceLedger.Registration, as status: NotificationLedger.Status) {
        guard let uuid = registration.approvalNotification ?? state.devices.registration(id: registration.id)?.approvalNotification,
            state.notifications.notice(uuid)?.status == .pending
        else { return }
        state.notifications.setStatus(uuid, status)
    }

    func oneDevice(_ id: String) throws(DeviceRejection) -> HTTPResponse {
        guard let registration = state.devices.registration(id: id) else {
            throw DeviceRejection(404, "not_found", "no such device for this account")
        }
        return .json(DeviceJSON.OneDevice(device: DeviceJSON.Device(registration)))
    }

    nonisolated static func requirePending(_ registration: DeviceLedger.Registration) throws(DeviceRejection) {
        guard registration.status == .pending else {
            throw DeviceRejection(409, "not_pending", "this device is not waiting for activation") {
                $0.status = registration.status.rawValue
            }
        }
    }

    nonisolated static func isReasonable(_ text: String) -> Bool {
        !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty && text.count <= 200
    }

    nonisolated static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
