import Foundation
import Logging
import VaultStore

// MARK: - Seeing other processes

extension SessionService {
    /// What this process last knew of the vault: the active account and each session's state.
    struct Snapshot: Equatable {
        var active: AccountID?
        var states: [AccountID: SessionStatus] = [:]
    }

    /// Built from plain metadata only (sessions and the active account), so it also works
    /// while the vault is locked and its sealed fields (labels, e-mail) cannot be opened.
    ///
    /// Each account's current session is read on its own: one whose row fails its check
    /// (edited without the key) keeps the state last seen, and reports `damaged` where that
    /// account is used; it never stops the others.
    func snapshot() async throws -> Snapshot {
        let vault = self.vault
        let (active, sessions) = try await vaultCall { () -> (AccountID?, [(AccountID, Result<SessionRecord?, VaultError>)]) in
            (
                try vault.accounts.activeID(),
                try vault.accounts.ids().map { id in
                    do { return (id, .success(try vault.sessions.current(for: id))) } catch let error as VaultError { return (id, .failure(error)) }
                }
            )
        }
        var snapshot = Snapshot(active: active)
        for (account, read) in sessions {
            do {
                if let session = try read.get() {
                    snapshot.states[account] = Self.status(of: session)
                }
            } catch  where error.code == .damaged {
                snapshot.states[account] = observed.states[account]
            } catch {
                throw SessionError(error)
            }
        }
        return snapshot
    }

    static func status(of session: SessionRecord?) -> SessionStatus {
        guard let session else { return .signedOut }
        let reason = SessionEndReason(rawValue: session.endReason ?? "")
        switch session.state {
        case .active: return .active
        case .locked: return .locked(reason)
        case .expired: return .expired(reason)
        case .signedOut: return .signedOut
        }
    }

    /// Records the state this process just produced and re-plans the timer.
    /// Waits until the events published so far are in the vault's log, so another process that
    /// sees this change also finds its events.
    func settle() async throws {
        await flushEvents()
        observed = try await snapshot()
        scheduleTimer()
    }

    /// Sends `event` to this process's subscribers now, and queues it for the vault's event
    /// log, where every other process's session service sees it. The log is written in order by
    /// one task, off the path of the caller (a refresh's waiters do not wait for it); ``stop()``
    /// waits until everything queued is written.
    ///
    /// Only for events that describe no change to the vault: an idle warning, an extension
    /// refused. Every event that describes a change (sign-in, sign-out, switch, lock, expiry,
    /// resume, extension granted, refresh and its failures, transfers, guest upgrades) is
    /// written in that change's transaction instead (``recording(_:)``, then ``announce(_:)``).
    ///
    /// `session`: the session as the transition behind the event left it; its id and version go
    /// into the log entry, so a reader can order transitions made by different processes.
    func publish(_ event: SessionEvent, session: SessionRecord? = nil) {
        hub.emit(event)
        startEventWriter()
        logQueue.continuation.yield(.entry(Self.logEntry(event, session: session)))
    }

    /// What `event` becomes in the log; `session`'s id and version go with it.
    nonisolated static func logEntry(_ event: SessionEvent, session: SessionRecord?) -> LoggedEvent {
        var entry = event.logged
        if let session {
            entry.data["session"] = String(session.id)
            entry.data["session_version"] = String(session.version)
        }
        return entry
    }

    /// The events that describe a change, to write in its transaction (see ``EventRecording``):
    /// `events` makes them of the change's outcome, each with the session it left, if any.
    /// The caller tells this process's subscribers with ``announce(_:)`` once the change is
    /// done; the log has them from the commit on.
    func recording<Outcome>(
        _ events: @escaping @Sendable (Outcome) -> [(event: SessionEvent, session: SessionRecord?)]
    ) -> EventRecording<Outcome> {
        EventRecording(EventJournal(origin: holderID, retention: configuration.eventRetention)) { outcome in
            events(outcome).map { event, session in
                let entry = Self.logEntry(event, session: session)
                return EventRecord(kind: entry.kind, account: entry.account, data: entry.data, detail: entry.detail)
            }
        }
    }

    /// Tells this process's subscribers about events already written to the log with their change.
    func announce(_ events: [SessionEvent]) {
        for event in events { hub.emit(event) }
    }

    /// ``announce(_:)`` when `recorded` (the change wrote the event), else ``publish(_:session:)``.
    func tell(_ event: SessionEvent, recorded: Bool, session: SessionRecord?) {
        if recorded { announce([event]) } else { publish(event, session: session) }
    }

