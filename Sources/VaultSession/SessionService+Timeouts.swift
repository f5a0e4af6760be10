import Foundation
import Logging
import VaultStore

// MARK: - Judging sessions

extension SessionService {
    /// The account's session if tokens may be served now; otherwise applies whatever deadline
    /// passed (lock or expire, persisted and announced) and throws why not.
    func servableSession(_ id: AccountID) async throws -> SessionRecord {
        try await servableSession(id, current: try vaultCall { try vault.currentSession(for: id) },
                                  policy: try vaultCall { try vault.sessionPolicy(for: id) })
    }

    /// The same, judging a session and policy the caller read.
    func servableSession(_ id: AccountID, current: SessionRecord?, policy: SessionPolicy) async throws -> SessionRecord {
        guard let session = current else { throw SessionError.notSignedIn(id) }
        switch SessionJudge.judge(session, policy: policy, now: now()) {
        case .active(let warning, _):
            if let lockReason, vault.isLocked { throw SessionError.locked(id, lockReason) }
            if let warning { announce(warning, for: id) }
            return session
        case .lock(let reason):
            try await applyLock(session, reason: reason, timedOut: true)
            throw SessionError.locked(id, reason)
        case .expire(let reason):
            try applyExpiry(session, reason: reason, timedOut: true)
            throw SessionError.expired(id, reason)
        case .over(let state, let reason):
            throw try endedError(id, state: state, reason: reason)
        }
    }

    /// Applies an expiry that is due (never a lock) to the account's session.
    func expireIfDue(_ id: AccountID) throws {
        guard let session = try vaultCall({ try vault.currentSession(for: id) }) else { return }
        let policy = try vaultCall { try vault.sessionPolicy(for: id) }
        if case .expire(let reason) = SessionJudge.judge(session, policy: policy, now: now()) {
            try applyExpiry(session, reason: reason, timedOut: true)
        }
    }

    /// The error for a session that is already over.
    func endedError(_ id: AccountID, state: SessionState, reason: SessionEndReason?) throws -> SessionError {
        switch state {
        case .active: return SessionError.notSignedIn(id)
        case .locked: return .locked(id, reason ?? .lockedByUser)
        case .signedOut: return .notSignedIn(id)
        case .expired where reason == .revoked:
            let state = try vaultCall { try vault.refreshState(for: id) }
            return .revoked(id, description: state.lastFailureDetail ?? state.lastFailure)
        case .expired: return .expired(id, reason ?? .absoluteTimeout)
        }
    }

    /// Locks: marks the session locked in the vault, waits for in-flight refreshes so no
    /// rotated token is lost, then drops the vault's keys from memory.
    func applyLock(_ session: SessionRecord, reason: SessionEndReason, timedOut: Bool) async throws {
        var locked = session
        locked.state = .locked
        locked.endReason = reason.rawValue
        try vaultCall { try vault.updateSession(locked) }
        for task in refreshes.values { _ = try? await task.value }
        lockReason = reason
        tokenCache = nil
        vault.lock()
        warned[session.account] = nil
        logger.info("session locked", metadata: ["account": "\(session.account)", "reason": "\(reason)"])
        if timedOut { hub.emit(.hardTimeout(session.account, reason)) }
        hub.emit(.stateChanged(session.account, .locked(reason)))
        try settle()
    }

    /// Expires: wipes the account's tokens and ends its session with `reason`, in one transaction.
    func applyExpiry(_ session: SessionRecord, reason: SessionEndReason, timedOut: Bool) throws {
        try vaultCall { try vault.endGrant(for: session.account, reason: reason.rawValue) }
        warned[session.account] = nil
        logger.info("session expired", metadata: ["account": "\(session.account)", "reason": "\(reason)"])
        if timedOut { hub.emit(.hardTimeout(session.account, reason)) }
        hub.emit(.stateChanged(session.account, .expired(reason)))
        try settle()
    }

    /// Raises the idle warning once per idle deadline.
    func announce(_ warning: SessionJudge.Warning, for id: AccountID) {
        guard warned[id] != warning.deadline else { return }
        warned[id] = warning.deadline
        hub.emit(.idleWarning(id, secondsLeft: warning.secondsLeft, deadline: warning.deadline, canExtend: warning.canExtend))
    }

    func resolve(_ account: AccountID?) throws -> AccountID {
        guard let id = try account ?? activeAccount() else { throw SessionError.noActiveAccount }
        return id
    }
}

// MARK: - Activity, extension, background

extension SessionService {
    /// Records user activity: the idle deadline moves to now + the idle timeout (never past
    /// the absolute deadline). Written to the vault at most once per
    /// ``SessionConfiguration/activityWriteInterval``.
    public func recordActivity(for account: AccountID? = nil) async throws {
        let id = try resolve(account)
        var session = try await servableSession(id)
        let now = now()
        if let last = lastActivityWrite[id], now.timeIntervalSince(last) < configuration.activityWriteInterval.timeInterval {
            return
        }
        let policy = try vaultCall { try vault.sessionPolicy(for: id) }
        session.lastActivityAt = now
        session.idleDeadline = SessionJudge.idleDeadline(after: now, session: session, policy: policy)
        try vaultCall { try vault.updateSession(session) }
        lastActivityWrite[id] = now
        warned[id] = nil
        scheduleTimer()
    }

    /// Asks for more time after an idle warning. At most ``SessionPolicy/maxExtensions`` per
    /// session, never past the absolute lifetime; while one request is in flight, another is
    /// ignored. The answer is also sent as ``SessionEvent/extensionResult(_:_:)``.
    @discardableResult
    public func extendSession(for account: AccountID? = nil) async throws -> ExtensionResult {
        let id = try resolve(account)
        guard !extensionsInFlight.contains(id) else { return .ignored }
        extensionsInFlight.insert(id)
        defer { extensionsInFlight.remove(id) }
        let result = try await extensionOutcome(id)
        hub.emit(.extensionResult(id, result))
        return result
    }

