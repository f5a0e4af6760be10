import Foundation
import Testing

@testable import VaultOAuth

/// Issue 12, part 2: plain http only to this machine by loopback literal or exactly
/// `localhost`, never by a name that merely starts like one; never with user information.
@Suite("Where a credential may be sent")
struct EndpointRuleTests {
    static let acceptedURLs = [
        "https://id.example.com/oauth/token", "https://127.evil.example/token", "https://localhost.example/token",
        "http://127.0.0.1:8080/token", "http://127.255.0.9/token", "http://localhost:9000/token", "http://LOCALHOST/token",
        "http://[::1]:8443/token",
    ]
    static let refusedURLs = [
        // Names that only look like this machine: a resolver may send them anywhere.
        "http://127.evil.example/token", "http://127.0.0.1.nip.io/token", "http://localhost.example/token",
        "http://localhost./token", "http://127.0.0.1.evil.example/token",
        // Numbers in forms other than the canonical dotted quad, which some resolvers still take.
        "http://0x7f.1/token", "http://127.1/token", "http://2130706433/token", "http://0177.0.0.1/token",
        // Other hosts, and addresses of this machine that are not loopback.
        "http://id.example.com/token", "http://10.0.0.1/token", "http://[::ffff:127.0.0.1]/token", "http://[::2]/token",
        // User information hides the host a credential reaches.
        "http://127.0.0.1@evil.example/token", "https://user:pw@id.example.com/token", "http://user@127.0.0.1/token",
        // Not http at all.
        "ftp://127.0.0.1/token", "file:///etc/passwd", "/oauth/token",
    ]

    @Test("accepted: https anywhere, plain http to a loopback literal or localhost", arguments: acceptedURLs)
    func accepted(_ text: String) throws {
        let url = try #require(URL(string: text))
        #expect(EndpointRule.violation(url) == nil)
    }

    @Test("refused, with the rule named", arguments: refusedURLs)
    func refused(_ text: String) throws {
        guard let url = URL(string: text) else { return }  // not even a URL: refused before this rule
        let reason = try #require(EndpointRule.violation(url), "\(text) was accepted")
        #expect(!reason.isEmpty)
    }

    @Test("a refresh or revocation to a refused endpoint sends nothing and says why", arguments: refusedURLs.prefix(6))
    func nothingIsSent(_ text: String) async throws {
        let url = try #require(URL(string: text))
        let (client, transport) = makeClient()
        do {
            _ = try await client.refresh(refreshToken: "refresh-never-sent", endpoint: url, client: ClientCredentials(clientID: "cli"))
            Issue.record("the refresh was sent")
        } catch {
            guard case .clientMisconfigured(let code, let description) = error else {
                Issue.record("expected a refused endpoint, got \(error)")
                return
            }
            #expect(code == "insecure_endpoint")
            #expect(description?.contains("refused") == true)
        }
        await #expect(throws: RevocationError.self) {
            try await client.revoke(token: "refresh-never-sent", hint: .refreshToken, endpoint: url, client: ClientCredentials(clientID: "cli"))
        }
        #expect(transport.requests.isEmpty)
    }
}
