import GRDB

// MARK: - Writes that record their events

extension VaultArea {
    /// Runs `body` in a write transaction and, in the same transaction, appends the events
    /// `recording` makes of its outcome.
    func write<T>(_ action: String, recording: EventRecording<T>?, _ body: (Database) throws -> T) throws -> T {
        try write(action) { db in
            let outcome = try body(db)
            if let recording { try core.events.append(recording.events(outcome), to: recording.journal, db) }
            return outcome
        }
    }
}
