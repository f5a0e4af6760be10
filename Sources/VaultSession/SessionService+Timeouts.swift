import Foundation
import Logging
import VaultStore

// MARK: - Judging sessions

extension SessionService {
    /// The account's session if tokens may be served now; otherwise applies whatever deadline
    /// passed (lock or expire, persisted and announced) and throws why not.
    func servableSession(_ id: AccountID) async throws -> SessionRecord {
        let (session, policy) = try await sessionAndPolicy(id)
        return try await servableSession(id, current: session, policy: policy)
    }

    /// The account's current session and its policy, in one read (one trip to the I/O threads).
    func sessionAndPolicy(_ id: AccountID) async throws -> (SessionRecord?, SessionPolicy) {
        try await vaultCall { [vault] in try (vault.sessions.current(for: id), vault.sessions.policy(for: id)) }
    }

    /// The same, judging a session and policy the caller read. A lock or expiry is decided again
    /// on the row as it is when it is written: should another process have recorded activity
    /// meanwhile, nothing is applied and the session is judged afresh.
    func servableSession(_ id: AccountID, current: SessionRecord?, policy: SessionPolicy) async throws -> SessionRecord {
        let (session, warning) = try await judgedSession(id, current: current, policy: policy)
        if let warning { announce(warning) }
        return session
    }

    /// The same, handing back the idle warning in force instead of raising it: for a caller that
    /// is about to record activity, which would withdraw it (``touch(_:policy:raising:)``).
    func judgedSession(_ id: AccountID, current: SessionRecord?, policy: SessionPolicy) async throws -> (SessionRecord, IdleWarning?) {
        var current = current
        var policy = policy
        for _ in 0..<Self.transitionAttempts {
            guard let session = current else { throw SessionError.notSignedIn(id) }
            switch SessionJudge.judge(session, policy: policy, now: now()) {
            case .active(let warning, _):
                if let lockReason, vault.isLocked { throw SessionError.locked(id, lockReason) }
                return (session, warning)
            case .lock(let reason):
                if try await applyLock(id, reason: reason, timedOut: true) { throw SessionError.locked(id, reason) }
            case .expire(let reason):
                if try await applyExpiry(id, reason: reason, timedOut: true) { throw SessionError.expired(id, reason) }
            case .over(let state, let reason):
                throw try await endedError(id, state: state, reason: reason)
            }
            // Another process changed the session first: judge it as it is now.
            (current, policy) = try await sessionAndPolicy(id)
        }
        throw SessionError.vault(VaultError(.staleGeneration, "the session of account \(id) kept changing while it was judged; try again"))
    }

    /// How often a transition decided on a read that another process overtook is decided again.
    static let transitionAttempts = 8

    /// Applies an expiry that is due (never a lock) to the account's session.
    func expireIfDue(_ id: AccountID) async throws {
        let (current, policy) = try await sessionAndPolicy(id)
        guard let session = current else { return }
        if case .expire(let reason) = SessionJudge.judge(session, policy: policy, now: now()) {
            try await applyExpiry(id, reason: reason, timedOut: true)
        }
    }

    /// The error for a session that is already over.
    func endedError(_ id: AccountID, state: SessionState, reason: SessionEndReason?) async throws -> SessionError {
        switch state {
        case .active: return SessionError.notSignedIn(id)
        case .locked: return .locked(id, reason ?? .lockedByUser)
        case .signedOut: return .notSignedIn(id)
        case .expired where reason == .revoked:
            let state = try await vaultCall { [vault] in try vault.leases.state(for: id) }
            return .revoked(id, description: state.lastFailureDetail ?? state.lastFailure)
        case .expired where reason == .refused:
            let state = try await vaultCall { [vault] in try vault.leases.state(for: id) }
            return .refused(id, description: state.lastFailureDetail ?? state.lastFailure)
        case .expired: return .expired(id, reason ?? .absoluteTimeout)
        }
    }

