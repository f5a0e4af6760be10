import Foundation
import VaultStore

// MARK: - Session events in the vault's event log

/// A ``SessionEvent`` as the vault's event log holds it (``StoredEvent``): a kind, the account,
/// a plain description (`data`: reasons, times, generations, nothing personal) and the
/// server's words (`detail`, sealed by the vault).
struct LoggedEvent: Sendable, Hashable {
    var kind: String
    var account: AccountID?
    var data: [String: String]
    var detail: String?
}

extension SessionEvent {
    /// Whether this is a ``stateChanged(_:_:)``: the event whose log entry names the session's
    /// id and version.
    var isStateChange: Bool {
        if case .stateChanged = self { return true }
        return false
    }

    /// The entry this event becomes in the log.
    var logged: LoggedEvent {
        switch self {
        case .stateChanged(let id, let status):
            var data = ["state": status.stateName]
            if let reason = status.reason { data["reason"] = reason.rawValue }
            return LoggedEvent(kind: "state_changed", account: id, data: data)
        case .idleWarning(let warning):
            var data = [
                "seconds_left": String(warning.secondsLeft), "deadline": Self.stamp(warning.deadline), "can_extend": String(warning.canExtend),
            ]
            if let stamp = warning.session {
                data["session"] = String(stamp.session)
                data["session_version"] = String(stamp.version)
            }
            return LoggedEvent(kind: "idle_warning", account: warning.account, data: data)
        case .idleWarningWithdrawn(let id, let deadline):
            return LoggedEvent(kind: "idle_warning_withdrawn", account: id, data: ["idle_deadline": Self.stamp(deadline)])
        case .extensionResult(let id, let result):
            switch result {
            case .extended(let deadline, let remaining):
                return LoggedEvent(
                    kind: "extension_result", account: id,
                    data: [
                        "result": "extended", "idle_deadline": Self.stamp(deadline), "remaining": String(remaining),
                    ])
            case .refused(let reason):
                return LoggedEvent(kind: "extension_result", account: id, data: ["result": "refused", "reason": reason.rawValue])
            case .ignored:
                return LoggedEvent(kind: "extension_result", account: id, data: ["result": "ignored"])
            case .refusedByServer(let code, let message):
                var data = ["result": "refused_by_server"]
                if let code { data["code"] = code }
                return LoggedEvent(kind: "extension_result", account: id, data: data, detail: message)
            }
        case .hardTimeout(let id, let reason):
            return LoggedEvent(kind: "hard_timeout", account: id, data: ["reason": reason.rawValue])
        case .tokenRefreshed(let id, let generation):
            return LoggedEvent(kind: "token_refreshed", account: id, data: ["generation": String(generation)])
        case .refreshFailed(let id, let reason, let retryAt):
            var data: [String: String] = [:]
            if let retryAt { data["retry_at"] = Self.stamp(retryAt) }
            return LoggedEvent(kind: "refresh_failed", account: id, data: data, detail: reason)
        case .revoked(let id, let description):
            // The reason in plain data (`vault events` shows it without the key); the words sealed.
            return LoggedEvent(kind: "revoked", account: id, data: ["reason": ForcedLogoutReason(refusal: description).rawValue], detail: description)
        case .accountSwitched(let from, let to):
            var data: [String: String] = [:]
            if let from { data["from"] = from.rawValue }
            if let to { data["to"] = to.rawValue }
            return LoggedEvent(kind: "account_switched", account: to, data: data)
        case .refreshTokenExpiring(let id, let expiresAt):
            return LoggedEvent(kind: "refresh_token_expiring", account: id, data: ["expires_at": Self.stamp(expiresAt)])
        }
    }

    /// The event a log entry records; nil for an entry this build does not know (a newer
    /// build's kind) or one that is not whole.
    init?(_ entry: StoredEvent) {
        let data = entry.data
        func date(_ key: String) -> Date? { data[key].flatMap(Int64.init).map(Date.init(millisecondsSince1970:)) }
        switch entry.kind {
        case "account_switched":
            self = .accountSwitched(from: data["from"].map(AccountID.init(rawValue:)), to: data["to"].map(AccountID.init(rawValue:)))
            return
        default:
            break
        }
        guard let id = entry.account ?? data["account"].map(AccountID.init(rawValue:)) else { return nil }
        switch entry.kind {
        case "state_changed":
            guard let status = SessionStatus(stateName: data["state"] ?? "", reason: data["reason"]) else { return nil }
            self = .stateChanged(id, status)
        case "idle_warning":
            guard let seconds = data["seconds_left"].flatMap(Int.init), let deadline = date("deadline") else { return nil }
            let stamp = data["session"].flatMap(Int64.init).flatMap { session in
                data["session_version"].flatMap(Int64.init).map { SessionStamp(session: session, version: $0) }
            }
            self = .idleWarning(
                IdleWarning(account: id, secondsLeft: seconds, deadline: deadline, canExtend: data["can_extend"] == "true", session: stamp))
        case "idle_warning_withdrawn":
            guard let deadline = date("idle_deadline") else { return nil }
            self = .idleWarningWithdrawn(id, idleDeadline: deadline)
        case "extension_result":
            switch data["result"] {
            case "extended":
                guard let deadline = date("idle_deadline"), let remaining = data["remaining"].flatMap(Int.init) else { return nil }
                self = .extensionResult(id, .extended(idleDeadline: deadline, remaining: remaining))
            case "refused":
                guard let reason = data["reason"].flatMap(ExtensionRefusal.init(rawValue:)) else { return nil }
                self = .extensionResult(id, .refused(reason))
            case "ignored":
                self = .extensionResult(id, .ignored)
            case "refused_by_server":
                self = .extensionResult(id, .refusedByServer(code: data["code"], message: entry.detail))
            default:
                return nil
            }
        case "hard_timeout":
            guard let reason = data["reason"] else { return nil }
            self = .hardTimeout(id, SessionEndReason(rawValue: reason))
        case "token_refreshed":
            guard let generation = data["generation"].flatMap(Int64.init) else { return nil }
            self = .tokenRefreshed(id, generation: generation)
        case "refresh_failed":
            self = .refreshFailed(id, reason: entry.detail ?? "refresh failed (details sealed)", retryAt: date("retry_at"))
        case "revoked":
            self = .revoked(id, description: entry.detail)
        case "refresh_token_expiring":
            guard let expiresAt = date("expires_at") else { return nil }
            self = .refreshTokenExpiring(id, expiresAt: expiresAt)
        default:
            return nil
        }
    }

    private static func stamp(_ date: Date) -> String { String(date.millisecondsSince1970) }
}

extension SessionStatus {
    /// The state's name in the log and in `vault events`.
    var stateName: String {
        switch self {
        case .signedOut: "signed_out"
        case .active: "active"
        case .locked: "locked"
        case .expired: "expired"
        }
    }

    var reason: SessionEndReason? {
        switch self {
        case .locked(let reason), .expired(let reason): reason
        case .signedOut, .active: nil
        }
    }

    init?(stateName: String, reason: String?) {
        let reason = SessionEndReason(rawValue: reason ?? "")
        switch stateName {
        case "signed_out": self = .signedOut
        case "active": self = .active
        case "locked": self = .locked(reason)
        case "expired": self = .expired(reason)
        default: return nil
        }
    }
}