    /// Returns once every event published before the call is written to the log (or could not be).
    func flushEvents() async {
        guard eventWriter != nil else { return }
        await withCheckedContinuation { done in
            if case .terminated = logQueue.continuation.yield(.flush(done)) { done.resume() }
        }
    }

    /// Starts the task that writes queued events to the log, oldest first.
    func startEventWriter() {
        guard eventWriter == nil else { return }
        let (vault, origin, retention, logger) = (self.vault, holderID, configuration.eventRetention, self.logger)
        let entries = logQueue.stream
        eventWriter = Task {
            for await item in entries {
                guard case .entry(let entry) = item else {
                    if case .flush(let done) = item { done.resume() }
                    continue
                }
                do {
                    _ = try await Self.offPool {
                        try vault.events.append(
                            kind: entry.kind, account: entry.account, data: entry.data, detail: entry.detail,
                            origin: origin, retention: retention)
                    }
                } catch {
                    logger.warning(
                        "could not record a session event in the vault's log",
                        metadata: ["event": "\(entry.kind)", "error": "\(error)"])
                }
            }
        }
    }

    /// Checks SQLite's `data_version` every ``SessionConfiguration/observationInterval``:
    /// one cheap pragma, and a look at the event log only when another connection committed.
    func startWatching() {
        watcher?.cancel()
        let (clock, vault, interval) = (self.clock, self.vault, configuration.observationInterval)
        // Holds the service weakly between checks, like the timer.
        watcher = Task { [weak self] in
            var version = try? await Self.offPool { try vault.dataVersion() }
            while !Task.isCancelled {
                do { try await clock.sleep(for: interval) } catch { return }
                let current = try? await Self.offPool { try vault.dataVersion() }
                guard current != version else { continue }
                version = current
                guard let self else { return }
                await self.reconcile()
            }
        }
    }

    /// Delivers what other processes recorded in the event log since the last look, in order,
    /// and re-plans the timer for what they changed. An entry that fails its check (written
    /// without the key) is never delivered.
    func reconcile() async {
        let after = lastEventSeq
        let origin = holderID
        guard let entries = try? await Self.offPool({ try self.vault.events.list(after: after, limit: 1000) }) else { return }
        for entry in entries {
            lastEventSeq = max(lastEventSeq, entry.seq)
            guard entry.origin != origin else { continue }
            guard entry.authentic else {
                logger.warning("skipped an event log entry that fails its check", metadata: ["seq": "\(entry.seq)"])
                continue
            }
            guard let event = SessionEvent(entry) else { continue }
            await deliver(event)
        }
        if entries.count == 1000 { await reconcile() }
        guard let fresh = try? await snapshot() else { return }
        if fresh != observed {
            observed = fresh
            broker.cache = nil
            scheduleTimer()
        }
    }

    /// Hands another process's event to this process's subscribers. An idle warning is raised
    /// only if it still holds: the session, as the vault holds it now, is active with the idle
    /// deadline the warning was judged on (another process may have extended it, or recorded
    /// activity, which no event announces, after the warning was judged), and this process has
    /// not raised one for that deadline already.
    private func deliver(_ event: SessionEvent) async {
        switch event {
        case .idleWarning(let warning):
            guard await stillHolds(warning), timeouts.firstWarning(for: warning.account, deadline: warning.deadline) else { return }
        default:
            break
        }
        hub.emit(event)
    }

    /// Whether the account's session is still the active one `warning` was judged on, with the
    /// same idle deadline. A row that cannot be read or fails its check holds nothing.
    private func stillHolds(_ warning: IdleWarning) async -> Bool {
        guard let session = try? await vaultCall({ [vault] in try vault.sessions.current(for: warning.account) }) else {
            return false
        }
        guard session.state == .active, session.idleDeadline?.millisecondsSince1970 == warning.deadline.millisecondsSince1970 else { return false }
        if let stamp = warning.session, stamp.session != session.id { return false }
        return true
    }
}

/// The queue between ``SessionService/publish(_:)`` and the task writing the event log: the
/// entries to write, and the flushes waiting for the entries before them.
struct EventLogQueue: Sendable {
    enum Item: Sendable {
        case entry(LoggedEvent)
        case flush(CheckedContinuation<Void, Never>)
    }

    let stream: AsyncStream<Item>
    let continuation: AsyncStream<Item>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Item.self, bufferingPolicy: .unbounded)
    }
}