    /// Locks the account's session in the vault: a timeout (`timedOut`) only if the session,
    /// judged again inside the write, still calls for exactly that; a lock on request only if
    /// it is active. Then waits for in-flight refreshes, so no rotated token is lost, and drops
    /// the vault's keys from memory. Returns false when nothing was locked (the session moved
    /// on: another process recorded activity, locked or ended it first).
    @discardableResult
    func applyLock(_ id: AccountID, reason: SessionEndReason, timedOut: Bool) async throws -> Bool {
        let now = now()
        // The lock and its events, in one transaction.
        let events: [SessionEvent] = (timedOut ? [.hardTimeout(id, reason)] : []) + [.stateChanged(id, .locked(reason))]
        let recorded = recording { (outcome: (session: SessionRecord, result: Bool)?) in
            guard let outcome, outcome.result else { return [] }
            return events.map { ($0, $0.isStateChange ? outcome.session : nil) }
        }
        let locked = try await transition(id, "locking a session", recording: recorded) { session, policy -> Bool in
            if timedOut {
                guard SessionJudge.judge(session, policy: policy, now: now) == .lock(reason) else { return false }
            } else {
                guard session.state == .active else { return false }
            }
            session.state = .locked
            session.endReason = reason.rawValue
            session.extensionInFlight = nil
            return true
        }
        guard locked.result else { return false }
        for refresh in broker.runningRefreshes { await refresh.finished() }
        for refresh in broker.runningTargetRefreshes { await refresh.finished() }
        lockReason = reason
        broker.cache = nil
        vault.lock()
        timeouts.forgetWarning(for: id)
        logger.info("session locked", metadata: ["account": "\(id)", "reason": "\(reason)"])
        announce(events)
        try await settle()
        return true
    }

    /// Expires: wipes the account's tokens and ends its session with `reason`, in one
    /// transaction; a timeout only if the session, judged again inside it, still calls for
    /// that. Returns false when nothing was ended.
    @discardableResult
    func applyExpiry(_ id: AccountID, reason: SessionEndReason, timedOut: Bool) async throws -> Bool {
        let now = now()
        // The expiry and its events, in one transaction.
        let events: [SessionEvent] = (timedOut ? [.hardTimeout(id, reason)] : []) + [.stateChanged(id, .expired(reason))]
        let recorded = recording { (outcome: (ended: Bool, session: SessionRecord?)) in
            outcome.ended ? events.map { ($0, $0.isStateChange ? outcome.session : nil) } : []
        }
        let ended = try await vaultCall { [vault] in
            try vault.leases.endGrant(
                for: id, reason: reason.rawValue,
                onlyIf: { session, policy in
                    timedOut
                        ? SessionJudge.judge(session, policy: policy, now: now) == .expire(reason)
                        : session.state == .active || session.state == .locked
                }, recording: recorded)
        }
        guard ended.ended else { return false }
        timeouts.forgetWarning(for: id)
        logger.info("session expired", metadata: ["account": "\(id)", "reason": "\(reason)"])
        announce(events)
        try await settle()
        return true
    }

    /// Raises the idle warning once per idle deadline.
    func announce(_ warning: IdleWarning) {
        guard timeouts.firstWarning(for: warning.account, deadline: warning.deadline) else { return }
        publish(.idleWarning(warning))
    }

    func resolve(_ account: AccountID?) async throws -> AccountID {
        guard let id = try await accountOrActive(account) else { throw SessionError.noActiveAccount }
        return id
    }

