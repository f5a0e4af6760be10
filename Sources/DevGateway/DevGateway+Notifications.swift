import FlyingFox
import Foundation
import Logging

// MARK: - Notification endpoints: paged list, answers (first one wins)

extension DevGateway {
    nonisolated static var notificationRoutes: [GatewayRoute] {
        [
            deviceRoute("GET /notifications") { gateway, request, _ in
                await gateway.handleListNotifications(request)
            },
            deviceRoute("POST /notifications/:uuid/answer") { gateway, request, uuid in
                await gateway.handleAnswer(request, uuid: uuid, body: body(of: request))
            },
        ]
    }

    /// `GET /notifications?record_count&start_index&start_date&end_date` (the codelab's
    /// getNotifications paging): newest first; `start_index` counts from 1, `record_count` 0 means all.
    func handleListNotifications(_ request: HTTPRequest) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            _ = try activeDevice(caller).get()
            func integer(_ name: String, default value: Int64) throws(DeviceRejection) -> Int64 {
                guard let text = request.query[name], !text.isEmpty else { return value }
                guard let number = Int64(text) else { throw .badRequest("\(name) must be an integer") }
                return number
            }
            let recordCount = try integer("record_count", default: 0)
            let startIndex = try integer("start_index", default: 1)
            guard recordCount >= 0, startIndex >= 1 else {
                throw .badRequest("start_index counts from 1 and record_count must not be negative")
            }
            let start = try request.query["start_date"].map { _ throws(DeviceRejection) in try integer("start_date", default: 0) }
            let end = try request.query["end_date"].map { _ throws(DeviceRejection) in try integer("end_date", default: 0) }
            let found = state.notifications.page(
                of: caller.subject,
                start: start.map { Date(timeIntervalSince1970: Double($0) / 1000) },
                end: end.map { Date(timeIntervalSince1970: Double($0) / 1000) },
                skipping: Int(min(startIndex - 1, Int64(Int.max / 2))),
                count: recordCount == 0 ? nil : Int(min(recordCount, Int64(Int.max / 2))))
            return .json(
                DeviceJSON.NotificationPage(
                    notifications: found.notices.map(DeviceJSON.Notification.init),
                    totalCount: found.total, startIndex: Int(startIndex), recordCount: found.notices.count))
        }
    }

    /// `POST /notifications/{uuid}/answer` `{"action"}`: the first answer wins; answering an
    /// approval request activates (approve) or rejects (reject) the device waiting for it.
    func handleAnswer(_ request: HTTPRequest, uuid: String, body: Data) async -> HTTPResponse {
        await withCaller(request) { caller throws(DeviceRejection) in
            let me = try activeDevice(caller).get()
            guard let form = DeviceJSON.decode(DeviceJSON.Answer.self, from: body), !form.action.isEmpty else {
                throw .badRequest("action is required")
            }
            let now = deviceAreaNow()
            switch state.notifications.answer(uuid, subject: caller.subject, action: form.action, deviceID: me.deviceID, now: now) {
            case .notFound:
                throw DeviceRejection(404, "not_found", "no such notification for this account")
            case .alreadyAnswered(let notice):
                throw DeviceRejection(409, "already_answered", "the notification was already answered") {
                    $0.actionPerformed = notice.actionPerformed
                    $0.answeredByDevice = notice.answeredByDevice
                    $0.answeredAt = notice.answeredAt.map(DeviceJSON.milliseconds)
                }
            case .expired(let notice):
                expireOverdue()
                throw DeviceRejection(410, "expired", "the notification expired") {
                    $0.expiredAt = notice.expiresAt.map(DeviceJSON.milliseconds)
                }
            case .dismissed:
                throw DeviceRejection(410, "dismissed", "the notification was withdrawn")
            case .actionNotOffered(let notice):
                throw DeviceRejection(400, "unknown_action", "the notification does not offer that action") {
                    $0.offeredActions = notice.actions.map(\.action)
                }
            case .answered(let notice):
                if let registrationID = notice.approvesRegistration,
                    let registration = state.devices.registration(id: registrationID),
                    registration.status == .pending, registration.approvalNotification == notice.uuid
                {
                    if form.action == "approve" {
                        state.devices.settle(
                            registrationID, status: .active, method: "verify",
                            reason: "approved from device \(me.deviceID)", now: now)
                    } else {
                        state.devices.settle(
                            registrationID, status: .rejected,
                            reason: "rejected from device \(me.deviceID)", now: now)
                    }
                }
                logger.debug("notification answered", metadata: ["gateway.notification": "\(notice.uuid)"])
                return .json(DeviceJSON.OneNotification(notification: DeviceJSON.Notification(notice)))
            }
        }
    }
}

// MARK: - Device and notification admin: revoke a device, read a fallback code, post, move the clock

