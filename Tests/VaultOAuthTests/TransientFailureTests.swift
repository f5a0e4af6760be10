import DevGateway
import Foundation
import Logging
import Testing
import VaultOAuth

@Suite("Transient and malformed outcomes")
struct TransientFailureTests {
    @Test("a 503 is transient(server(503)) and the same token works on retry")
    func serviceUnavailable() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-cli")
            let token = try issued.requiredRefreshToken
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-cli")
            await gateway.failNextTokenRequests(with: TokenFault(status: 503))

            let error = await refreshFailure(client, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(error == .transient(.server(status: 503)))
            #expect(error?.isTransient == true)

            let retried = try await client.refresh(refreshToken: token, endpoint: gateway.tokenEndpoint, client: credentials)
            #expect(retried.refreshToken != nil)
            #expect(await gateway.tokenRequestCount() == 2)
            #expect(await gateway.reuseDetections() == 0)
        }
    }

    @Test("a 429 with Retry-After: 7 is rateLimited(retryAfter: 7 s)")
    func rateLimited() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "bob", clientID: "vault-cli")
            await gateway.failNextTokenRequests(with: TokenFault(status: 429, retryAfter: 7))
            let (client, _) = makeClient()
            let error = await refreshFailure(
                client, refreshToken: try issued.requiredRefreshToken, endpoint: gateway.tokenEndpoint, credentials: ClientCredentials(clientID: "vault-cli"))
            #expect(error == .transient(.rateLimited(retryAfter: .seconds(7))))
        }
    }

    @Test("a server slower than the transport timeout is transient(timeout); it may still rotate the token")
    func slowServerTimesOut() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "carol", clientID: "vault-cli")
            let token = try issued.requiredRefreshToken
            let credentials = ClientCredentials(clientID: "vault-cli")
            // The gateway answers only once released, so the client's timeout always comes
            // first, however slow the machine. 1.5 s: a fraction FoundationNetworking would
            // truncate (to 1 s, or for 0.3 s to an at-once failure that sends nothing).
            await gateway.holdTokenResponses()
            let (impatient, _) = makeClient(timeout: .milliseconds(1500))

            let error = await refreshFailure(impatient, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(error == .transient(.timeout))

            // The request did reach the server before the client gave up …
            let arrived = await gateway.waitForStats(upTo: scaled(.seconds(60))) { $0.tokenRequests >= 1 }
            try #require(arrived, "the timed-out request never reached the gateway")
            // … which finishes the refresh afterwards: the answer is lost and the presented token
            // is now spent, so presenting it again looks like reuse.
            await gateway.releaseTokenResponses()
            let answered = await gateway.waitForStats(upTo: scaled(.seconds(60))) { $0.tokenResponses >= 1 }
            try #require(answered, "the released request was never answered")
            let (client, _) = makeClient()
            let retry = await refreshFailure(client, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(retry?.isInvalidGrant == true)
            #expect(await gateway.reuseDetections() == 1)
            #expect(await gateway.tokenRequestCount() == 2)
        }
    }

    @Test("a sub-second transport timeout still sends the request before it gives up")
    func subSecondTimeoutSendsTheRequest() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "grace", clientID: "vault-cli")
            await gateway.holdTokenResponses()
            // FoundationNetworking truncates 0.3 s to an immediate timeout that usually fires
            // before anything is written; the transport rounds it up to a whole second.
            let (client, _) = makeClient(timeout: .milliseconds(300))
            let error = await refreshFailure(
                client, refreshToken: try issued.requiredRefreshToken, endpoint: gateway.tokenEndpoint, credentials: ClientCredentials(clientID: "vault-cli"))
            #expect(error == .transient(.timeout))
            #expect(await gateway.waitForStats(upTo: scaled(.seconds(60))) { $0.tokenRequests >= 1 })
        }
    }

    @Test("cancelling the caller's task mid-request is cancelled, not a retryable failure")
    func cancellationIsNotTransient() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "cancel", clientID: "vault-cli")
            let token = try issued.requiredRefreshToken
            await gateway.holdTokenResponses()
            let (client, _) = makeClient()
            let endpoint = gateway.tokenEndpoint

            let refresh = Task {
                await refreshFailure(client, refreshToken: token, endpoint: endpoint, credentials: ClientCredentials(clientID: "vault-cli"))
            }
            let arrived = await gateway.waitForStats(upTo: scaled(.seconds(60))) { $0.tokenRequests >= 1 }
            refresh.cancel()
            try #require(arrived, "the request never reached the gateway")
            let error = await refresh.value
            #expect(error == .cancelled)
            #expect(error?.isTransient == false)
        }
    }

    @Test("nothing listening (a stopped gateway) is transient(network)")
    func connectionRefused() async throws {
        let gateway = try await DevGateway.start(logger: .init(label: "test.gateway") { _ in SwiftLogNoOpLogHandler() })
        let issued = await gateway.issueGrant(subject: "dave", clientID: "vault-cli")
        await gateway.stop()
        let (client, _) = makeClient()

        let error = await refreshFailure(
            client, refreshToken: try issued.requiredRefreshToken, endpoint: gateway.tokenEndpoint, credentials: ClientCredentials(clientID: "vault-cli"))
        guard case .transient(.network)? = error else {
            Issue.record("expected transient(network), got \(String(describing: error))")
            return
        }
    }

    @Test("a 200 whose body is not a token response, and a 400 without a JSON error, are malformed")
    func malformedResponses() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "erin", clientID: "vault-cli")
            let token = try issued.requiredRefreshToken
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-cli")
            await gateway.failNextTokenRequests(with: TokenFault(status: 200, body: "<html>welcome</html>"))
            await gateway.failNextTokenRequests(with: TokenFault(status: 400))

            let garbage = await refreshFailure(client, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            #expect(garbage == .malformedResponse(status: 200, reason: "token response body is not a JSON object"))
            let plainError = await refreshFailure(client, refreshToken: token, endpoint: gateway.tokenEndpoint, credentials: credentials)
            guard case .malformedResponse(status: 400, _)? = plainError else {
                Issue.record("expected malformedResponse(400), got \(String(describing: plainError))")
                return
            }
        }
    }

    @Test("an injected invalid_grant at 401 is still invalid_grant")
    func invalidGrantAt401() async throws {
        try await withGateway { gateway in
            let issued = await gateway.issueGrant(subject: "frank", clientID: "vault-cli")
            await gateway.failNextTokenRequests(with: TokenFault(status: 401, error: "invalid_grant"))
            let (client, _) = makeClient()
            let error = await refreshFailure(
                client, refreshToken: try issued.requiredRefreshToken, endpoint: gateway.tokenEndpoint, credentials: ClientCredentials(clientID: "vault-cli"))
            #expect(error?.isInvalidGrant == true)
        }
    }
}