    /// Runs `change` on the account's session as the vault holds it, in one immediate
    /// transaction (``SessionStore/transition(for:_:_:)``): every session transition is decided
    /// on the current row, never on an earlier read, so no process undoes another's lock or end.
    func transition<T: Sendable>(
        _ id: AccountID, _ action: String,
        recording: EventRecording<(session: SessionRecord, result: T)?>? = nil,
        _ change: @escaping @Sendable (inout SessionRecord, SessionPolicy) throws -> T
    ) async throws -> (session: SessionRecord, result: T) {
        guard let outcome = try await vaultCall({ [vault] in try vault.sessions.transition(for: id, action, recording: recording, change) }) else {
            throw SessionError.notSignedIn(id)
        }
        return outcome
    }
}

// MARK: - Activity, extension, background

extension SessionService {
    /// Records the user's activity: the idle deadline moves to now + the idle timeout (never
    /// past the absolute deadline). Written only when the stored last activity is older than a
    /// twentieth of the idle timeout (at least ``SessionConfiguration/activityWriteInterval``,
    /// at most a quarter of the timeout), so frequent calls cost a read, not a write.
    public func recordActivity(for account: AccountID? = nil) async throws {
        let id = try await resolve(account)
        let (current, policy) = try await sessionAndPolicy(id)
        let (session, warning) = try await judgedSession(id, current: current, policy: policy)
        try await touch(session, policy: policy, raising: warning)
    }

    /// ``touch(_:policy:)``, then `warning` (the one in force when `session` was judged) is
    /// raised only if the activity was not written: written activity moved the deadline it was
    /// judged on (and withdrew it, were it raised before).
    @discardableResult
    func touch(_ session: SessionRecord, policy: SessionPolicy, raising warning: IdleWarning?) async throws -> SessionRecord? {
        let touched = try await touch(session, policy: policy)
        if touched == nil, let warning { announce(warning) }
        return touched
    }

    /// Moves the idle deadline for activity now, unless the session's stored last activity is
    /// more recent than `activityInterval(_:)` (so a script asking for a token every second
    /// writes once in a while, not every time). The write is a transition: it happens only if the
    /// session is still active and not due, as it is in the vault at that moment.
    ///
    /// Returns the session as written, nil when nothing was written.
    @discardableResult
    func touch(_ session: SessionRecord, policy: SessionPolicy) async throws -> SessionRecord? {
        guard activityIsDue(session, policy: policy) else { return nil }
        let now = now()
        let id = session.account
        // Activity inside the warning window withdraws the warning, in the same transaction.
        let recorded = recording { (outcome: (session: SessionRecord, result: Bool?)?) in
            guard let outcome, outcome.result == true, let deadline = outcome.session.idleDeadline else { return [] }
            return [(.idleWarningWithdrawn(id, idleDeadline: deadline), outcome.session)]
        }
        // nil: not written; else whether a warning was in force.
        let moved = try await transition(id, "recording activity", recording: recorded) { session, policy -> Bool? in
            guard case .active(let warning, _) = SessionJudge.judge(session, policy: policy, now: now) else { return nil }
            session.lastActivityAt = now
            session.idleDeadline = SessionJudge.idleDeadline(after: now, session: session, policy: policy)
            return warning != nil
        }
        guard let warned = moved.result else { return nil }
        timeouts.forgetWarning(for: id)
        if warned, let deadline = moved.session.idleDeadline {
            announce([.idleWarningWithdrawn(id, idleDeadline: deadline)])
        }
        scheduleTimer()
        return moved.session
    }

