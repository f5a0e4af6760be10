import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// `verify` reads a large table in two halves on two threads; what it reports must be what one
/// pass over the rows reports, in the same order.
@Suite("vault verify in two halves")
struct VerifySplitTests {
    /// The report without the time it was made.
    private static func findings(_ report: IntegrityReport) -> [String] {
        [
            "problems \(report.databaseProblems)", "opened \(report.sealedValuesOpened)", "skipped \(report.sealedValuesSkipped)",
            "authentic \(report.rowsAuthenticated)", "depth \(report.depth)",
        ] + report.damaged.map(\.description)
    }

    /// Every table of two rows or more split, against none split, at both depths.
    private static func compare(_ vault: Vault) throws -> [String] {
        var found: [String] = []
        for depth in VerifyDepth.allCases {
            let whole = try vault.maintenance.verify(depth: depth, splitAt: .max, progress: nil)
            var steps: [MaintenanceProgress] = []
            let split = try vault.maintenance.verify(depth: depth, splitAt: 2) { steps.append($0) }
            #expect(findings(split) == findings(whole), "\(depth)")
            #expect(steps.last.map { $0.completed == $0.total } == true, "the progress ends complete: \(steps.suffix(3))")
            #expect(zip(steps, steps.dropFirst()).allSatisfy { $0.completed <= $1.completed }, "the progress never goes back")
            found += split.damaged.map(\.description)
        }
        return found
    }

    /// The schema-1 fixture's records and six notifications more.
    private static func populated() throws -> (TestVault, Vault) {
        let (test, vault) = try KeyRotationTests.populated()
        let account = try #require(try vault.accounts.all().first).id
        let created = Date(timeIntervalSince1970: 1_790_000_000)
        for index in 0..<6 {
            try vault.notifications.upsert(
                NotificationRecord(
                    uuid: "00000000-0000-4000-8000-00000000010\(index)", account: account, subject: "Sign-in \(index)",
                    message: "Approve the sign-in number \(index)?", actions: [NotificationAction(label: "Approve", action: "approve")],
                    createdAt: created.addingTimeInterval(Double(index)), expiresAt: created.addingTimeInterval(300)))
        }
        return (test, vault)
    }

    @Test("a healthy vault: both halves of every table authentic, every value opened once")
    func healthy() throws {
        let (test, vault) = try Self.populated()
        defer { vault.close() }
        #expect(try Self.compare(vault).isEmpty)
        let rows = try RawDatabase.int(test.url, "SELECT count(*) FROM notifications") ?? 0
        #expect(rows >= 4, "enough notifications for two halves of two rows")
    }

    @Test("damage in both halves: bytes flipped in the last device and the first and last notification, a notification deleted, a value misplaced")
    func damaged() throws {
        let (test, vault) = try Self.populated()
        defer { vault.close() }
        let uuids = try RawDatabase.queue(test.url).read { try String.fetchAll($0, sql: "SELECT uuid FROM notifications ORDER BY rowid") }
        let (first, last) = try (#require(uuids.first), #require(uuids.last))
        // A value sealed for another row, authenticated as it stands (only --deep sees it), in the upper half.
        try vault.maintenance.write("misplacing a sealed value") { db in
            try vault.core.integrity.rewrite(.notifications, matching: ["uuid": uuids[uuids.count - 2]], db) {
                try db.execute(
                    sql: "UPDATE notifications SET subject = (SELECT subject FROM notifications WHERE uuid = ?) WHERE uuid = ?",
                    arguments: [first, uuids[uuids.count - 2]])
            }
        }
        for uuid in [first, last] {
            var message = try #require(try RawDatabase.blob(test.url, "SELECT message FROM notifications WHERE uuid = ?", [uuid]))
            message[message.count - 1] ^= 0x01
            try RawDatabase.execute(test.url, "UPDATE notifications SET message = ? WHERE uuid = ?", [Data(message), uuid])
        }
        // The upper half's device and the lower half's notification: one pass lists the device first.
        var name = try #require(try RawDatabase.blob(test.url, "SELECT name FROM devices ORDER BY rowid DESC LIMIT 1"))
        name[name.count - 1] ^= 0x01
        try RawDatabase.execute(test.url, "UPDATE devices SET name = ? WHERE rowid = (SELECT max(rowid) FROM devices)", [Data(name)])
        try RawDatabase.execute(test.url, "DELETE FROM notifications WHERE uuid = ?", [uuids[2]])

        let found = try Self.compare(vault)
        #expect(found.contains { $0.hasPrefix("notifications row \(first) column message") }, "\(found)")
        #expect(found.contains { $0.hasPrefix("notifications row \(last) column message") }, "\(found)")
        #expect(found.contains { $0.hasPrefix("devices row ") && $0.contains("column name") }, "\(found)")
        #expect(found.contains { $0.hasPrefix("notifications row ") && $0.contains("a row was deleted") }, "\(found)")
        #expect(found.contains { $0.hasPrefix("notifications row \(uuids[uuids.count - 2]) column subject: does not open") }, "\(found)")
    }

    @Test("a write committed between the two halves' starts: the upper half is read again on the first one's snapshot")
    func writeBetweenTheHalves() throws {
        let (test, vault) = try Self.populated()
        defer { vault.close() }
        let account = try #require(try vault.accounts.all().first).id
        let uuid = "00000000-0000-4000-8000-000000000200"
        let report = try vault.maintenance.verify(
            depth: .rows, splitAt: 2,
            beforeUpperHalf: {
                // A notification more, committed after the first half's snapshot was taken: read
                // by the upper half alone, it would be a row the first half's state never saw.
                try vault.notifications.upsert(
                    NotificationRecord(
                        uuid: uuid, account: account, subject: "Later", message: "Written during verify",
                        actions: [NotificationAction(label: "Approve", action: "approve")],
                        createdAt: Date(timeIntervalSince1970: 1_790_000_100), expiresAt: Date(timeIntervalSince1970: 1_790_000_400)))
            }, progress: nil)
        #expect(report.passed, "\(report.damaged)")
        #expect(try vault.notifications.find(uuid, account: account) != nil, "the write committed")
        #expect(try vault.maintenance.verify(depth: .rows, splitAt: 2, progress: nil).passed, "and verifies afterwards")
        withExtendedLifetime(test) {}
    }
}
