import Foundation
import Logging
import Testing
import VaultOAuth
import VaultTestSupport
import VaultURLSession

/// Issue 12, part 2: a token endpoint that answers one byte every 1.5 s never trips an idle
/// timeout. Every request has a total deadline, measured on an injected clock: the test moves
/// that clock, the server trickles in real time, and nothing in the test sleeps.
@Suite("A total deadline on every request", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct DeadlineTests {
    enum Transport: String, CaseIterable, Sendable {
        case urlSession, nio

        /// A transport whose own timeout (idle for URLSession, total for NIO) lies far beyond the test.
        func make() -> any HTTPTransport {
            switch self {
            case .urlSession: URLSessionTransport(timeout: .seconds(600))
            case .nio: NIOTransport(timeout: .seconds(600))
            }
        }
    }

    static let body = #"{"access_token":"access-too-late","token_type":"Bearer","expires_in":3600}"#
    static let quiet = Logger(label: "test.deadline") { _ in SwiftLogNoOpLogHandler() }

    @Test(
        "a refresh answered one byte every 1.5 s is cut off at the deadline, as a transient timeout, its connection closed",
        arguments: Transport.allCases)
    func tricklingTokenEndpointIsCutOff(_ kind: Transport) async throws {
        try await withServer(nil, answer: .trickle(Self.body, every: .milliseconds(1500))) { server in
            let time = TestTime()
            let client = OAuthClient(transport: kind.make(), logger: Self.quiet, requestDeadline: .seconds(30), clock: time.clock)
            let refresh = Task { () -> RefreshError? in
                do throws(RefreshError) {
                    _ = try await client.refresh(
                        refreshToken: "refresh-trickled", endpoint: server.url("/oauth/token"),
                        client: ClientCredentials(clientID: "vault-cli"))
                    return nil
                } catch {
                    return error
                }
            }
            // The server has the whole request and is answering: the request is in flight.
            #expect(await server.wait { $0.requests.count == 1 })
            // 29 s: still in flight (the deadline's sleeper is the only one on the clock).
            #expect(await time.advanceWhenSleeping(by: .seconds(29)))
            #expect(server.log.value.closedConnections == 0)
            // 30 s: cut off.
            await time.advance(by: .seconds(1))
            let error = await refresh.value
            #expect(error == .transient(.timeout))
            #expect(await server.wait { $0.closedConnections == 1 }, "the request outlived its deadline")
            #expect(server.log.value.bodyBytesSent < Self.body.utf8.count)
        }
    }

    @Test("a revocation has the same deadline", arguments: Transport.allCases)
    func silentRevocationEndpointIsCutOff(_ kind: Transport) async throws {
        try await withServer(nil, answer: .silence) { server in
            let time = TestTime()
            let client = OAuthClient(transport: kind.make(), logger: Self.quiet, requestDeadline: .seconds(30), clock: time.clock)
            let revocation = Task { () -> RevocationError? in
                do throws(RevocationError) {
                    try await client.revoke(
                        token: "refresh-revoked-late", hint: .refreshToken, endpoint: server.url("/oauth/revoke"),
                        client: ClientCredentials(clientID: "vault-cli"))
                    return nil
                } catch {
                    return error
                }
            }
            #expect(await server.wait { $0.requests.count == 1 })
            #expect(await time.advanceWhenSleeping(by: .seconds(30)))
            #expect(await revocation.value == .transient(.timeout))
            #expect(await server.wait { $0.closedConnections == 1 })
        }
    }

    @Test("a call's own deadline wins over the client's")
    func perCallDeadline() async throws {
        try await withServer(nil, answer: .silence) { server in
            let time = TestTime()
            let client = OAuthClient(
                transport: NIOTransport(timeout: .seconds(600)), logger: Self.quiet,
                requestDeadline: .seconds(30), clock: time.clock)
            let refresh = Task { () -> RefreshError? in
                do throws(RefreshError) {
                    _ = try await client.refresh(
                        refreshToken: "refresh-short-deadline", endpoint: server.url("/oauth/token"),
                        client: ClientCredentials(clientID: "vault-cli"), deadline: .seconds(5))
                    return nil
                } catch {
                    return error
                }
            }
            #expect(await server.wait { $0.requests.count == 1 })
            #expect(await time.advanceWhenSleeping(by: .seconds(5)))
            #expect(await refresh.value == .transient(.timeout))
        }
    }

    @Test("NIOTransport's own timeout is total too: a trickle at 20 ms per byte does not keep a 300 ms request alive")
    func nioTimeoutIsTotal() async throws {
        let body = String(repeating: " ", count: 400) + Self.body  // 8 s at 20 ms a byte
        // The trickle stretches with TEST_TIME_SCALE (a sanitizer slows the client's wake-up at
        // its deadline too); the 300 ms deadline it must outlast does not.
        try await withServer(nil, answer: .trickle(body, every: TestTimeScale.scaled(.milliseconds(20)))) { server in
            let transport = NIOTransport(timeout: .milliseconds(300))
            await #expect(throws: TransportError.timedOut) {
                _ = try await transport.send(HTTPRequest(method: .post, url: server.url("/oauth/token"), body: Data("x=1".utf8)))
            }
            #expect(await server.wait { $0.closedConnections == 1 })
            #expect(server.log.value.bodyBytesSent < body.utf8.count)
        }
    }
}