    /// A sensitive action (Para's session model): activity, always written, and under a policy
    /// with a ``SessionPolicy/sensitiveActionCap`` the absolute deadline moves to now + the
    /// absolute lifetime, never past the session's start + the cap and never earlier than it
    /// was. Throws as a token request does when the session cannot serve (locked, expired).
    /// Returns the session as written.
    ///
    /// ```swift
    /// try await session.recordSensitiveAction()   // before a payment, a key rotation, a deploy
    /// ```
    @discardableResult
    public func recordSensitiveAction(for account: AccountID? = nil) async throws -> SessionRecord {
        let id = try await resolve(account)
        _ = try await servableSession(id)
        let now = now()
        let recorded = recording { (outcome: (session: SessionRecord, result: Bool?)?) in
            guard let outcome, outcome.result == true, let deadline = outcome.session.idleDeadline else { return [] }
            return [(.idleWarningWithdrawn(id, idleDeadline: deadline), outcome.session)]
        }
        // nil: not active any more; else whether a warning was in force.
        let moved = try await transition(id, "recording a sensitive action", recording: recorded) { session, policy -> Bool? in
            guard case .active(let warning, _) = SessionJudge.judge(session, policy: policy, now: now) else { return nil }
            if let cap = policy.sensitiveActionCap, let lifetime = policy.absoluteLifetime, let current = session.absoluteDeadline {
                let moved = min(now.addingTimeInterval(lifetime.timeInterval), session.startedAt.addingTimeInterval(cap.timeInterval))
                session.absoluteDeadline = max(current, moved)
            }
            session.lastActivityAt = now
            session.idleDeadline = SessionJudge.idleDeadline(after: now, session: session, policy: policy)
            return warning != nil
        }
        guard let warned = moved.result else {
            _ = try await servableSession(id)  // ended meanwhile: say so
            throw SessionError.notSignedIn(id)
        }
        timeouts.forgetWarning(for: id)
        if warned, let deadline = moved.session.idleDeadline {
            announce([.idleWarningWithdrawn(id, idleDeadline: deadline)])
        }
        logger.info(
            "sensitive action recorded",
            metadata: ["account": "\(id)", "absolute_deadline": "\(moved.session.absoluteDeadline.map { "\($0)" } ?? "none")"])
        try await settle()
        return moved.session
    }

    /// Whether activity now should be written (see ``touch(_:policy:)``).
    func activityIsDue(_ session: SessionRecord, policy: SessionPolicy) -> Bool {
        policy.idleTimeout != nil && now().timeIntervalSince(session.lastActivityAt) >= activityInterval(policy).timeInterval
    }

    /// How stale the stored last activity may get before activity is written again: a
    /// twentieth of the idle timeout (45 s of a 15 min timeout: the session idles out at most
    /// that early), at least ``SessionConfiguration/activityWriteInterval``, never more than a
    /// quarter of the idle timeout.
    func activityInterval(_ policy: SessionPolicy) -> Duration {
        guard let idle = policy.idleTimeout else { return configuration.activityWriteInterval }
        return min(max(configuration.activityWriteInterval, idle / 20), idle / 4)
    }

    /// Asks for more time after an idle warning. At most `SessionPolicy.maxExtensions` per
    /// session, never past the absolute lifetime; while one request is in flight (in any
    /// process: the vault holds a marker with its own deadline) another is ignored. The answer
    /// is also sent as ``SessionEvent/extensionResult(_:_:)``.
    @discardableResult
    public func extendSession(for account: AccountID? = nil) async throws -> ExtensionResult {
        let id = try await resolve(account)
        let (result, session) = try await extensionOutcome(id, asking: extensionHandler.map(HandlerAsk.init), warningWindowOnly: false)
        tell(.extensionResult(id, result), recorded: session != nil, session: session)
        return result
    }

    /// Asks the identity service through `api` (the codelab's extendSessionIdleTimeout) and
    /// extends only when it grants; its refusal comes back as
    /// ``ExtensionResult/refusedByServer(code:message:)``. With `onlyInWarningWindow` (the
    /// default), a request before the idle warning is refused
    /// (``ExtensionRefusal/notInWarningWindow``) without asking. The limits of
    /// ``extendSession(for:)`` hold. Throws when the server could not be asked (the session
    /// is left as it was).
    @discardableResult
    public func extendSession(
        for account: AccountID? = nil, askingServer api: any SessionExtensionAPI,
        onlyInWarningWindow: Bool = true
    ) async throws -> ExtensionResult {
        let id = try await resolve(account)
        let (result, session) = try await extensionOutcome(id, asking: api, warningWindowOnly: onlyInWarningWindow)
        tell(.extensionResult(id, result), recorded: session != nil, session: session)
        return result
    }

