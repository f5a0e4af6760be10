import Foundation
import Testing
import VaultProcess
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// The refresh lease and the shared back-off (issue 12, part 2): taken over only from a holder
/// that is gone or whose lease lapsed; never blocking for longer than it can last.
@Suite("Refresh lease: holder process, renewal and stale times")
struct RefreshLeaseTests {
    /// A vault with one account holding tokens, and a second handle on it whose clock reads `offset` later.
    struct Scene {
        let test: TestVault
        let vault: Vault
        let account: AccountID
        let generation: Int64

        init() throws {
            test = try TestVault()
            vault = try test.create()
            account = try vault.accounts.insert(Samples.account()).id
            generation = try vault.tokens.store(Samples.tokens("lease"), for: account, replacing: nil)
        }

        func handle(shiftedBy offset: TimeInterval) throws -> Vault {
            try test.open(clock: WallClock { Date().addingTimeInterval(offset) })
        }
    }

    @Test("a lease records its holder's process, and another holder waits while that process runs")
    func liveHolderIsWaitedFor() throws {
        let scene = try Scene()
        defer { scene.vault.close() }
        guard
            case .acquired = try scene.vault.leases.begin(
                for: scene.account, holder: "first", seenGeneration: scene.generation,
                leaseDuration: .seconds(60))
        else {
            Issue.record("the first holder did not get the lease")
            return
        }
        let stored = try RawDatabase.blob(scene.test.url, "SELECT CAST(lease_process AS BLOB) FROM refresh_state").map { String(decoding: $0, as: UTF8.self) }
        #expect(stored == LeaseProcess.current?.description)
        guard
            case .busy = try scene.vault.leases.begin(
                for: scene.account, holder: "second", seenGeneration: scene.generation,
                leaseDuration: .seconds(60))
        else {
            Issue.record("a second holder took a live holder's lease")
            return
        }
    }

    @Test("renewing extends the holder's lease; anyone else's renewal changes nothing")
    func renewal() throws {
        let scene = try Scene()
        defer { scene.vault.close() }
        _ = try scene.vault.leases.begin(for: scene.account, holder: "first", seenGeneration: scene.generation, leaseDuration: .seconds(1))
        let before = try #require(try scene.vault.leases.state(for: scene.account).leaseExpiresAt)
        let later = try scene.handle(shiftedBy: 30)
        defer { later.close() }
        #expect(try later.leases.renew(for: scene.account, holder: "first", leaseDuration: .seconds(60)))
        let after = try #require(try scene.vault.leases.state(for: scene.account).leaseExpiresAt)
        #expect(after.timeIntervalSince(before) > 80)
        #expect(try !later.leases.renew(for: scene.account, holder: "someone else", leaseDuration: .seconds(600)))
        #expect(try scene.vault.leases.state(for: scene.account).leaseExpiresAt == after)
        // 31 s later by the second handle's clock, the renewed lease still holds.
        guard
            case .busy = try later.leases.begin(
                for: scene.account, holder: "second", seenGeneration: scene.generation,
                leaseDuration: .seconds(60))
        else {
            Issue.record("a renewed lease was taken over")
            return
        }
    }

    @Test("a lease or back-off reaching further ahead than it ever can is stale and ignored")
    func farFutureIsStale() throws {
        let scene = try Scene()
        defer { scene.vault.close() }
        // A writer whose clock read the year 2100 (or a file restored from one) left both behind.
        let future = try scene.handle(shiftedBy: 75 * 365 * 86_400)
        _ = try future.leases.begin(for: scene.account, holder: "future", seenGeneration: scene.generation, leaseDuration: .seconds(60))
        guard
            case .acquired(_, let interrupted) = try scene.vault.leases.begin(
                for: scene.account, holder: "now", seenGeneration: scene.generation, leaseDuration: .seconds(60))
        else {
            Issue.record("a lease expiring in 2100 blocked refreshing")
            return
        }
        #expect(interrupted, "taking over a stale lease counts as an interrupted refresh")
        try scene.vault.leases.fail(for: scene.account, holder: "now", failure: "server error (HTTP 503)", nextAttemptAt: nil)

        _ = try future.leases.begin(for: scene.account, holder: "future", seenGeneration: scene.generation, leaseDuration: .seconds(60))
        try future.leases.fail(
            for: scene.account, holder: "future", failure: "server error (HTTP 503)",
            nextAttemptAt: Date().addingTimeInterval(75 * 365 * 86_400 + 30))
        future.close()
        guard
            case .acquired = try scene.vault.leases.begin(
                for: scene.account, holder: "now", seenGeneration: scene.generation,
                leaseDuration: .seconds(60), maximumBackoff: .seconds(300))
        else {
            Issue.record("a back-off until 2100 blocked refreshing")
            return
        }
        try scene.vault.leases.fail(
            for: scene.account, holder: "now", failure: "server error (HTTP 503)",
            nextAttemptAt: Date().addingTimeInterval(120))
        // Within its maximum, a back-off holds.
        guard
            case .backingOff = try scene.vault.leases.begin(
                for: scene.account, holder: "now", seenGeneration: scene.generation,
                leaseDuration: .seconds(60), maximumBackoff: .seconds(300))
        else {
            Issue.record("a back-off within its maximum was ignored")
            return
        }
    }

    @Test("a holder is gone when its pid is free or now names a process started at another time, never when it runs")
    func holderProcess() async throws {
        let me = try #require(LeaseProcess.current)
        #expect(!me.isGone)
        #expect(LeaseProcess(me.description) == me)
        var reused = me
        reused.startTime += 1
        #expect(reused.isGone, "our pid with another start time: the holder died and the pid was reused")
        var elsewhere = me
        elsewhere.bootID = "another-boot"
        elsewhere.startTime += 1
        #expect(!elsewhere.isGone, "a holder from another boot or machine cannot be judged: only the lease's expiry decides")

        let child = try Spawn.start(
            URL(fileURLWithPath: "/bin/true"), [], environment: nil, input: STDIN_FILENO, output: STDOUT_FILENO, error: STDERR_FILENO)
        let start = LeaseProcess.startTime(of: child)
        _ = await Spawn.wait(child)
        let dead = LeaseProcess(bootID: me.bootID, pid: child, startTime: start ?? 0)
        #expect(dead.isGone, "a process that exited")
        #expect(LeaseProcess("not a process") == nil)
    }
}
