import Foundation
import GRDB
import Testing
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// Issue 34, item 1 (the store): an account keeps tokens for other targets beside its own, each
/// sealed and authenticated, all of them committed to, and they go with the grant.
@Suite("Tokens for other targets: stored, checked, wiped with the grant")
struct TargetTokenTests {
    let files: TokenTarget
    let mail: TokenTarget

    init() throws {
        files = try TokenTarget(resources: ["https://files.example.com/"], scopes: ["files.read"])
        mail = try TokenTarget(resources: ["https://mail.example.com/", "https://calendar.example.com/"])
    }

    func signedIn(_ vault: Vault, _ subject: String) throws -> AccountID {
        try vault.accounts.signIn(Samples.account(subject), tokens: Samples.tokens(subject), policy: SessionPolicy()).account.id
    }

    func damaged(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        do {
            try body()
            Issue.record("expected a refusal", sourceLocation: sourceLocation)
        } catch let error as VaultError {
            #expect(error.code == .damaged, "\(error)", sourceLocation: sourceLocation)
            return error.message
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
        return ""
    }

    @Test("a target is checked and ordered: the same APIs asked in another order are the same token")
    func targetRules() throws {
        let one = try TokenTarget(resources: ["https://b.example/", "https://a.example/", "https://a.example/"], scopes: ["y", "x"])
        let two = try TokenTarget(resources: ["https://a.example/", "https://b.example/"], scopes: ["x", "y", "x"])
        #expect(one == two && one.resources == ["https://a.example/", "https://b.example/"] && one.scopes == ["x", "y"])
        #expect(TokenTarget.account.isAccount && !one.isAccount)
        for (resource, why) in [
            ("files.example.com/api", "absolute"), ("https://api.example/#frag", "fragment"), ("https://api.example/a b", "spaces"),
            ("", "empty"),
        ] {
            #expect(throws: TokenTargetError.self, "\(why)") { try TokenTarget(resources: [resource]) }
        }
        #expect(throws: TokenTargetError.self) { try TokenTarget(scopes: ["read write"]) }
        #expect(throws: TokenTargetError.self) { try TokenTarget(scopes: ["say\"hi\""]) }
        let error = #expect(throws: TokenTargetError.self) { try TokenTarget(resources: ["https://x.example/#top"]) }
        #expect(error?.description.contains("RFC 8707") == true)
    }

    @Test("two targets kept beside the account's own token; a replacement raises the target's generation only")
    func keptBeside() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try signedIn(vault, "alice")
        let own = try #require(try vault.tokens.current(for: alice))
        let first = try vault.tokens.store(Samples.tokens("files-1"), for: alice, target: files)
        try vault.tokens.store(Samples.tokens("mail-1"), for: alice, target: mail)
        var unnamed = Samples.tokens("files-2")
        unnamed.scopes = []
        let second = try vault.tokens.store(unnamed, for: alice, target: files)
        #expect(first.generation == 1 && second.generation == 2)
        #expect(try vault.tokens.token(for: alice, target: files)?.accessToken == Samples.tokens("files-2").accessToken)
        #expect(try vault.tokens.token(for: alice, target: mail)?.accessToken == Samples.tokens("mail-1").accessToken)
        #expect(try vault.tokens.token(for: alice, target: .account)?.accessToken == own.tokens.accessToken)
        #expect(try vault.tokens.current(for: alice)?.generation == own.generation, "the account's own tokens are untouched")
        let listed = try vault.tokens.targetTokens(for: alice)
        #expect(Set(listed.map(\.target)) == [files, mail])
        #expect(listed.first { $0.target == files }?.grantedScopes == ["files.read"], "the scopes asked for when the server names none")
        #expect(listed.first { $0.target == mail }?.grantedScopes == ["openid"], "the scopes the server named")
        // Sealed: no token value in the file.
        let bytes = try Data(contentsOf: test.url)
        #expect(bytes.range(of: Data(Samples.tokens("files-2").accessToken.utf8)) == nil)
        #expect(try vault.maintenance.verify().passed)
    }

    @Test("a target's row deleted, or put back from an older copy: refused for that account; the other works; verify names it")
    func deletedOrPutBack() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try signedIn(vault, "alice")
        let bob = try signedIn(vault, "bob")
        try vault.tokens.store(Samples.tokens("files-1"), for: alice, target: files)
        try vault.tokens.store(Samples.tokens("mail-1"), for: alice, target: mail)
        try vault.tokens.store(Samples.tokens("bob-files"), for: bob, target: files)
        try RawDatabase.execute(test.url, "CREATE TABLE saved AS SELECT * FROM resource_tokens")
        try vault.tokens.store(Samples.tokens("files-2"), for: alice, target: files)