    private func extensionOutcome(_ id: AccountID) async throws -> ExtensionResult {
        let policy = try vaultCall { try vault.sessionPolicy(for: id) }
        func refusal(_ session: SessionRecord) -> ExtensionRefusal? {
            if policy.idleTimeout == nil { return .noIdleTimeout }
            if session.extensionsUsed >= policy.maxExtensions { return .limitReached }
            if let idle = session.idleDeadline, let absolute = session.absoluteDeadline, idle >= absolute { return .absoluteLifetimeReached }
            return nil
        }
        guard let session = try? await servableSession(id) else { return .refused(.sessionOver) }
        if let reason = refusal(session) { return .refused(reason) }
        if let extensionHandler {
            guard await extensionHandler(id) else { return .refused(.serverRefused) }
        }
        // The session may have moved on while the server was asked.
        guard var current = try? await servableSession(id), current.id == session.id else { return .refused(.sessionOver) }
        if let reason = refusal(current) { return .refused(reason) }
        let now = now()
        current.extensionsUsed += 1
        current.lastActivityAt = now
        current.idleDeadline = SessionJudge.idleDeadline(after: now, session: current, policy: policy)
        try vaultCall { try vault.updateSession(current) }
        warned[id] = nil
        scheduleTimer()
        logger.info("session extended", metadata: ["account": "\(id)", "extensions": "\(current.extensionsUsed)"])
        return .extended(idleDeadline: current.idleDeadline ?? now, remaining: policy.maxExtensions - current.extensionsUsed)
    }

    /// The tool went to the background (hidden, suspended, screen locked): the time is
    /// recorded in the vault and judged on return.
    public func enterBackground() async throws {
        let id = try resolve(nil)
        var session = try await servableSession(id)
        guard session.backgroundEnteredAt == nil else { return }
        session.backgroundEnteredAt = now()
        try vaultCall { try vault.updateSession(session) }
        try settle()
    }

    /// Back in the foreground: past the background timeout the session locks before any token
    /// is served; otherwise it carries on, and a pending warning's countdown counts the time away.
    public func enterForeground() async throws {
        let id = try resolve(nil)
        var session = try await servableSession(id)
        guard session.backgroundEnteredAt != nil else { return }
        session.backgroundEnteredAt = nil
        try vaultCall { try vault.updateSession(session) }
        warned[id] = nil
        _ = try await servableSession(id)
        scheduleTimer()
    }

    /// Locks the active account's session now and drops the vault's keys.
    public func lock() async throws {
        let id = try resolve(nil)
        let session = try await servableSession(id)
        try await applyLock(session, reason: .lockedByUser, timedOut: false)
    }

    /// Unlocks with the passphrase or key file: the keys come back (one key derivation) and
    /// every locked session resumes with a fresh idle deadline, unless its absolute lifetime passed.
    /// A wrong credential throws and changes nothing.
    public func unlock(with credential: VaultCredential) async throws {
        try vaultCall { try vault.unlock(with: credential) }
        lockReason = nil
        let now = now()
        for account in try accounts() {
            guard var session = try vaultCall({ try vault.currentSession(for: account.id) }), session.state == .locked else { continue }
            let policy = try vaultCall { try vault.sessionPolicy(for: account.id) }
            session.state = .active
            session.endReason = nil
            session.backgroundEnteredAt = nil
            session.lastActivityAt = now
            session.idleDeadline = SessionJudge.idleDeadline(after: now, session: session, policy: policy)
            try vaultCall { try vault.updateSession(session) }
            hub.emit(.stateChanged(account.id, .active))
            _ = try? await servableSession(account.id)
        }
        logger.info("unlocked")
        try settle()
    }

    /// Ends the account's session now (signed out locally, tokens wiped) without removing the account.
    public func endSession(for account: AccountID? = nil) async throws {
        let id = try resolve(account)
        guard let session = try vaultCall({ try vault.currentSession(for: id) }), session.state == .active || session.state == .locked else {
            return
        }
        try applyExpiry(session, reason: .endedByUser, timedOut: false)
    }
}

// MARK: - Timers

extension SessionService {
    /// (Re)starts the timer for the active account's next deadline.
    /// The timer holds the service weakly between deadlines, so a service that is released
    /// without ``stop()`` is not kept alive until its next deadline (up to the absolute lifetime).
    func scheduleTimer() {
        timer?.cancel()
        let clock = self.clock
        timer = Task { [weak self] in
            while !Task.isCancelled {
                guard let delay = await self?.delayUntilNextDeadline() else { return }
                do { try await clock.sleep(for: delay) } catch { return }
            }
        }
    }

    private func delayUntilNextDeadline() async -> Duration? {
        guard let next = await nextDeadline() else { return nil }
        let delay = next.timeIntervalSince(now())
        return .milliseconds(max(Int64((delay * 1000).rounded(.up)), 1))
    }

    /// Judges the active account now (raising warnings, locking, expiring) and returns when to look again.
    private func nextDeadline() async -> Date? {
        guard let id = try? activeAccount(),
              let session = try? vault.currentSession(for: id),
              let policy = try? vault.sessionPolicy(for: id) else { return nil }
        switch SessionJudge.judge(session, policy: policy, now: now()) {
        case .active(let warning, let nextCheck):
            if let warning { announce(warning, for: id) }
            return nextCheck
        case .lock, .expire:
            _ = try? await servableSession(id)
            return nil
        case .over:
            return nil
        }
    }
}
