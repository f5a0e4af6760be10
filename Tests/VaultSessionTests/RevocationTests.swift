import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// `invalid_grant` on refresh ends the session everywhere: this process, other instances
/// on the same file, and other processes, without anyone asking the server again.
@Suite("Revocation", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct RevocationTests {
    @Test("invalid_grant: revoked and expired(revoked) events, SessionError.revoked, tokens wiped")
    func revokedGrantEndsTheSession() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            #expect(await h.gateway.revokeGrants(subject: "alice") == 1)

            let mark = h.events.mark
            let error = await sessionError { try await h.service.validAccessToken() }
            guard case .revoked(alice, _) = error else {
                Issue.record("expected revoked(\(alice)), got \(String(describing: error))")
                return
            }
            await h.expectTokenRequests(1)
            #expect(await h.events.next(after: mark) { $0.isRevoked } != nil)
            #expect(await h.events.next(after: mark) { $0 == .stateChanged(alice, .expired(.revoked)) } != nil)
            #expect(try h.vault.tokens.current(for: alice) == nil)
            #expect(try h.vault.tokens.metadata(for: alice) == nil, "no token row is left, sealed or not")
            #expect(try await h.service.status(of: alice) == .expired(.revoked))

            // Asking again: the same answer, no request.
            guard case .revoked(alice, _) = await sessionError({ try await h.service.validAccessToken() }) else {
                Issue.record("a second call after revocation was not refused as revoked")
                return
            }
            await h.expectTokenRequests(1)
            h.expectNoTokenInLogs()
        }
    }

    @Test("another instance on the same file sees the revocation without sending a request")
    func anotherInstanceSeesTheRevocation() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            _ = await h.gateway.revokeGrants(subject: "alice")
            _ = await sessionError { try await h.service.validAccessToken() }
            await h.expectTokenRequests(1)

            let other = h.makeService(on: try h.openAnotherVault())
            let error = await sessionError { try await other.validAccessToken() }
            guard case .revoked(alice, _) = error else {
                Issue.record("expected revoked(\(alice)) in the other instance, got \(String(describing: error))")
                return
            }
            #expect(try await other.status() == .expired(.revoked))
            await h.expectTokenRequests(1)
            h.expectNoTokenInLogs()
        }
    }

    @Test("another process sees the revocation without sending a request")
    func anotherProcessSeesTheRevocation() async throws {
        try await SessionHarness.run { h in
            try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            _ = await h.gateway.revokeGrants(subject: "alice")
            _ = await sessionError { try await h.service.validAccessToken() }

            let probe = try h.probe("tokens", "3")
            try #require(await probe.waitUntilReady())
            probe.go()
            #expect(try await probe.results() == Array(repeating: "error revoked", count: 3))
            await h.expectTokenRequests(1)
        }
    }

    @Test(
        "a forced logout says why where the provider documents it (Entra's AADSTS codes, simulated by the gateway); a plain invalid_grant says no reason was given",
        arguments: [ForcedLogout?.none] + ForcedLogout.allCases.map(Optional.some))
    func forcedLogoutSaysWhy(_ logout: ForcedLogout?) async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            #expect(await h.gateway.revokeGrants(subject: "alice", as: logout) == 1)
            let expected: ForcedLogoutReason =
                switch logout {
                case nil: .unspecified
                case .administrator: .revoked
                case .passwordChanged: .passwordChanged
                case .inactivity: .inactivity
                }
            let error = try #require(await sessionError { try await h.service.validAccessToken() })
            #expect(error.forcedLogoutReason == expected)
            #expect(error.description.contains(expected.explanation), "\(error)")
            #expect(try await h.service.status(of: alice) == .expired(.revoked))
            // Asked again later (another process): the same reason, from the vault.
            let again = try #require(await sessionError { try await h.makeService(on: try h.openAnotherVault()).validAccessToken() })
            #expect(again.forcedLogoutReason == expected, "\(again)")
            let logged = try h.vault.events.list(account: alice).filter { $0.kind == "revoked" }
            #expect(logged.count == 1 && logged.first?.data["reason"] == expected.rawValue, "\(logged)")
            await h.expectTokenRequests(1)
        }
    }

    @Test("only Entra's documented form `AADSTSnnnn:` at the start gives a reason")
    func entraCodes() {
        let cases: [(String?, ForcedLogoutReason)] = [
            ("AADSTS70008: The refresh token has expired due to inactivity.", .inactivity),
            ("AADSTS700082: The refresh token has expired due to inactivity.", .inactivity),
            ("AADSTS50173: The provided grant has expired due to it being revoked.", .revoked),
            ("AADSTS50133: Session is invalid due to expiration or recent password change.", .passwordChanged),
            ("AADSTS50133 Session is invalid", .unspecified),  // no colon
            ("the grant has been revoked (AADSTS50133: quoted)", .unspecified),  // not at the start
            ("AADSTS99999: something else", .unspecified),
            ("AADSTS: no code", .unspecified),
            (nil, .unspecified),
        ]
        for (description, reason) in cases {
            #expect(ForcedLogoutReason(refusal: description) == reason, "\(description ?? "nil")")
        }
    }
}
