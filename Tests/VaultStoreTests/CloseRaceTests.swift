import Dispatch
import Foundation
import Testing
@_spi(RawWrites) import VaultStore
import VaultSync
import VaultTestSupport

/// `close()` on one thread while reads and writes run on others (a command closing its vault
/// while its session service's timers still read): each call either completes or throws
/// `.closed`, and the process never touches a closed SQLite connection. Before `CloseGate`
/// a read that had passed the closed check was handed a closed reader and crashed the process
/// (`sqlite3_get_autocommit(NULL)`, seen under AddressSanitizer in a `vault accounts add` child).
@Suite struct CloseRaceTests {
    @Test("closing while 4 threads read and write: every call completes or says closed, nothing crashes")
    func closeDuringReadsAndWrites() async throws {
        for round in 0..<20 {
            let test = try TestVault(.keyFile)  // its directory lives as long as `test`
            let vault = try test.create(clock: Times.fixedClock)
            let account = try vault.accounts.insert(Samples.account("alice-\(round)")).id
            let outcomes = Locked((completed: 0, closed: 0, other: [String]()))
            let started = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            for worker in 0..<4 {
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    started.signal()
                    for step in 0..<200 {
                        do {
                            if worker == 0, step % 4 == 0 {
                                try vault.tokens.store(Samples.fixedTokens("t-\(round)-\(step)"), for: account, replacing: nil)
                            } else {
                                _ = try vault.accounts.all()
                            }
                            outcomes.withLock { $0.completed += 1 }
                        } catch let error as VaultError where error.code == .closed {
                            outcomes.withLock { $0.closed += 1 }
                            return
                        } catch {
                            // A token store that lost its compare-and-swap to another is not this test's concern.
                            if "\(error)".contains("generation") { continue }
                            outcomes.withLock { $0.other.append("\(error)") }
                            return
                        }
                    }
                }
            }
            // The closer is a thread too: it waits for the workers to be running, then closes.
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                for _ in 0..<4 { started.wait() }
                vault.close()
            }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                group.notify(queue: .global()) { done.resume() }
            }
            let seen = outcomes.withLock { $0 }
            #expect(seen.other.isEmpty, "round \(round): \(seen.other.prefix(3))")
            #expect(vault.isClosed)
            withExtendedLifetime(test) {}
        }
    }
}
