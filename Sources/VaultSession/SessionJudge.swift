import Foundation
import VaultStore

/// Judges a stored session against its policy at a given time. Pure: the same inputs give
/// the same verdict in any process, which is what lets a tool that lives for a second apply
/// the same timeouts as a daemon with timers.
struct SessionJudge {
    enum Verdict: Equatable {
        /// Still active; `warning` is set inside the warning window; `nextCheck` is the next
        /// time the verdict can change (for timers).
        case active(warning: Warning?, nextCheck: Date?)
        case lock(SessionEndReason)
        case expire(SessionEndReason)
        /// Already locked, expired or signed out: nothing to decide.
        case over(SessionState, SessionEndReason?)
    }

    typealias Warning = IdleWarning

    static func judge(_ session: SessionRecord, policy: SessionPolicy, now: Date) -> Verdict {
        guard session.state == .active else {
            return .over(session.state, session.endReason.map(SessionEndReason.init(rawValue:)))
        }
        if let absolute = session.absoluteDeadline, now >= absolute {
            return .expire(.absoluteTimeout)
        }
        if let entered = session.backgroundEnteredAt, let limit = policy.backgroundTimeout,
            now >= entered.addingTimeInterval(limit.timeInterval)
        {
            return .lock(.backgroundTimeout)
        }
        if let idle = session.idleDeadline, now >= idle {
            return policy.idleAction == .lock ? .lock(.idleTimeout) : .expire(.idleTimeout)
        }
        var checks: [Date] = [session.absoluteDeadline, session.idleDeadline].compactMap { $0 }
        if let entered = session.backgroundEnteredAt, let limit = policy.backgroundTimeout {
            checks.append(entered.addingTimeInterval(limit.timeInterval))
        }
        var warning: Warning?
        if let idle = session.idleDeadline {
            let warnAt = idle.addingTimeInterval(-policy.warningBefore.timeInterval)
            if now >= warnAt {
                warning = Warning(
                    account: session.account, secondsLeft: Int(idle.timeIntervalSince(now).rounded(.up)), deadline: idle,
                    canExtend: canExtend(session, policy: policy), session: SessionStamp(session))
            } else {
                checks.append(warnAt)
            }
        }
        return .active(warning: warning, nextCheck: checks.min())
    }

    static func canExtend(_ session: SessionRecord, policy: SessionPolicy) -> Bool {
        guard session.state == .active, policy.idleTimeout != nil, session.extensionsUsed < policy.maxExtensions else {
            return false
        }
        if let idle = session.idleDeadline, let absolute = session.absoluteDeadline, idle >= absolute { return false }
        return !idleSinceExtension(session, policy: policy)
    }

    /// Whether the idle deadline is an extension's and nothing happened since: the codelab's
    /// "don't extend completely idle sessions". An extension moves the idle deadline but is not
    /// activity (the stored last activity stays), so a deadline later than last activity + the
    /// idle timeout was set by an extension that no activity followed. A second extension then
    /// would keep a session nobody uses alive.
    static func idleSinceExtension(_ session: SessionRecord, policy: SessionPolicy) -> Bool {
        guard session.extensionsUsed > 0, let idle = session.idleDeadline,
            let byActivity = idleDeadline(after: session.lastActivityAt, session: session, policy: policy)
        else { return false }
        // Whole milliseconds, as stored; a millisecond's rounding is not an extension.
        return idle.millisecondsSince1970 > byActivity.millisecondsSince1970 + 1
    }

    /// The idle deadline after activity or an extension at `now`: never past the absolute deadline.
    static func idleDeadline(after now: Date, session: SessionRecord, policy: SessionPolicy) -> Date? {
        guard let idle = policy.idleTimeout else { return nil }
        let deadline = now.addingTimeInterval(idle.timeInterval)
        if let absolute = session.absoluteDeadline { return min(deadline, absolute) }
        return deadline
    }
}

extension SessionRecord {
    /// The state the next use of the session will find at `now` under `policy`, and why: an
    /// active session whose idle, background or absolute deadline passed is locked or expired
    /// by the next command that opens the vault; what is stored until then still says active.
    ///
    /// ```swift
    /// let (state, reason) = session.stateAtNextUse(policy: policy, now: Date())
    /// ```
    public func stateAtNextUse(policy: SessionPolicy, now: Date) -> (state: SessionState, reason: SessionEndReason?) {
        switch SessionJudge.judge(self, policy: policy, now: now) {
        case .active: (.active, nil)
        case .lock(let reason): (.locked, reason)
        case .expire(let reason): (.expired, reason)
        case .over(let state, let reason): (state, reason)
        }
    }
}
