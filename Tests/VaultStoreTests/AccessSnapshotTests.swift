import Foundation
import GRDB
import Testing
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// The one read behind a token request (``TokenStore/accessSnapshot(for:)``): the rows it
/// returns are the account's newest session, its policy and its tokens, whichever account is
/// asked for, and nothing of another account's.
@Suite struct AccessSnapshotTests {
    /// A vault with alice and bob signed in, alice active, and a second handle on the file that
    /// writes as another process would.
    struct TwoAccounts {
        let test: TestVault
        let vault: Vault
        let other: Vault
        let alice: AccountID
        let bob: AccountID

        init() throws {
            test = try TestVault()
            vault = try test.create()
            alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: SessionPolicy()).account.id
            bob = try vault.accounts.signIn(Samples.account("bob"), tokens: Samples.tokens("bob"), policy: SessionPolicy()).account.id
            try vault.accounts.setActive(alice)
            other = try test.open()
        }

        func close() {
            other.close()
            vault.close()
        }
    }

    @Test("the active account's or the named one's rows; the newest session; defaults without a policy; nil with no account")
    func selectsTheAccountsRows() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        #expect(try vault.tokens.accessSnapshot(for: nil) == nil, "no account is active")

        let policy = SessionPolicy(idleTimeout: .seconds(600))
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: policy).account.id
        let first = try #require(try vault.sessions.current(for: alice))
        // Signing in again ends the first session as replaced: the snapshot has the new one.
        let second = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice2"), policy: policy).session
        #expect(second.id != first.id)
        // An account with tokens and no stored policy (stored below the session layer).
        let bob = try vault.accounts.insert(Samples.account("bob")).id
        try vault.tokens.store(Samples.tokens("bob"), for: bob, replacing: nil)
        try vault.accounts.setActive(bob)

        let active = try #require(try vault.tokens.accessSnapshot(for: nil))
        #expect(active.activeAccount == bob && active.account == bob)
        #expect(active.token?.accessToken.hasPrefix("AT-bob") == true)
        #expect(active.policy == SessionPolicy(), "no stored policy: the defaults")

        let named = try #require(try vault.tokens.accessSnapshot(for: alice))
        #expect(named.activeAccount == bob && named.account == alice, "another account than the active one")
        #expect(named.session?.id == second.id && named.session?.state == .active, "the newest session")
        #expect(named.policy.idleTimeout == .seconds(600))
        #expect(named.token?.accessToken.hasPrefix("AT-alice2") == true)

        let unknown = try #require(try vault.tokens.accessSnapshot(for: AccountID(rawValue: "nobody")))
        #expect(unknown.session == nil && unknown.token == nil && unknown.policy == SessionPolicy())
    }

    @Test("the revision stays while other rows are written, and moves with each row a snapshot is read from")
    func revisionFollowsTheSnapshotsRows() throws {
        let scene = try TwoAccounts()
        defer { scene.close() }
        let (vault, other, alice, bob) = (scene.vault, scene.other, scene.alice, scene.bob)
        let read = try #require(try vault.tokens.accessSnapshot(for: nil))
        #expect(try vault.tokens.accessRevision(for: alice) == read.revision)

        // Writes of rows the snapshot is not read from: bob's policy, tokens and a notification.
        try other.sessions.setPolicy(SessionPolicy(idleTimeout: .seconds(600)), for: bob)
        try other.tokens.store(Samples.tokens("bob2"), for: bob, replacing: try other.tokens.current(for: bob)?.generation)
        _ = try other.notifications.upsert(
            NotificationRecord(uuid: "n-1", account: alice, subject: "s", message: "m", actions: [], createdAt: Times.at(1)))
        #expect(try vault.tokens.accessRevision(for: alice) == read.revision, "nothing alice's snapshot is read from was written")

        // Each row it is read from, written: the revision moves, and equals a new snapshot's.
        let writes: [(String, () throws -> Void)] = [
            ("tokens", { try other.tokens.store(Samples.tokens("alice2"), for: alice, replacing: try other.tokens.current(for: alice)?.generation) }),
            ("policy", { try other.sessions.setPolicy(SessionPolicy(idleTimeout: .seconds(600)), for: alice) }),
            (
                "session",
                {
                    var session = try #require(try other.sessions.current(for: alice))
                    session.lastActivityAt = session.lastActivityAt.addingTimeInterval(1)
                    try other.sessions.update(session)
                }
            ),
            ("newest session", { _ = try other.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice3"), policy: SessionPolicy()) }),
            ("header", { try other.accounts.setActive(bob) }),
        ]
        var before = read.revision
        for (row, write) in writes {
            try write()
            let now = try vault.tokens.accessRevision(for: alice)
            #expect(now != before, "writing alice's \(row) moved the revision")
            #expect(try vault.tokens.accessSnapshot(for: alice)?.revision == now, "after the \(row): a snapshot's revision is the state's")
            before = now
        }
    }

    @Test("the recheck: unchanged for others' writes, alice's new token for her tokens alone, a full read for her policy or the header")
    func recheckReadsOnlyTheTokens() throws {
        let scene = try TwoAccounts()
        defer { scene.close() }
        let (vault, other, alice, bob) = (scene.vault, scene.other, scene.alice, scene.bob)
        let read = try #require(try vault.tokens.accessSnapshot(for: nil))

        try other.tokens.store(Samples.tokens("bob2"), for: bob, replacing: try other.tokens.current(for: bob)?.generation)
        guard case .unchanged = try vault.tokens.recheckAccess(for: alice, since: read.revision) else {
            Issue.record("bob's tokens are not alice's")
            return
        }

        // Another process refreshed alice's tokens: the recheck holds what a new snapshot holds.
        try other.tokens.store(Samples.tokens("alice2"), for: alice, replacing: try other.tokens.current(for: alice)?.generation)
        guard case .token(let token, let revision) = try vault.tokens.recheckAccess(for: alice, since: read.revision) else {
            Issue.record("alice's tokens alone were written")
            return
        }
        let fresh = try #require(try vault.tokens.accessSnapshot(for: alice))
        #expect(token == fresh.token && revision == fresh.revision)
        #expect(token.accessToken.hasPrefix("AT-alice2") && token.generation == fresh.grantGeneration)
        guard case .unchanged = try vault.tokens.recheckAccess(for: alice, since: revision) else {
            Issue.record("nothing was written since")
            return
        }

        // Her tokens and her policy, or the header, written: everything is read again.
        try other.tokens.store(Samples.tokens("alice3"), for: alice, replacing: try other.tokens.current(for: alice)?.generation)
        try other.sessions.setPolicy(SessionPolicy(idleTimeout: .seconds(600)), for: alice)
        guard case .changed = try vault.tokens.recheckAccess(for: alice, since: revision) else {
            Issue.record("alice's policy was written")
            return
        }
        let again = try #require(try vault.tokens.accessSnapshot(for: alice)).revision
        try other.accounts.setActive(bob)
        guard case .changed = try vault.tokens.recheckAccess(for: alice, since: again) else {
            Issue.record("the header was written")
            return
        }
    }

    @Test("the recheck refuses alice's tokens row put back from an older copy after another process refreshed them")
    func recheckRefusesAnOlderTokensRow() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try vault.accounts.signIn(Samples.account("alice"), tokens: Samples.tokens("alice"), policy: SessionPolicy()).account.id
        let read = try #require(try vault.tokens.accessSnapshot(for: alice))
        let old = test.directory.file("old.db")
        try RawDatabase.execute(test.url, "ATTACH DATABASE ? AS old; CREATE TABLE old.tokens AS SELECT * FROM main.tokens; DETACH DATABASE old;", [old.path])
        let other = try test.open()
        defer { other.close() }
        try other.tokens.store(Samples.tokens("alice2"), for: alice, replacing: try other.tokens.current(for: alice)?.generation)
        try RawDatabase.execute(
            test.url,
            "ATTACH DATABASE ? AS old; DELETE FROM main.tokens; INSERT INTO main.tokens SELECT * FROM old.tokens; DETACH DATABASE old;",
            [old.path])
        do {
            _ = try vault.tokens.recheckAccess(for: alice, since: read.revision)
            Issue.record("the older tokens row was served")
        } catch let error as VaultError {
            #expect(error.code == .damaged && error.message.contains("tokens row"), "\(error)")
        }
    }

    @Test("a target's revision moves with the account's target tokens, and the account's own does not")
    func targetRevision() throws {
        let scene = try TwoAccounts()
        defer { scene.close() }
        let (vault, other, alice, bob) = (scene.vault, scene.other, scene.alice, scene.bob)
        let files = try TokenTarget(resources: ["https://files.example.test/"])
        let mail = try TokenTarget(resources: ["https://mail.example.test/"])
        try vault.tokens.store(Samples.tokens("alice-files"), for: alice, target: files)
        let own = try #require(try vault.tokens.accessSnapshot(for: alice)).revision
        let read = try #require(try vault.tokens.accessSnapshot(for: alice, target: files)).revision
        let again = try vault.tokens.accessRevision(for: alice, target: files)
        #expect(read != own && again == read)

        try other.tokens.store(Samples.tokens("bob-files"), for: bob, target: files)
        #expect(try vault.tokens.accessRevision(for: alice, target: files) == read, "bob's target tokens are not alice's")
        try other.tokens.store(Samples.tokens("alice-mail"), for: alice, target: mail)
        let now = try vault.tokens.accessRevision(for: alice, target: files)
        #expect(now != read, "another of alice's target tokens was written")
        #expect(try vault.tokens.accessSnapshot(for: alice, target: files)?.revision == now)
        #expect(try vault.tokens.accessRevision(for: alice) == own, "the account's own token does not depend on its targets'")
        guard case .changed = try vault.tokens.recheckAccess(for: alice, since: read) else {
            Issue.record("a target's entry is read again")
            return
        }
    }
}