extension DevGateway {
    nonisolated static var deviceAdminRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /admin/devices/:subject/:device_id/revoke") { gateway, request in
                let (subject, deviceID) = adminDevice(request)
                return .json(["revoked": await gateway.revokeDevice(subject: subject, deviceID: deviceID)])
            },
            GatewayRoute(route: "GET /admin/devices/:subject/:device_id/activation-code") { gateway, request in
                let (subject, deviceID) = adminDevice(request)
                guard let code = await gateway.activationCode(subject: subject, deviceID: deviceID) else {
                    return .json(DeviceJSON.Failure(error: "not_found", errorDescription: "no activation code is outstanding"), status: 404)
                }
                return .json(["code": code])
            },
            GatewayRoute(route: "POST /admin/notifications") { gateway, request in
                guard let form = DeviceJSON.decode(DeviceJSON.PostNotification.self, from: await body(of: request)),
                    !form.subject.isEmpty, (form.expiresIn ?? 0) >= 0
                else {
                    return AdminJSON.badRequest
                }
                let notice = await gateway.post(
                    subject: form.subject, title: form.title ?? "Notification", message: form.message,
                    actions: form.actions ?? [], expiresIn: form.expiresIn.map { .seconds($0) })
                return .json(DeviceJSON.OneNotification(notification: DeviceJSON.Notification(notice)), status: 201)
            },
            GatewayRoute(route: "POST /admin/clock") { gateway, request in
                guard let form = DeviceJSON.decode(DeviceJSON.Clock.self, from: await body(of: request)), form.advanceSeconds >= 0 else {
                    return AdminJSON.badRequest
                }
                await gateway.advanceClock(by: .seconds(form.advanceSeconds))
                return .empty(status: 204)
            },
            GatewayRoute(route: "POST /admin/device-settings") { gateway, request in
                guard let form = DeviceJSON.decode(DeviceJSON.DeviceSettings.self, from: await body(of: request)),
                    (form.approvalLifetime ?? 1) > 0
                else {
                    return AdminJSON.badRequest
                }
                if let lifetime = form.approvalLifetime { await gateway.setApprovalLifetime(.seconds(lifetime)) }
                return .empty(status: 204)
            },
        ]
    }

    nonisolated private static func adminDevice(_ request: HTTPRequest) -> (String, String) {
        let decode = { (name: String) in request.routeParameters[name].flatMap { $0.removingPercentEncoding } ?? "" }
        return (decode("subject"), decode("device_id"))
    }

    // MARK: - Admin, in Swift

    /// Revokes a device of `subject`, as an administrator would: its grants are revoked and
    /// every later device or notification call it makes answers 401 `device_revoked`.
    /// Returns false for an unknown device.
    ///
    /// ```swift
    /// await gateway.revokeDevice(subject: "alice", deviceID: vault.deviceID)
    /// ```
    @discardableResult
    public func revokeDevice(subject: String, deviceID: String) -> Bool {
        guard let registration = state.devices.registration(subject: subject, deviceID: deviceID) else { return false }
        revoke(registration, reason: "revoked by an administrator")
        return true
    }

    /// The fallback activation code outstanding for a device: the out-of-band channel
    /// (SMS, e-mail) of a real identity service.
    public func activationCode(subject: String, deviceID: String) -> String? {
        state.devices.registration(subject: subject, deviceID: deviceID)?.activationCode
    }

    /// A device's registration status at the gateway (`pending`, `active`, `rejected`,
    /// `revoked`, `expired`), after applying expiry; nil for an unknown device.
    public func deviceStatus(subject: String, deviceID: String) -> String? {
        expireOverdue()
        return state.devices.registration(subject: subject, deviceID: deviceID)?.status.rawValue
    }

    /// Posts a notification for `subject` offering `actions` (label, action); returns its uuid.
    ///
    /// ```swift
    /// let uuid = await gateway.postNotification(subject: "alice", title: "Sign in on web?",
    ///                                           message: "Chrome on Linux", actions: [("Allow", "allow"), ("Deny", "deny")])
    /// ```
    @discardableResult
    public func postNotification(
        subject: String, title: String, message: String,
        actions: [(label: String, action: String)], expiresIn: Duration? = nil
    ) -> String {
        postNotification(
            subject: subject, title: title, message: message,
            actions: actions.map { (label: $0.label, action: $0.action, authLevel: nil) }, expiresIn: expiresIn)
    }

    /// The same, with an authentication level on some actions (`"high"`: approving needs a
    /// recent sign-in).
    @discardableResult
    public func postNotification(
        subject: String, title: String, message: String,
        actions: [(label: String, action: String, authLevel: String?)], expiresIn: Duration? = nil
    ) -> String {
        post(
            subject: subject, title: title, message: message,
            actions: actions.map { NotificationLedger.Action(label: $0.label, action: $0.action, authLevel: $0.authLevel) },
            expiresIn: expiresIn
        ).uuid
    }

    func post(
        subject: String, title: String, message: String, actions: [NotificationLedger.Action],
        expiresIn: Duration?
    ) -> NotificationLedger.Notice {
        let now = deviceAreaNow()
        return state.notifications.post(
            subject: subject, title: title, message: message, actions: actions, now: now,
            expiresAt: expiresIn.map { now.addingTimeInterval(Self.seconds($0)) })
    }

    /// Moves the device area's clock forward (notification expiry, timestamps); tokens are unaffected.
    public func advanceClock(by duration: Duration) {
        state.deviceArea.clockOffset += max(.zero, duration)
        expireOverdue()
    }

    /// Reads the device area's time from `now` instead of the system clock, so a test's clock
    /// drives notification expiry and timestamps; tokens are unaffected.
    ///
    /// ```swift
    /// await gateway.useClock { testTime.now() }
    /// ```
    public func useClock(_ now: @escaping @Sendable () -> Date) {
        state.deviceArea.now = now
    }

    /// How long new-device approval requests stay answerable (default 5 minutes).
    public func setApprovalLifetime(_ lifetime: Duration) {
        state.deviceArea.approvalLifetime = max(.seconds(1), lifetime)
    }

    /// `METHOD /route` of every device and notification request received so far, in order.
    public func deviceRequests() -> [String] { state.deviceArea.requests }
}
