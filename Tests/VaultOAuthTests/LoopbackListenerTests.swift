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

    @Test("a connection over [::1] is found in the kernel's IPv6 socket table as this uid's")
    func realOwnerLookupIPv6() async throws {
        let seen = Locked<uid_t?>(nil)
        let listener = try await LoopbackRedirectListener.start(redirect: try LoopbackRedirect(parsing: "http://[::1]/cb")) { peer, local in
            let owner = LoopbackPeer.owner(peer: peer, local: local)
            seen.withLock { $0 = owner }
            return owner
        }
        let port = try #require(listener.redirectURI.port)
        #expect(try await Self.get(try #require(URL(string: "http://[::1]:\(port)/elsewhere"))).status == 404)
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

    @Test("the default redirect URI is the registered http://127.0.0.1/callback at a run-time port; other paths get 404")
    func defaultRedirectIsTheRegisteredOne() async throws {
        let listener = try await LoopbackRedirectListener.start { _, _ in getuid() }
        let uri = listener.redirectURI.absoluteString
        #expect(uri.wholeMatch(of: /http:\/\/127\.0\.0\.1:[0-9]+\/callback/) != nil, "\(uri)")
        let port = try #require(listener.redirectURI.port)
        #expect(try await Self.get(try #require(URL(string: "http://127.0.0.1:\(port)/callback/x?code=c"))).status == 404)
        let browser = Task { try await Self.get(try #require(URL(string: uri + "?code=c&state=s"))) }
        #expect(try await listener.nextRedirect().first { $0.name == "code" }?.value == "c")
        await listener.finish(.signedIn)
        #expect(try await browser.value.status == 200)
    }

    @Test("localhost listens on 127.0.0.1 and [::1] at one port: a browser resolving either comes back")
    func localhostListensOnBothFamilies() async throws {
        let listener = try await LoopbackRedirectListener.start(redirect: try LoopbackRedirect(parsing: "http://localhost/oauth/done")) { _, _ in
            getuid()
        }
        let port = try #require(listener.redirectURI.port)
        #expect(listener.redirectURI.absoluteString == "http://localhost:\(port)/oauth/done")
        #expect(try await Self.get(try #require(URL(string: "http://127.0.0.1:\(port)/elsewhere"))).status == 404, "IPv4 is listened on")
        let browser = Task { try await Self.get(try #require(URL(string: "http://[::1]:\(port)/oauth/done?code=v6&state=s"))) }
        #expect(try await listener.nextRedirect().first { $0.name == "code" }?.value == "v6")
        await listener.finish(.signedIn)
        #expect(try await browser.value.status == 200)
    }

    @Test("a registered port is used exactly; when either localhost address has it, the sign-in fails naming it and holds nothing")
    func fixedPortTaken() async throws {
        let holder = try await LoopbackRedirectListener.start(redirect: try LoopbackRedirect(parsing: "http://[::1]/cb")) { _, _ in getuid() }
        let port = try #require(holder.redirectURI.port)
        await #expect {
            _ = try await LoopbackRedirectListener.start(redirect: try LoopbackRedirect(parsing: "http://localhost:\(port)/cb")) { _, _ in getuid() }
        } throws: { error in
            guard case .listenerFailed(let reason)? = error as? SignInError else { return false }
            return reason.contains("[::1]:\(port)") && reason.contains("in use")
        }
        // All or none: 127.0.0.1 at that port was let go again. (Another test's connection may
        // hold 127.0.0.1 at the same number meanwhile; a listener that kept it would fail every
        // round, so three rounds with fresh ports tell the two apart.)
        await holder.close()
        var released = false
        for round in 0..<3 where !released {
            let next = round == 0 ? port : try #require(try await Self.refusedLocalhostPort())
            if let fixed = try? await LoopbackRedirectListener.start(
                redirect: try LoopbackRedirect(parsing: "http://127.0.0.1:\(next)/cb"), owner: { _, _ in getuid() })
            {
                released = fixed.redirectURI.absoluteString == "http://127.0.0.1:\(next)/cb"
                await fixed.close()
            }
        }
        #expect(released, "a refused localhost listener let 127.0.0.1 go again")
    }

    /// A port whose localhost listener was just refused because [::1] at it is taken (by a holder
    /// closed before returning), or nil when the refusal did not come.
    static func refusedLocalhostPort() async throws -> Int? {
        let holder = try await LoopbackRedirectListener.start(redirect: try LoopbackRedirect(parsing: "http://[::1]/cb")) { _, _ in getuid() }
        guard let port = holder.redirectURI.port else {
            await holder.close()
            return nil
        }
        let refused: Bool
        do {
            let unexpected = try await LoopbackRedirectListener.start(redirect: try LoopbackRedirect(parsing: "http://localhost:\(port)/cb")) { _, _ in
                getuid()
            }
            await unexpected.close()
            refused = false
        } catch {
            refused = true
        }
        await holder.close()
        return refused ? port : nil
    }

    @Test(
        "redirect URIs: loopback http only, path kept, port optional",
        arguments: [
            ("http://127.0.0.1/callback", "http://127.0.0.1/callback"), ("http://127.0.0.1:8400/cb", "http://127.0.0.1:8400/cb"),
            ("http://[::1]/cb", "http://[::1]/cb"), ("http://LOCALHOST:9/", "http://localhost:9/"), ("http://localhost", "http://localhost/"),
        ])
    func redirectURIsAccepted(given: String, registered: String) throws {
        #expect(try LoopbackRedirect(parsing: given).description == registered)
    }

    @Test(
        "redirect URIs that could leave this machine or hide a second meaning are refused",
        arguments: [
            "https://127.0.0.1/cb", "http://example.com/cb", "http://127.0.0.2/cb", "http://localhost.example.com/cb",
            "http://user@127.0.0.1/cb", "http://127.0.0.1/cb?x=1", "http://127.0.0.1/cb#f", "http://127.0.0.1:0/cb", "com.example.app:/cb",
            "not a url",
        ])
    func redirectURIsRefused(given: String) {
        #expect(throws: SignInError.self) { try LoopbackRedirect(parsing: given) }
    }

    @Test("the well-known path takes only this sign-in's answer: another state gets 400 and the sign-in waits on; after the end, 410")
    func onlyThisSignInsState() async throws {
        let listener = try await LoopbackRedirectListener.start { _, _ in getuid() }
        _ = listener.opener(for: try #require(URL(string: "https://id.example.com/authorize?client_id=c&state=ours-123")))
        let uri = listener.redirectURI.absoluteString
        #expect(try await Self.get(try #require(URL(string: uri + "?code=theirs&state=theirs"))).status == 400)
        #expect(try await Self.get(try #require(URL(string: uri + "?error=access_denied"))).status == 400, "no state: not ours either")
        let browser = Task { try await Self.get(try #require(URL(string: uri + "?code=ours&state=ours-123"))) }
        #expect(try await listener.nextRedirect().first { $0.name == "code" }?.value == "ours")
        await listener.finish(.signedIn)
        #expect(try await browser.value.status == 200)
    }

    @Test("the socket table: a live IPv4 entry, an IPv4-mapped IPv6 entry, a [::1] entry, an orphaned or TIME_WAIT one (uid 0, inode 0), one printed twice")
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
        let loopback6 =
            header
            + "   0: 00000000000000000000000001000000:9C40 00000000000000000000000001000000:20D0 01 00000000:00000000 00:00000000 00000000  1002        0 4444 1\n"
        #expect(LoopbackPeer.owner(peer: ("::1", 40000), local: ("::1", 8400), tables: [loopback6]) == 1002)
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40000), local: ("127.0.0.1", 8400), tables: [loopback6]) == nil)
        let timeWait = header + "   0: 0100007F:9C40 0100007F:20D0 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0\n"
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40000), local: ("127.0.0.1", 8400), tables: [timeWait]) == nil)
        // The kernel prints a page at a time: a socket shifted across a page boundary by another
        // one closing is printed twice. Still one socket; two sockets on one address pair are not.
        let printedTwice = live + live.dropFirst(header.count)
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40000), local: ("127.0.0.1", 8400), tables: [printedTwice]) == 1000)
        let twoSockets = live + live.dropFirst(header.count).replacingOccurrences(of: " 4242 ", with: " 4243 ")
        #expect(LoopbackPeer.owner(peer: ("127.0.0.1", 40000), local: ("127.0.0.1", 8400), tables: [twoSockets]) == nil)
    }
}
