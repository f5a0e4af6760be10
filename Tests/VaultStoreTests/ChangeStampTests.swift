import Foundation
import GRDB
import Testing
import VaultSync
import VaultTestSupport

@testable import VaultStore

/// ``Vault/changeStamp()`` is what a warm process checks before serving a cached token: it
/// must move with every commit and never wait for a writer.
@Suite struct ChangeStampTests {
    @Test("a stamp is read while this process's writer holds a transaction open")
    func stampDoesNotQueueBehindTheWriter() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let before = try vault.changeStamp()
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let writerDone = DispatchSemaphore(value: 0)
        let wrote = Locked(false)
        Thread.detachNewThread {
            // A write transaction (BEGIN IMMEDIATE) held open: the writer's lock and GRDB's queue.
            let held: Void? = try? vault.core.write("holding the writer") { _ in
                entered.signal()
                release.wait()
            }
            wrote.withLock { $0 = held != nil }
            entered.signal()  // also when the write could not start, so the test ends
            writerDone.signal()
        }
        entered.wait()
        let stamped = DispatchSemaphore(value: 0)
        let during = Locked<VaultChangeStamp?>(nil)
        Thread.detachNewThread {
            let stamp = try? vault.changeStamp()
            during.withLock { $0 = stamp }
            stamped.signal()
        }
        // Not a sleep: how long to wait before calling it stuck (it takes microseconds).
        let answered = stamped.wait(timeout: .now() + 10) == .success
        release.signal()
        writerDone.wait()
        if !answered { stamped.wait() }
        #expect(wrote.withLock { $0 }, "the writer's transaction ran")
        #expect(answered, "changeStamp() waited for the writer's transaction")
        #expect(during.withLock { $0 } != nil)
        #expect(try vault.changeStamp() != before, "the write moved the stamp")
    }

    @Test("another connection's commit moves the stamp; reads do not")
    func commitsMoveTheStamp() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let first = try vault.changeStamp()
        _ = try vault.accounts.activeID()
        #expect(try vault.changeStamp() == first)
        try RawDatabase.execute(test.url, "CREATE TABLE unrelated (n INTEGER)")
        #expect(try vault.changeStamp() != first)
    }
}
