import Foundation
import GRDB
import Testing
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// How a vault connection waits for a lock another connection holds (another process's
/// write, usually): short waits first, so a write that meets another's commit goes on within a
/// fraction of a millisecond of it, and never past ``VaultOptions/busyTimeout``.
@Suite struct BusyWaitTests {
    @Test("the waits start at 50 µs, double up to 2 ms and stay there")
    func schedule() {
        let delays = (0..<12).map { VaultConnection.busyDelay(afterTries: $0) }
        #expect(delays == [50, 100, 200, 400, 800, 1600, 2000, 2000, 2000, 2000, 2000, 2000])
        // Within a millisecond and a half of a commit that ended meanwhile, four tries in (SQLite's
        // own handler has waited 18 ms by then).
        #expect(VaultConnection.busyWaited(beforeTry: 4) == 750)
        for tries in 0..<20 {
            #expect(VaultConnection.busyWaited(beforeTry: tries + 1) == VaultConnection.busyWaited(beforeTry: tries) + delays[min(tries, 11)])
        }
    }

    @Test("the handler gives up when the next wait would pass the timeout; a zero timeout never waits")
    func givesUpAtTheTimeout() {
        #expect(VaultConnection.busyWait(upTo: .zero)(0) == false)
        // 10 ms: 50 + 100 + 200 + 400 + 800 + 1600 + 2000 + 2000 = 7150 µs; one more 2 ms wait
        // would reach 9150, a second 11150: the ninth wait is refused.
        let handler = VaultConnection.busyWait(upTo: .milliseconds(10))
        #expect(VaultConnection.busyWaited(beforeTry: 9) == 9150)
        #expect(handler(9) == false, "9150 + 2000 µs is past 10 ms")
        #expect(handler(100) == false)
        // A timeout too long to count in microseconds is a long wait, not a crash.
        #expect(VaultConnection.busyWait(upTo: .seconds(Int64.max))(0) == true)
    }

    @Test("a write blocked by another connection's write fails after the busy timeout as busy, nothing stored; it goes through once the lock is let go")
    func blockedWriteFails() throws {
        let test = try TestVault()
        let vault = try test.create()
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: SessionPolicy()).account.id
        let generation = try #require(try vault.tokens.current(for: alice)).generation
        vault.close()
        var options = test.options()
        options.busyTimeout = .milliseconds(30)
        let blocked = try Vault.open(at: test.url, credential: test.credential, options: options)
        defer { blocked.close() }

        let holder = try RawDatabase.queue(test.url)
        defer { try? holder.close() }
        try holder.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN IMMEDIATE")
            defer { try? db.execute(sql: "ROLLBACK") }
            do {
                _ = try blocked.tokens.store(Samples.tokens("alice2"), for: alice, replacing: generation)
                Issue.record("the write went through another connection's write lock")
            } catch let error as VaultError {
                #expect(error.code == .busy, "\(error)")
                #expect(error.message.contains("another process held its lock too long"), "\(error.message)")
            }
        }
        #expect(try blocked.tokens.current(for: alice)?.generation == generation)
        #expect(try blocked.tokens.store(Samples.tokens("alice2"), for: alice, replacing: generation) == generation + 1)
    }

    @Test("a checkpoint told to wait less keeps the connection's busy handler: a blocked write still waits its timeout")
    func checkpointKeepsTheHandler() throws {
        let test = try TestVault()
        let vault = try test.create()
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: SessionPolicy()).account.id
        vault.close()
        var options = test.options()
        options.busyTimeout = .milliseconds(200)
        let opened = try Vault.open(at: test.url, credential: test.credential, options: options)
        defer { opened.close() }
        #expect(try opened.maintenance.attemptCheckpoint(waitingAtMost: .zero) == .completed)
        let generation = try #require(try opened.tokens.current(for: alice)).generation

        let holder = try RawDatabase.queue(test.url)
        defer { try? holder.close() }
        try holder.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN IMMEDIATE")
            defer { try? db.execute(sql: "ROLLBACK") }
            let start = ContinuousClock.now
            #expect(throws: VaultError.self) { try opened.tokens.store(Samples.tokens("alice2"), for: alice, replacing: generation) }
            let waited = ContinuousClock.now - start
            // The handler's waits add up to 199.15 ms before it gives up; with none left, SQLite
            // answers busy at once.
            #expect(waited >= .milliseconds(150), "the write gave up after \(waited): the connection lost its busy handler")
        }
    }
}
