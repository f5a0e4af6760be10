import Foundation
import Testing
import VaultCrypto
@_spi(RawWrites) import VaultStore
import VaultTestSupport

/// The notification history: newest-first pages, filters, answers and pruning.
@Suite struct NotificationHistoryTests {
    /// A vault with two accounts and 30 notifications, one every 10 s, alternating accounts;
    /// every third one is pending.
    struct History {
        let test: TestVault
        let vault: Vault
        let alice: AccountID
        let bob: AccountID
        let records: [NotificationRecord]

        init(kind: TestVault.Kind = .keyFile) throws {
            test = try TestVault(kind)
            vault = try test.create(clock: Times.fixedClock)
            alice = try vault.accounts.insert(Samples.account("alice")).id
            bob = try vault.accounts.insert(Samples.account("bob")).id
            var records: [NotificationRecord] = []
            for index in 0..<30 {
                records.append(
                    NotificationRecord(
                        uuid: String(format: "n-%03d", index), account: index.isMultiple(of: 2) ? alice : bob,
                        subject: "subject \(index)", message: "message \(index)",
                        actions: [NotificationAction(label: "Approve", action: "approve")],
                        createdAt: Times.at(index * 10), status: index.isMultiple(of: 3) ? .pending : .answered))
            }
            // Inserted out of order, so seq does not follow created_at.
            #expect(try vault.notifications.upsert(records.shuffled()) == 30)
            self.records = records
        }

        /// Every page of `query`, following the printed cursor as a command-line tool would.
        func all(_ query: NotificationQuery) throws -> [NotificationRecord] {
            var query = query
            var items: [NotificationRecord] = []
            while true {
                let page = try vault.notifications.page(query)
                #expect(page.items.count <= query.limit)
                items += page.items
                guard let next = page.next else { return items }
                let parsed: NotificationCursor? = NotificationCursor(next.description)
                guard let parsed, parsed == next else {
                    Issue.record("the printed cursor \(next) does not parse back")
                    return items
                }
                query.after = parsed
            }
        }
    }

    @Test(
        "paging returns every existing row exactly once, newest first, while rows are inserted between pages",
        arguments: TestVault.Kind.allCases)
    func pagingDuringInserts(kind: TestVault.Kind) throws {
        let history = try History(kind: kind)
        defer { history.vault.close() }
        var query = NotificationQuery(limit: 4)
        var seen: [NotificationRecord] = []
        var inserted = 0
        for pageNumber in 0... {
            // Each page of 4 adds 2 rows still ahead of the cursor: the walk ends, and fast.
            try #require(pageNumber < 100, "paging does not end")
            let page = try history.vault.notifications.page(query)
            seen += page.items
            guard let next = page.next, let last = page.items.last else { break }
            // A newer row, an older row, one between the remaining rows, and one with the cursor's own time.
            for createdAt in [
                Times.at(10_000 + inserted), Times.at(-1_000 - inserted),
                last.createdAt.addingTimeInterval(-5), last.createdAt,
            ] {
                inserted += 1
                try history.vault.notifications.upsert(
                    NotificationRecord(
                        uuid: "late-\(inserted)", account: inserted.isMultiple(of: 2) ? history.alice : history.bob,
                        subject: "late", message: "late", actions: [], createdAt: createdAt))
            }
            query.after = next
        }
        #expect(inserted > 0)
        let uuids = seen.map(\.uuid)
        #expect(Set(uuids).count == uuids.count, "no row is returned twice")
        for record in history.records {
            #expect(uuids.filter { $0 == record.uuid }.count == 1, "\(record.uuid) returned once")
        }
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.createdAt > $1.createdAt }, "strictly newest first")
        let returnedOriginals = seen.filter { $0.uuid.hasPrefix("n-") }
        #expect(returnedOriginals == history.records.reversed(), "every field of every row opens intact")
    }

    @Test("filters by account, pending status and time window (since inclusive, until exclusive)")
    func filters() throws {
        let history = try History()
        defer { history.vault.close() }
        let newestFirst = Array(history.records.reversed())

        #expect(try history.all(NotificationQuery(limit: 7)) == newestFirst)
        #expect(try history.all(NotificationQuery(account: history.alice, limit: 4)) == newestFirst.filter { $0.account == history.alice })
        #expect(try history.all(NotificationQuery(pendingOnly: true, limit: 3)) == newestFirst.filter { $0.status == .pending })

        let window = try history.all(NotificationQuery(since: Times.at(50), until: Times.at(150), limit: 4))
        #expect(window == newestFirst.filter { $0.createdAt >= Times.at(50) && $0.createdAt < Times.at(150) })
        #expect(window.count == 10)
        #expect(window.first?.createdAt == Times.at(140) && window.last?.createdAt == Times.at(50))

        let combined = try history.all(NotificationQuery(account: history.bob, pendingOnly: true, since: Times.at(100), limit: 2))
        #expect(combined == newestFirst.filter { $0.account == history.bob && $0.status == .pending && $0.createdAt >= Times.at(100) })
        #expect(!combined.isEmpty)

        let exact = try history.vault.notifications.page(NotificationQuery(limit: 30))
        #expect(exact.items.count == 30 && exact.next == nil, "a page that ends exactly at the last row has no next cursor")
        expectVaultError(.invalidArgument) { try history.vault.notifications.page(NotificationQuery(limit: 0)) }
        #expect(NotificationCursor("garbage") == nil)
    }

    @Test("pruning by age and by keeping the newest per account removes exactly what it reports")
    func pruning() throws {
        let history = try History()
        defer { history.vault.close() }
        let vault = history.vault

        #expect(try vault.notifications.prune(olderThan: Times.at(100)) == 10)
        #expect(try history.all(NotificationQuery(limit: 50)).allSatisfy { $0.createdAt >= Times.at(100) })
        #expect(try vault.notifications.count() == 20)
        #expect(try vault.notifications.prune(olderThan: Times.at(100)) == 0, "pruning again removes nothing")

        #expect(try vault.notifications.prune(keepNewest: 1, account: history.alice) == 9)
        #expect(try vault.notifications.count(account: history.bob) == 10, "another account is untouched")
        #expect(try history.all(NotificationQuery(account: history.alice, limit: 5)).map(\.createdAt) == [Times.at(280)])

        #expect(try vault.notifications.prune(keepNewest: 3) == 7)
        let left = try history.all(NotificationQuery(limit: 50))
        #expect(left.map(\.uuid) == ["n-029", "n-028", "n-027", "n-025"])

        expectVaultError(.invalidArgument) { try vault.notifications.prune(keepNewest: -1) }
    }

    @Test("only the first answer to a pending notification is recorded")
    func firstAnswerWins() throws {
        let history = try History()
        defer { history.vault.close() }
        let pending = try #require(history.records.first { $0.status == .pending && $0.account == history.alice })
        let vault = history.vault
        #expect(try vault.notifications.recordAnswer(to: pending.uuid, account: history.alice, action: "approve", byDevice: "d-1", at: Times.at(500)))
        #expect(try vault.notifications.recordAnswer(to: pending.uuid, account: history.alice, action: "deny", byDevice: "d-2", at: Times.at(501)) == false)
        let answered = try #require(try vault.notifications.find(pending.uuid, account: history.alice))
        #expect(answered.status == .answered && answered.actionTaken == "approve")
        #expect(answered.answeredByDevice == "d-1" && answered.answeredAt == Times.at(500))
        #expect(
            try vault.notifications.recordAnswer(to: pending.uuid, account: history.bob, action: "approve", byDevice: "d-3", at: Times.at(502)) == false,
            "another account cannot answer it")
    }
}