    /// The older yes/no extension handler, asked the way the extension protocol is: a no is a
    /// refusal without the server's words (``ExtensionRefusal/serverRefused``).
    struct HandlerAsk: SessionExtensionAPI {
        let handler: @Sendable (AccountID) async -> Bool
        func extendSessionIdleTimeout(account: AccountID) async throws -> ExtensionResponse {
            ExtensionResponse(statusCode: await handler(account) ? 200 : 403)
        }
    }

    private static func refusal(_ session: SessionRecord, _ policy: SessionPolicy) -> ExtensionRefusal? {
        if policy.idleTimeout == nil { return .noIdleTimeout }
        if session.extensionsUsed >= policy.maxExtensions { return .limitReached }
        if let idle = session.idleDeadline, let absolute = session.absoluteDeadline, idle >= absolute { return .absoluteLifetimeReached }
        if SessionJudge.idleSinceExtension(session, policy: policy) { return .noActivitySinceExtension }
        return nil
    }

    /// Step one, in the vault: the session is judged, the limit checked and, when the server is
    /// to be asked, the in-flight marker set, all in one transition. Step two asks the server.
    /// Step three, in the vault again: the extension is applied only if this request's marker
    /// is still there (the session did not end, the marker did not lapse and get taken over).
    private func extensionOutcome(_ id: AccountID, asking ask: (any SessionExtensionAPI)?, warningWindowOnly: Bool) async throws -> (
        ExtensionResult, SessionRecord?
    ) {
        guard (try? await servableSession(id)) != nil else { return (.refused(.sessionOver), nil) }
        let marker = SessionRecord.ExtensionMarker(
            holder: "\(holderID)/\(UUID().uuidString.lowercased())",
            deadline: now().addingTimeInterval(configuration.requestDeadline.timeInterval + 1))
        let asksServer = ask != nil
        enum Step {
            case refused(ExtensionRefusal)
            case refusedByServer(String?, String?)
            case ignored
            case marked(sessionID: Int64)
            case extended(SessionRecord, remaining: Int)
        }
        // An extension granted is written with its event (a refusal writes nothing; its answer
        // is published on its own).
        func recordingExtension(at now: Date) -> EventRecording<(session: SessionRecord, result: Step)?> {
            recording { outcome in
                guard let outcome, case .extended(let extended, let remaining) = outcome.result else { return [] }
                let result = ExtensionResult.extended(idleDeadline: extended.idleDeadline ?? now, remaining: remaining)
                return [(.extensionResult(id, result), outcome.session)]
            }
        }
        let now = now()
        let first = try await transition(id, "extending a session", recording: recordingExtension(at: now)) { session, policy -> Step in
            guard case .active(let warning, _) = SessionJudge.judge(session, policy: policy, now: now) else { return .refused(.sessionOver) }
            if let reason = Self.refusal(session, policy) { return .refused(reason) }
            if warningWindowOnly, warning == nil { return .refused(.notInWarningWindow) }
            if let pending = session.extensionInFlight, pending.deadline > now { return .ignored }
            guard !asksServer else {
                session.extensionInFlight = marker
                return .marked(sessionID: session.id)
            }
            Self.extend(&session, policy: policy, now: now)
            return .extended(session, remaining: policy.maxExtensions - session.extensionsUsed)
        }
        let sessionID: Int64
        switch first.result {
        case .refused(let reason): return (.refused(reason), nil)
        case .ignored, .refusedByServer: return (.ignored, nil)  // step one never refuses for the server
        case .extended(let session, let remaining): return (extended(session, remaining: remaining), session)
        case .marked(let id): sessionID = id
        }
        let yesOrNo = ask is HandlerAsk
        let acceptance = yesOrNo ? ExtensionAcceptance.httpSuccess : configuration.extensionAcceptance
        // Asked outside any transaction; a server that cannot be asked leaves the session as it was.
        let answer: Result<ExtensionResponse, any Error>
        if let ask {
            do { answer = .success(try await ask.extendSessionIdleTimeout(account: id)) } catch { answer = .failure(error) }
        } else {
            answer = .success(ExtensionResponse(statusCode: 200))
        }
        let later = self.now()
        let last = try await transition(id, "extending a session", recording: recordingExtension(at: later)) { session, policy -> Step in
            guard session.id == sessionID, session.extensionInFlight?.holder == marker.holder else { return .refused(.sessionOver) }
            session.extensionInFlight = nil
            guard case .success(let response) = answer else { return .ignored }
            guard acceptance.grants(response) else {
                return yesOrNo ? .refused(.serverRefused) : .refusedByServer(response.errorCode, response.errorMessage)
            }
            guard case .active = SessionJudge.judge(session, policy: policy, now: later) else { return .refused(.sessionOver) }
            if let reason = Self.refusal(session, policy) { return .refused(reason) }
            Self.extend(&session, policy: policy, now: later)
            return .extended(session, remaining: policy.maxExtensions - session.extensionsUsed)
        }
        if case .failure(let error) = answer { throw error }
        switch last.result {
        case .extended(let session, let remaining): return (extended(session, remaining: remaining), session)
        case .refused(let reason): return (.refused(reason), nil)
        case .refusedByServer(let code, let message): return (.refusedByServer(code: code, message: message), nil)
        case .ignored, .marked: return (.ignored, nil)
        }
    }

