import Foundation
import Testing
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// Case 3 of issue 7: eight processes on one vault, each running a mix of reads, token
/// rotations (compare-and-swap), account switches and notification writes.
@Suite("Concurrency: 8 processes on one vault", .timeLimit(.minutes(TestTimeScale.minutes(30))))
struct ConcurrencyMixedTests {
    @Test("8 processes × mixed operations: no lost update, no SQLITE_BUSY reaching a caller, integrity ok")
    func eightProcessesMixed() async throws {
        let processes = 8
        let operations = StressScale.current.count(test: 150, quick: 400, full: 1_000)
        let test = try TestVault(.keyFile)
        guard case .keyFile(let keyFile) = test.credential else { return }
        var accounts: [AccountID] = []
        var generationsBefore: [AccountID: Int64] = [:]
        let notificationsBefore: Int
        do {
            let vault = try test.create()
            for subject in ["alice", "bob", "carol"] {
                let account = try vault.accounts.insert(Samples.account(subject))
                generationsBefore[account.id] = try vault.tokens.store(Samples.tokens(subject), for: account.id, replacing: nil)
                accounts.append(account.id)
            }
            notificationsBefore = try vault.notifications.count()
            vault.close()
        }

        let children = try (0..<processes).map { index in
            try stressChild(
                vault: test.url, keyFile: keyFile, "mixed", "\(operations)", "\(index + 1)",
                accounts[0].rawValue, accounts[1].rawValue, accounts[2].rawValue)
        }
        var rotated = 0
        var notified = 0
        var busy = 0
        var errors = 0
        var table: [String] = []
        for (index, child) in children.enumerated() {
            let lines = try await child.finish(timeout: .seconds(600))
            func value(_ name: String) -> String? {
                lines.first { $0.hasPrefix(name + " ") }.map { String($0.dropFirst(name.count + 1)) }
            }
            rotated += Int(value("rotated") ?? "") ?? 0
            notified += Int(value("notified") ?? "") ?? 0
            busy += Int(value("busy") ?? "") ?? 0
            errors += Int(value("errors") ?? "") ?? 0
            table.append(
                "process \(index + 1): p99 \(value("p99") ?? "?") ms, rotated \(value("rotated") ?? "?"), notified \(value("notified") ?? "?"), busy \(value("busy") ?? "?"), errors \(value("errors") ?? "?")"
            )
            if errors > 0 { print(child.output.value.standardError.split(separator: "\n").prefix(3)) }
        }
        print("case 3, \(processes) processes × \(operations) operations:\n  " + table.joined(separator: "\n  "))

        let vault = try test.open()
        defer { vault.close() }
        let report = try vault.maintenance.verify()
        var generationsGained = 0
        for account in accounts {
            let generation = try vault.tokens.current(for: account)?.generation ?? 0
            generationsGained += Int(generation - (generationsBefore[account] ?? 0))
        }
        let notificationsAfter = try vault.notifications.count()
        let lostRotations = rotated - generationsGained
        let lostNotifications = notified - (notificationsAfter - notificationsBefore)
        #expect(report.passed, "\(report.databaseProblems) \(report.damaged)")
        #expect(lostRotations == 0, "\(rotated) rotations committed, generations moved by \(generationsGained)")
        #expect(lostNotifications == 0, "\(notified) notifications written, \(notificationsAfter - notificationsBefore) stored")
        #expect(busy == 0, "SQLITE_BUSY reached a caller \(busy) times")
        #expect(errors == 0, "\(errors) operations failed")
        #expect(accounts.contains { $0 == (try? vault.accounts.activeID()) ?? nil })

        let tried = processes * operations
        StressResults.record(
            StressCount(
                case: "3 eight processes, mixed operations", tried: tried,
                passed: tried - busy - errors, lost: abs(lostRotations) + abs(lostNotifications),
                leaked: busy))
    }
}
