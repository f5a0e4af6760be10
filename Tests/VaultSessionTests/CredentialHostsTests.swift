import Foundation
import Testing
import VaultSession
import VaultStore

/// The rules that decide which account's token a git or docker request gets. Each test names a
/// request a credential helper must never answer with the wrong account's token.
@Suite("Credential host matching")
struct CredentialHostsTests {
    private func binding(
        _ account: String, _ hosts: [String], username: String? = nil, defaults: [String] = [], createdAt: Date? = nil
    ) -> CredentialBinding {
        CredentialBinding(account: AccountID(rawValue: account), hosts: hosts, username: username, defaultHosts: defaults, createdAt: createdAt)
    }

    private func match(_ bindings: [CredentialBinding], _ host: String, _ path: String? = nil, scheme: String = "https", username: String? = nil) -> String? {
        CredentialHosts.match(bindings, CredentialRequest(scheme: scheme, host: host, path: path, username: username))?.account.rawValue
    }

    @Test("a path is matched as the server resolves it: dot segments, percent-encoding and repeated slashes")
    func resolvedPaths() {
        let bindings = [binding("team", ["git.example/team"]), binding("other", ["git.example/other"])]
        #expect(match(bindings, "git.example", "team/repo.git") == "team")
        #expect(match(bindings, "git.example", "team/../other/repo") == "other", "`..` leaves team")
        #expect(match(bindings, "git.example", "team/%2e%2e/other/repo") == "other", "encoded `..` is still `..`")
        #expect(match(bindings, "git.example", "//team///repo") == "team")
        #expect(match(bindings, "git.example", "team/./repo") == "team")
        #expect(match(bindings, "git.example", "../team/repo") == nil, "a path above its root matches nothing")
        #expect(match(bindings, "git.example", "team/%252e%252e/other") == nil, "a double-encoded octet matches nothing")
        #expect(match(bindings, "git.example", "teamwork/repo") == nil, "a prefix is whole segments, not characters")
    }

    @Test("the longest matching entry wins; another host or a host's suffix matches nothing")
    func longestPrefix() {
        let bindings = [binding("whole", ["git.example"]), binding("team", ["git.example/team"])]
        #expect(match(bindings, "git.example", "team/repo") == "team")
        #expect(match(bindings, "git.example", "elsewhere/repo") == "whole")
        #expect(match(bindings, "GIT.example", "team/repo") == "team", "hosts compare without case")
        #expect(match(bindings, "evil-git.example") == nil)
        #expect(match(bindings, "git.example.evil") == nil)
        #expect(match(bindings, "git.example:8443") == nil, "a port is part of the entry")
    }

    @Test("plain http is answered only for this machine")
    func httpOnlyToLoopback() {
        let bindings = [binding("remote", ["git.example"]), binding("local", ["127.0.0.1:3000", "localhost:3000"])]
        #expect(match(bindings, "git.example", scheme: "http") == nil)
        #expect(match(bindings, "127.0.0.1:3000", scheme: "http") == "local")
        #expect(match(bindings, "git.example", scheme: "ftp") == nil)
    }

    @Test("accounts sharing an entry: a user name picks one; without it the default, else the oldest")
    func sharedEntries() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let alice = binding("alice", ["git.example"], username: "alice", createdAt: now)
        let bob = binding("bob", ["git.example"], username: "bob", createdAt: now.addingTimeInterval(-60))
        #expect(match([alice, bob], "git.example", username: "alice") == "alice")
        #expect(match([alice, bob], "git.example", username: "carol") == nil, "a user name no account answers as gets nothing")
        #expect(match([alice, bob], "git.example") == "bob", "no default marked: the oldest account")
        var marked = alice
        marked.defaultHosts = ["git.example"]
        #expect(match([marked, bob], "git.example") == "alice", "the marked default")
        #expect(CredentialHosts.entries([marked, bob]) == ["git.example": "alice"])
    }

    @Test("what a user may bind: host[:port][/path], normalised; anything else is refused")
    func normalising() {
        #expect(CredentialHosts.normalise("https://Git.Example/Team/") == "git.example/Team")
        #expect(CredentialHosts.normalise("git.example:8443") == "git.example:8443")
        #expect(CredentialHosts.normalise("git.example/a/../b") == "git.example/b")
        #expect(CredentialHosts.normalise("") == nil)
        #expect(CredentialHosts.normalise("user@git.example") == nil, "no user info")
        #expect(CredentialHosts.normalise("git.example/../../etc") == nil)
        #expect(CredentialHosts.normalise("git.example/a b") == nil, "no spaces or controls in a path")
    }
}
