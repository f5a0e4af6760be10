import Foundation
import Logging
import Testing
import VaultOAuth
import VaultTestSupport
import VaultURLSession

/// Issue 12, part 3: with pins, a request goes only to a server whose validated chain holds one
/// of them; otherwise not a byte of it is sent and the failure says "pinning".
@Suite("SPKI pinning on the NIO transport", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct PinningTests {
    static let tokenAnswer = #"{"access_token":"access-after-pinned-refresh","token_type":"Bearer","expires_in":3600}"#
    static let credentials = ClientCredentials(clientID: "vault-cli")

    enum ChainMember: String, CaseIterable, Sendable {
        case leaf, intermediate, root
    }

    @Test("a pin of the leaf, the intermediate or the root lets the refresh through, once", arguments: ChainMember.allCases)
    func matchingPinSucceeds(_ member: ChainMember) async throws {
        let chain = try TestChain()
        let pin =
            switch member {
            case .leaf: chain.leaf.pin
            case .intermediate: chain.intermediate.pin
            case .root: chain.root.pin
            }
        try await withServer(chain, answer: .json(200, Self.tokenAnswer)) { server in
            let client = try Self.client(trusting: chain)
            let tokens = try await client.refresh(
                refreshToken: "refresh-pinned-1", endpoint: server.url("/oauth/token"),
                client: Self.credentials, pins: [try SPKIPin(pin)])
            #expect(tokens.accessToken == "access-after-pinned-refresh")
            let requests = server.log.value.requests
            #expect(requests.count == 1)
            #expect(requests.first?.target == "/oauth/token")
            #expect(requests.first?.body.contains("grant_type=refresh_token") == true)
        }
    }

    @Test("a wrong pin: the server gets a TLS connection but not one byte of a request, and the failure is pinning")
    func wrongPinSendsNothing() async throws {
        let chain = try TestChain()
        try await withServer(chain, answer: .json(200, Self.tokenAnswer)) { server in
            let client = try Self.client(trusting: chain)
            let endpoint = server.url("/oauth/token")
            let pins = [try SPKIPin(TestChain.unrelatedPin)]
            do throws(RefreshError) {
                _ = try await client.refresh(refreshToken: "refresh-never-sent", endpoint: endpoint, client: Self.credentials, pins: pins)
                Issue.record("the refresh went through a wrong pin")
            } catch {
                guard case .pinningFailed(let host, let reason) = error else {
                    Issue.record("expected a pinning failure, got \(error)")
                    return
                }
                #expect(host == "127.0.0.1:\(server.port)")
                #expect(reason.contains("holds none"), "\(reason)")
                #expect(!error.isTransient)
            }
            do throws(RevocationError) {
                try await client.revoke(
                    token: "refresh-never-sent", hint: .refreshToken, endpoint: endpoint,
                    client: Self.credentials, pins: pins)
                Issue.record("the revocation went through a wrong pin")
            } catch {
                guard case .pinningFailed = error else {
                    Issue.record("expected a pinning failure, got \(error)")
                    return
                }
            }
            // Both attempts reached the TCP listener: the refusal was in the handshake, not before it.
            #expect(await server.wait { $0.connections == 2 && $0.closedConnections == 2 })
            let log = server.log.value
            #expect(log.handshakes == 0)
            #expect(log.applicationBytes == 0, "no header, no body")
            #expect(log.requests.isEmpty)
        }
    }

    @Test("two pins, the current key and the next: the server's key rollover needs no change on the client")
    func twoPinsAllowRollover() async throws {
        let before = try TestChain()
        let after = try before.withNewLeafKey()
        let pins = try SPKIPin.parse([before.leaf.pin, after.leaf.pin])
        for chain in [before, after] {
            try await withServer(chain, answer: .json(200, Self.tokenAnswer)) { server in
                let tokens = try await Self.client(trusting: chain).refresh(
                    refreshToken: "refresh-rollover", endpoint: server.url("/oauth/token"), client: Self.credentials, pins: pins)
                #expect(tokens.accessToken == "access-after-pinned-refresh")
            }
        }
        // Only the old pin left: the new key is refused.
        try await withServer(after, answer: .json(200, Self.tokenAnswer)) { server in
            let error = await pinnedRefreshFailure(try Self.client(trusting: after), server: server, pins: [try SPKIPin(before.leaf.pin)])
            #expect(error?.isPinningFailure == true, "\(String(describing: error))")
            #expect(server.log.value.applicationBytes == 0)
        }
    }

    @Test("a pinned certificate presented beside a leaf it did not sign proves nothing")
    func pinnedIntermediateRidingAlongIsRefused() async throws {
        let genuine = try TestChain()
        let impostor = genuine.impostorLeaf(with: try TestChain())
        try await withServer(impostor, answer: .json(200, Self.tokenAnswer)) { server in
            let error = await pinnedRefreshFailure(
                try Self.client(trusting: genuine), server: server,
                pins: [try SPKIPin(genuine.intermediate.pin)])
            guard case .pinningFailed(_, let reason)? = error else {
                Issue.record("expected a pinning failure, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("does not validate"), "\(reason)")
            #expect(server.log.value.applicationBytes == 0)
        }
    }

    @Test("the right pin on a chain that leads to no trusted root is still refused (pins add to the trust check)")
    func rightPinUntrustedRootIsRefused() async throws {
        let chain = try TestChain()
        try await withServer(chain, answer: .json(200, Self.tokenAnswer)) { server in
            // Trusting only another test root: the server's chain validates to nothing.
            let error = await pinnedRefreshFailure(
                try Self.client(trusting: try TestChain()), server: server,
                pins: [try SPKIPin(chain.leaf.pin)])
            #expect(error?.isPinningFailure == true, "\(String(describing: error))")
            #expect(server.log.value.applicationBytes == 0)
        }
    }

    @Test("pins with a plain-http endpoint are refused before any connection")
    func pinsNeedHTTPS() async throws {
        try await withServer(nil, answer: .json(200, Self.tokenAnswer)) { server in
            let client = OAuthClient(transport: NIOTransport(), logger: Self.quiet)
            let error = await pinnedRefreshFailure(client, server: server, pins: [try SPKIPin(TestChain.unrelatedPin)])
            guard case .pinningFailed(_, let reason)? = error else {
                Issue.record("expected a pinning failure, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("https"))
            #expect(server.log.value.connections == 0)
        }
    }

    @Test("a transport that cannot see the chain refuses a pinned request instead of sending it unchecked")
    func urlSessionRefusesPinnedRequests() async throws {
        let chain = try TestChain()
        try await withServer(chain, answer: .json(200, Self.tokenAnswer)) { server in
            let client = OAuthClient(transport: URLSessionTransport(), logger: Self.quiet)
            let error = await pinnedRefreshFailure(client, server: server, pins: [try SPKIPin(chain.leaf.pin)])
            #expect(error?.isPinningFailure == true, "\(String(describing: error))")
            #expect(server.log.value.connections == 0)
        }
    }

    @Test("without pins the NIO transport checks the chain as usual: a trusted chain passes, another is a network failure")
    func unpinnedRequestsGetStandardVerification() async throws {
        let chain = try TestChain()
        try await withServer(chain, answer: .json(200, Self.tokenAnswer)) { server in
            let trusted = try await Self.client(trusting: chain).refresh(
                refreshToken: "refresh-unpinned", endpoint: server.url("/oauth/token"), client: Self.credentials)
            #expect(trusted.accessToken == "access-after-pinned-refresh")

            let stranger = try Self.client(trusting: try TestChain())
            let error = await pinnedRefreshFailure(stranger, server: server, pins: [])
            guard case .transient(.network)? = error else {
                Issue.record("expected a network failure, got \(String(describing: error))")
                return
            }
            #expect(server.log.value.requests.count == 1, "only the trusted attempt got through")
        }
    }

    // MARK: - Helpers

    static let quiet = Logger(label: "test.pinning") { _ in SwiftLogNoOpLogHandler() }

    /// The transport's bound is generous: only a broken exchange should reach it. Under
    /// ThreadSanitizer the whole suite's first minute is CPU-bound on 2 cores (every suite starts
    /// at once, BoringSSL instrumented), and a 60 s bound there failed every TLS case of this
    /// suite while each passes alone in under a second.
    static func client(trusting chain: TestChain) throws -> OAuthClient {
        let transport = NIOTransport(
            timeout: TestTimeScale.scaled(.seconds(30)),
            trustRoots: try NIOTransport.TrustRoots(derCertificates: [chain.root.der]))
        return OAuthClient(transport: transport, logger: quiet, requestDeadline: TestTimeScale.scaled(.seconds(30)))
    }
}

/// Runs `body` against a loopback server presenting `chain` (plain http when nil), then stops it.
func withServer(
    _ chain: TestChain?, answer: LoopbackServer.Answer,
    _ body: (LoopbackServer) async throws -> Void
) async throws {
    let server = try await LoopbackServer.start(tls: chain?.serverIdentity, answer: answer)
    do {
        try await body(server)
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
}

/// A pinned refresh that must fail; its error.
func pinnedRefreshFailure(
    _ client: OAuthClient, server: LoopbackServer, pins: [SPKIPin],
    sourceLocation: SourceLocation = #_sourceLocation
) async -> RefreshError? {
    do throws(RefreshError) {
        _ = try await client.refresh(
            refreshToken: "refresh-never-sent", endpoint: server.url("/oauth/token"),
            client: PinningTests.credentials, pins: pins)
        Issue.record("the refresh unexpectedly succeeded", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

extension RefreshError {
    var isPinningFailure: Bool {
        if case .pinningFailed = self { return true }
        return false
    }
}