    /// An extension moves the idle deadline to now + the idle timeout; it is not activity, so the
    /// stored last activity stays (see ``SessionJudge/idleSinceExtension(_:policy:)``). The token
    /// a server-asked extension carries is served before the extension is applied, so under
    /// `activity: any` that serving comes before the extension too: it is not activity since it.
    private static func extend(_ session: inout SessionRecord, policy: SessionPolicy, now: Date) {
        session.extensionsUsed += 1
        session.idleDeadline = SessionJudge.idleDeadline(after: now, session: session, policy: policy)
    }

    private func extended(_ session: SessionRecord, remaining: Int) -> ExtensionResult {
        timeouts.forgetWarning(for: session.account)
        scheduleTimer()
        logger.info("session extended", metadata: ["account": "\(session.account)", "extensions": "\(session.extensionsUsed)"])
        return .extended(idleDeadline: session.idleDeadline ?? now(), remaining: remaining)
    }

    /// The tool went to the background (hidden, suspended, screen locked): the time is
    /// recorded in the vault and judged on return.
    public func enterBackground() async throws {
        let id = try await resolve(nil)
        _ = try await servableSession(id)
        let now = now()
        _ = try await transition(id, "recording the background") { session, policy in
            guard case .active = SessionJudge.judge(session, policy: policy, now: now), session.backgroundEnteredAt == nil else { return }
            session.backgroundEnteredAt = now
        }
        try await settle()
    }

    /// Back in the foreground: past the background timeout the session locks before any token
    /// is served; otherwise it carries on, and a pending warning's countdown counts the time away.
    public func enterForeground() async throws {
        let id = try await resolve(nil)
        _ = try await servableSession(id)
        let now = now()
        let back = try await transition(id, "recording the foreground") { session, policy -> Bool in
            guard case .active = SessionJudge.judge(session, policy: policy, now: now), session.backgroundEnteredAt != nil else { return false }
            session.backgroundEnteredAt = nil
            return true
        }
        guard back.result else { return }
        timeouts.forgetWarning(for: id)
        _ = try await servableSession(id)
        scheduleTimer()
    }

