import Foundation
import Testing
import VaultSync
import VaultTestSupport

@testable import VaultOAuth

#if canImport(Glibc)
    import Glibc
#endif

/// The loopback redirect listener answers only this user's browser, hands the browser a
/// one-time opener instead of the authorization URL, and says "Signed in" only when told.
@Suite("Loopback redirect listener: this user only, one-time opener, the page after the outcome")
struct LoopbackListenerTests {
    static func get(_ url: URL) async throws -> HTTPResponse {
        try await NIOTransport(timeout: TestTimeScale.scaled(.seconds(30))).send(HTTPRequest(method: .get, url: url))
    }

    @Test("a connection from this process is found in the kernel's socket table as this uid's")
    func realOwnerLookup() async throws {
        let seen = Locked<uid_t?>(nil)
        let listener = try await LoopbackRedirectListener.start { peer, local in
            let owner = LoopbackPeer.owner(peer: peer, local: local)
            seen.withLock { $0 = owner }
            return owner
        }
        let opener = listener.opener(for: try #require(URL(string: "https://id.example.com/authorize?state=s")))
        let response = try await Self.get(opener)
        #expect(response.status == 302, "\(response.status) \(String(decoding: response.body, as: UTF8.self))")
        #expect(seen.withLock { $0 } == getuid())
        await listener.close()
    }

    @Test("the opener redirects once to the authorization URL; a second use is refused")
    func openerIsOneTime() async throws {
        let listener = try await LoopbackRedirectListener.start { _, _ in getuid() }
        let authorization = try #require(URL(string: "https://id.example.com/authorize?state=abc&code_challenge=xyz"))
        let opener = listener.opener(for: authorization)
        #expect(opener.absoluteString.hasPrefix("http://127.0.0.1:"))
        #expect(!opener.absoluteString.contains("state"), "the opener carries none of the authorization request")
        let first = try await Self.get(opener)
        #expect(first.status == 302)
        #expect(first.headers["Location"] == authorization.absoluteString)
        let second = try await Self.get(opener)
        #expect(second.status == 410)
        #expect(second.headers["Location"] == nil)
        await listener.close()
    }

    @Test("another user's connection gets 403 and does not use up the callback; this user's then counts")
    func anotherUserIsRefused() async throws {
        let standIn = Locked<uid_t>(getuid() &+ 1)
        let listener = try await LoopbackRedirectListener.start { _, _ in standIn.withLock { $0 } }
        let callback = try #require(URL(string: listener.redirectURI.absoluteString + "?code=bobs-code&state=victims-state"))
        let opener = listener.opener(for: try #require(URL(string: "https://id.example.com/authorize?state=victims-state")))
        #expect(try await Self.get(callback).status == 403)
        #expect(try await Self.get(opener).status == 403, "another user cannot learn the authorization URL either")

        standIn.withLock { $0 = getuid() }
        let mine = try #require(URL(string: listener.redirectURI.absoluteString + "?code=alices-code&state=victims-state"))
        let browser = Task { try await Self.get(mine) }
        let query = try await listener.nextRedirect()
        #expect(query.first { $0.name == "code" }?.value == "alices-code")
        await listener.finish(.signedIn)
        let page = try await browser.value
        #expect(page.status == 200)
        #expect(String(decoding: page.body, as: UTF8.self).contains("Signed in"))
    }

    @Test("an owner that cannot be found is refused (fail closed)")
    func unknownOwnerIsRefused() async throws {
        let listener = try await LoopbackRedirectListener.start { _, _ in nil }
        #expect(try await Self.get(listener.redirectURI).status == 403)
        await listener.close()
    }

    @Test("the browser waits for the outcome: a failure is shown as one, never as signed in")
    func pageAfterTheOutcome() async throws {
        let listener = try await LoopbackRedirectListener.start { _, _ in getuid() }
        let callback = try #require(URL(string: listener.redirectURI.absoluteString + "?code=c&state=wrong"))
        let browser = Task { try await Self.get(callback) }
        _ = try await listener.nextRedirect()
        await listener.finish(.failed("state_mismatch: the redirect's state is not this sign-in's"))
        let page = try await browser.value
        let body = String(decoding: page.body, as: UTF8.self)
        #expect(page.status == 400)
        #expect(body.contains("state_mismatch"))
        #expect(!body.contains("Signed in"))
    }

    @Test("the socket table: a live IPv4 entry, an IPv4-mapped IPv6 entry, and an orphaned or TIME_WAIT one (uid 0, inode 0)")
    func tableParsing() {
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        // 127.0.0.1:40000 -> 127.0.0.1:8400, uid 1000, inode 4242.
        let live = header + "   0: 0100007F:9C40 0100007F:20D0 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 20 4 30 10 -1\n"
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40000), local: ("127.0.0.1", 8400), tables: [live]) == 1000)
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40001), local: ("127.0.0.1", 8400), tables: [live]) == nil)
        let mapped =
            header
            + "   0: 0000000000000000FFFF00000100007F:9C40 0000000000000000FFFF00000100007F:20D0 01 00000000:00000000 00:00000000 00000000  1001        0 4343 1\n"
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40000), local: ("127.0.0.1", 8400), tables: [mapped]) == 1001)
        let timeWait = header + "   0: 0100007F:9C40 0100007F:20D0 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0\n"
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40000), local: ("127.0.0.1", 8400), tables: [timeWait]) == nil)
    }
}
