import Foundation
import GRDB
import Testing
import VaultStore
import VaultTestSupport

/// A change and the events that describe it are written in one transaction: both or neither.
@Suite struct EventRecordingTests {
    private let journal = EventJournal(origin: "test", retention: EventRetention())

    private func lockRecording(_ account: AccountID) -> EventRecording<(session: SessionRecord, result: Bool)?> {
        EventRecording(journal) { outcome in
            guard let outcome, outcome.result else { return [] }
            return [EventRecord(kind: "state_changed", account: account, data: ["state": "locked", "session": String(outcome.session.id)])]
        }
    }

    private func lock(_ vault: Vault, _ account: AccountID) throws -> (session: SessionRecord, result: Bool)? {
        try vault.sessions.transition(for: account, "locking", recording: lockRecording(account)) { session, _ -> Bool in
            session.state = .locked
            return true
        }
    }

    @Test("the event of a transition is in the log as soon as the transition committed")
    func eventCommitsWithTheTransition() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let record = try vault.accounts.signIn(Samples.account(), tokens: Samples.tokens("events"), policy: SessionPolicy())
        let before = try vault.events.lastSeq()
        let locked = try #require(try lock(vault, record.account.id))
        let events = try vault.events.list(after: before)
        #expect(events.map(\.kind) == ["state_changed"])
        #expect(events.first?.data["session"] == String(locked.session.id))
        #expect(events.first?.origin == "test" && events.first?.authentic == true)
    }

    @Test("an event that cannot be written takes its transition back with it")
    func failedEventRollsTheTransitionBack() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let record = try vault.accounts.signIn(Samples.account(), tokens: Samples.tokens("events"), policy: SessionPolicy())
        try RawDatabase.execute(test.url, "CREATE TRIGGER refuse_events BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'no events'); END")
        #expect(throws: (any Error).self) { try lock(vault, record.account.id) }
        #expect(try vault.sessions.current(for: record.account.id)?.state == .active, "the lock was rolled back with its event")

        try RawDatabase.execute(test.url, "DROP TRIGGER refuse_events")
        #expect(try lock(vault, record.account.id)?.result == true)
        #expect(try vault.sessions.current(for: record.account.id)?.state == .locked)
    }
}