    /// Locks the active account's session now and drops the vault's keys.
    public func lock() async throws {
        let id = try await resolve(nil)
        _ = try await servableSession(id)
        guard try await applyLock(id, reason: .lockedByUser, timedOut: false) else {
            _ = try await servableSession(id)  // locked or ended meanwhile: say so
            return
        }
    }

    /// Unlocks with the passphrase or key file: the keys come back (one key derivation) and
    /// every locked session resumes with a fresh idle deadline, unless its absolute lifetime passed.
    /// A wrong credential throws and changes nothing.
    public func unlock(with credential: VaultCredential) async throws {
        try await Self.offPool { [vault] in try SessionError.wrapping { try vault.unlock(with: credential) } }
        lockReason = nil
        let now = now()
        for account in try await accounts() {
            let resumedEvent = SessionEvent.stateChanged(account.id, .active)
            let recorded = recording { (outcome: (session: SessionRecord, result: Bool)?) in
                guard let outcome, outcome.result else { return [] }
                return [(resumedEvent, outcome.session)]
            }
            let resumed = try? await transition(account.id, "unlocking a session", recording: recorded) { session, policy -> Bool in
                guard session.state == .locked else { return false }
                session.state = .active
                session.endReason = nil
                session.backgroundEnteredAt = nil
                session.extensionInFlight = nil
                session.lastActivityAt = now
                session.idleDeadline = SessionJudge.idleDeadline(after: now, session: session, policy: policy)
                return true
            }
            guard let resumed, resumed.result else { continue }
            announce([resumedEvent])
            _ = try? await servableSession(account.id)
        }
        logger.info("unlocked")
        try await settle()
    }

    /// Ends the account's session now without removing the account: first revokes its refresh
    /// token at the identity service (RFC 7009) when `revoke` is true and it offers revocation,
    /// exactly as ``signOut(_:revoke:)`` does, then wipes the tokens and ends the session
    /// locally. The local end happens whatever the server answered; the result says whether the
    /// grant ended at the server too, never leaving that to a log line.
    ///
    /// ```swift
    /// if case .failed(let why) = try await session.endSession() { print("the server may still accept the grant: \(why)") }
    /// ```
    @discardableResult
    public func endSession(for account: AccountID? = nil, revoke: Bool = true) async throws -> SignOutReport.Revocation {
        let id = try await resolve(account)
        // A refresh of this process still in flight would store a rotation after the
        // revocation, to be wiped unrevoked: it is cancelled first, as signOut does. (One in
        // another process is followed by revokeAtServer's generation check.)
        broker.cancelRefresh(of: id)
        let revocation = revoke ? await revokeAtServer(id) : .notAttempted("not requested")
        try await applyExpiry(id, reason: .endedByUser, timedOut: false)
        return revocation
    }
}

// MARK: - Timers

extension SessionService {
    /// (Re)starts the timer for the active account's next deadline.
    /// The timer holds the service weakly between deadlines, so a service that is released
    /// without ``stop()`` is not kept alive until its next deadline (up to the absolute lifetime).
    func scheduleTimer() {
        timeouts.arm(on: clock) { [weak self] in await self?.delayUntilNextDeadline() }
    }

    private func delayUntilNextDeadline() async -> Duration? {
        guard let next = await nextDeadline() else { return nil }
        let delay = next.timeIntervalSince(now())
        return .milliseconds(max(Int64((delay * 1000).rounded(.up)), 1))
    }

    /// Judges the active account now (raising warnings, locking, expiring) and returns when to look again.
    private func nextDeadline() async -> Date? {
        guard let id = try? await activeAccount(), let (current, policy) = try? await sessionAndPolicy(id),
            let session = current
        else { return nil }
        switch SessionJudge.judge(session, policy: policy, now: now()) {
        case .active(let warning, let nextCheck):
            if let warning { announce(warning) }
            return nextCheck
        case .lock, .expire:
            _ = try? await servableSession(id)
            return nil
        case .over:
            return nil
        }
    }
}
