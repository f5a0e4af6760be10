import Foundation
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
    func snapshot() throws -> Snapshot {
        var snapshot = Snapshot(active: try activeAccount())
        for account in try vaultCall({ try vault.accountIDs() }) {
            do {
                if let session = try vault.currentSession(for: account) {
                    snapshot.states[account] = Self.status(of: session)
                }
            } catch let error as VaultError where error.code == .damaged {
                snapshot.states[account] = observed.states[account]
            } catch let error as VaultError {
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

    /// Records the state this process just produced (so the watch does not announce it
    /// again) and re-plans the timer.
    func settle() throws {
        observed = try snapshot()
        scheduleTimer()
    }

    /// Checks SQLite's `data_version` every ``SessionConfiguration/observationInterval``:
    /// one cheap pragma, and a reload only when another connection committed.
    func startWatching() {
        watcher?.cancel()
        let (clock, vault, interval) = (self.clock, self.vault, configuration.observationInterval)
        // Holds the service weakly between checks, like the timer.
        watcher = Task { [weak self] in
            var version = try? vault.dataVersion()
            while !Task.isCancelled {
                do { try await clock.sleep(for: interval) } catch { return }
                let current = try? vault.dataVersion()
                guard current != version else { continue }
                version = current
                guard let self else { return }
                await self.reconcile()
            }
        }
    }

    /// Announces what other processes changed since the last snapshot.
    func reconcile() {
        guard let fresh = try? snapshot() else { return }
        let old = observed
        observed = fresh
        if fresh.active != old.active {
            hub.emit(.accountSwitched(from: old.active, to: fresh.active))
        }
        for (account, status) in fresh.states where old.states[account] != status {
            hub.emit(.stateChanged(account, status))
        }
        for account in old.states.keys where fresh.states[account] == nil {
            hub.emit(.stateChanged(account, .signedOut))
        }
        if fresh != old { scheduleTimer() }
    }
}