        // Put back: the older row of the files token (authentic alone, an older copy).
        try RawDatabase.execute(
            test.url, "DELETE FROM resource_tokens WHERE account_id = ? AND resources = 'https://files.example.com/'", [alice.rawValue])
        try RawDatabase.execute(
            test.url, "INSERT INTO resource_tokens SELECT * FROM saved WHERE account_id = ? AND resources = 'https://files.example.com/'",
            [alice.rawValue])
        var message = damaged { _ = try vault.tokens.token(for: alice, target: files) }
        #expect(message.contains("resource_tokens rows of account \(alice.rawValue)"), "\(message)")
        _ = damaged { _ = try vault.tokens.accessSnapshot(for: alice, target: mail) }
        #expect(try vault.tokens.token(for: bob, target: files)?.accessToken == Samples.tokens("bob-files").accessToken)
        #expect(try vault.tokens.accessSnapshot(for: alice)?.token != nil, "the account's own token is still served")
        var report = try vault.maintenance.verify()
        #expect(report.damaged.map { "\($0.table) \($0.row)" } == ["resource_tokens \(alice.rawValue)"], "\(report.damaged)")

        // Deleted: the mail token gone (the files row as the vault wrote it again).
        try RawDatabase.execute(test.url, "DELETE FROM resource_tokens WHERE account_id = ?", [alice.rawValue])
        try RawDatabase.execute(test.url, "DELETE FROM saved")
        message = damaged { _ = try vault.tokens.targetTokens(for: alice) }
        #expect(message.contains("number 0 where the vault recorded 2"), "\(message)")
        report = try vault.maintenance.verify()
        #expect(!report.passed)
    }

    @Test("a sealed token moved to another target's row does not open, and the row's MAC refuses it first")
    func swappedBetweenRows() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try signedIn(vault, "alice")
        try vault.tokens.store(Samples.tokens("files-1"), for: alice, target: files)
        try vault.tokens.store(Samples.tokens("mail-1"), for: alice, target: mail)
        try RawDatabase.execute(
            test.url,
            """
            UPDATE resource_tokens SET access_token = (SELECT access_token FROM resource_tokens WHERE resources LIKE '%mail%')
            WHERE resources = 'https://files.example.com/'
            """)
        let message = damaged { _ = try vault.tokens.token(for: alice, target: files) }
        #expect(message.contains("resource_tokens") && message.contains("access_token"), "\(message)")
    }

    @Test("the targets' tokens go with the grant: a sign-in again, the end of the grant, the account's removal")
    func goWithTheGrant() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try signedIn(vault, "alice")
        try vault.tokens.store(Samples.tokens("files-1"), for: alice, target: files)
        _ = try signedIn(vault, "alice")
        #expect(try vault.tokens.targetTokens(for: alice).isEmpty, "a new grant: the old grant's tokens are gone")

        try vault.tokens.store(Samples.tokens("files-2"), for: alice, target: files)
        _ = try vault.leases.endGrant(for: alice, reason: "revoked")
        #expect(try vault.tokens.targetTokens(for: alice).isEmpty && vault.tokens.current(for: alice) == nil)

        let bob = try signedIn(vault, "bob")
        try vault.tokens.store(Samples.tokens("bob-files"), for: bob, target: files)
        #expect(try vault.accounts.remove(bob).removed)
        #expect(try RawDatabase.int(test.url, "SELECT count(*) FROM resource_tokens") == 0)
        #expect(try vault.maintenance.verify().passed, "every commitment still matches")
    }

    @Test("a key rotation re-seals the targets' tokens; they open after it and verify passes")
    func rotation() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let alice = try signedIn(vault, "alice")
        try vault.tokens.store(Samples.tokens("files-1"), for: alice, target: files)
        let before = try #require(try RawDatabase.blob(test.url, "SELECT access_token FROM resource_tokens"))
        try vault.maintenance.rotateKeys(credential: test.credential, batchSize: 1)
        let after = try #require(try RawDatabase.blob(test.url, "SELECT access_token FROM resource_tokens"))
        #expect(before != after, "sealed again under the new keys")
        #expect(try vault.tokens.token(for: alice, target: files)?.accessToken == Samples.tokens("files-1").accessToken)
        #expect(try vault.maintenance.verify().passed)
    }
}
