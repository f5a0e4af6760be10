import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// Case 1 of issue 7: a process killed with SIGKILL at random moments while it rotates tokens
/// never leaves a vault that fails to open, fails its integrity check, or holds anything but
/// the last refresh token it committed (or the one it was committing when it died).
@Suite("Crash: SIGKILL during token rotations", .timeLimit(.minutes(TestTimeScale.minutes(30))))
struct CrashRotationTests {
    /// What one child printed about one account.
    struct Seen {
        var committed: (generation: Int64, digest: String)
        var attempted: (generation: Int64, digest: String)?
    }

    @Test("killed at random moments during token rotations: opens, integrity ok, one refresh token, the last committed or the one in flight")
    func killedDuringRotations() async throws {
        let target = StressScale.current.count(test: 500, quick: 2_000, full: 10_000)
        let test = try TestVault(.keyFile)
        guard case .keyFile(let keyFile) = test.credential else { return }
        var expected: [AccountID: Seen] = [:]
        do {
            let vault = try test.create()
            for subject in ["alice", "bob"] {
                let account = try vault.accounts.insert(Samples.account(subject))
                let tokens = Samples.tokens(subject)
                let generation = try vault.tokens.store(tokens, for: account.id, replacing: nil)
                expected[account.id] = Seen(committed: (generation, digest(tokens.refreshToken)))
            }
            vault.close()
        }
        let accounts = expected.keys.map(\.rawValue).sorted()

        var commits = 0
        var kills = 0
        var passed = 0
        var lost = 0
        var leaked = 0
        var problems: [String] = []
        while commits < target {
            let child = try stressChild(vault: test.url, keyFile: keyFile, "rotate-loop", "\(target - commits)", accounts[0], accounts[1])
            // Half the kills land while the child is still starting or opening, half mid-rotation.
            if Bool.random() {
                _ = await child.waitForLine { $0.hasPrefix("committed") }
            }
            try await Task.sleep(for: randomDelay(0...40))
            await child.kill()
            let output = child.output.value
            if !output.killed, output.exitStatus != 0 {
                Issue.record("the rotating child failed by itself: \(output.lines.suffix(3)) \(output.standardError)")
                break
            }
            kills += 1
            var round = expected
            for line in output.lines {
                let parts = line.split(separator: " ").map(String.init)
                guard parts.count == 4, let generation = Int64(parts[2]) else { continue }
                let account = AccountID(rawValue: parts[1])
                if parts[0] == "storing" {
                    round[account]?.attempted = (generation, parts[3])
                } else if parts[0] == "committed" {
                    round[account]?.committed = (generation, parts[3])
                    round[account]?.attempted = nil
                    commits += 1
                }
            }

            // Reopen with the library after every kill and check everything.
            var ok = true
            do {
                let vault = try test.open()
                defer { vault.close() }
                let report = try vault.maintenance.verify()
                if !report.passed {
                    ok = false
                    problems.append("kill \(kills): integrity check failed: \(report.databaseProblems) \(report.damaged)")
                }
                for (account, seen) in round {
                    let rows = try vault.core.read("counting token rows") {
                        try Int.fetchOne(
                            $0, sql: "SELECT count(*) FROM tokens WHERE account_id = ? AND refresh_token IS NOT NULL",
                            arguments: [account.rawValue]) ?? 0
                    }
                    let stored = try vault.tokens.current(for: account)
                    let storedDigest = digest(stored?.tokens.refreshToken)
                    if rows != 1 {
                        ok = false
                        leaked += rows > 1 ? 1 : 0
                        lost += rows == 0 ? 1 : 0
                        problems.append("kill \(kills): \(account) has \(rows) refresh tokens")
                    } else if storedDigest == seen.committed.digest, stored?.generation == seen.committed.generation {
                        round[account]?.attempted = nil
                    } else if let attempted = seen.attempted, storedDigest == attempted.digest, stored?.generation == attempted.generation {
                        // Committed, then killed before it could say so.
                        round[account]?.committed = attempted
                        round[account]?.attempted = nil
                        commits += 1
                    } else {
                        ok = false
                        if (stored?.generation ?? 0) < seen.committed.generation { lost += 1 } else { leaked += 1 }
                        problems.append(
                            "kill \(kills): \(account) holds generation \(stored?.generation ?? -1), not the committed \(seen.committed.generation) nor the one in flight"
                        )
                    }
                }
            } catch {
                ok = false
                problems.append("kill \(kills): the vault does not open or read: \(error)")
            }
            expected = round
            if ok { passed += 1 }
            if problems.count > 5 { break }
        }
        StressResults.record(StressCount(case: "1 kill during token rotations", tried: kills, passed: passed, lost: lost, leaked: leaked))
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        #expect(passed == kills && kills > 0, "\(kills) kills, \(passed) passed, \(commits) rotations committed")
        #expect(commits >= target)
    }
}

/// Lowercase hex SHA-256 of a token, as SessionProbe prints it.
private func digest(_ token: String?) -> String {
    token.map { Digest.hex(Digest.sha256(Array($0.utf8))) } ?? "none"
}
