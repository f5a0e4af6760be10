import DevGateway
import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultSession
@_spi(RawWrites) import VaultStore
import VaultSync
import VaultTestSupport

/// Sealed session export and import between two vault files (issue 18): the refresh token has
/// one holder at a time, and a blob is taken once, by its recipient, before it expires, unchanged.
@Suite("Session export and import", .timeLimit(.minutes(TestTimeScale.minutes(2))))
struct SessionTransferTests {
    /// A second vault file with its own key and a service on the harness's clocks and transport.
    struct Receiver {
        let store: TestVault
        let vault: Vault
        let service: SessionService

        init(_ h: SessionHarness) throws {
            store = try TestVault(.keyFile)
            vault = try store.create(clock: h.time.wallClock)
            service = SessionService(
                vault: vault, oauth: h.oauth, clock: h.time.clock, wallClock: h.time.wallClock,
                configuration: h.configuration, logger: store.logs.logger(label: "session.receiver"))
        }

        func close() async {
            await service.stop()
            vault.close()
        }
    }

    /// Exports with `request` and returns the blob that was delivered.
    static func export(_ service: SessionService, _ request: SessionExportRequest) async throws -> (String, SessionExportReport) {
        let delivered = Locked<String?>(nil)
        let report = try await service.exportSession(request) { blob in delivered.withLock { $0 = blob } }
        return (try #require(delivered.withLock { $0 }), report)
    }

    static func refusal(_ body: () async throws -> some Any) async -> SessionTransferError.Code? {
        do {
            _ = try await body()
            return nil
        } catch let error as SessionTransferError {
            return error.code
        } catch {
            Issue.record("expected a SessionTransferError, got \(type(of: error)): \(error)")
            return nil
        }
    }

    @Test("move: the importing vault refreshes with the grant; the exporting vault ends its session and sends no request")
    func moveHandsOverTheGrant() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            let original = try #require(try h.vault.sessions.current(for: alice))
            let b = try Receiver(h)
            let (blob, report) = try await Self.export(h.service, SessionExportRequest(recipient: try await b.service.recipient()))
            #expect(report.transfer.mode == .move, "the default with a refresh token")
            #expect(report.endedSession?.endReason == "exported")
            #expect(try h.vault.tokens.current(for: alice) == nil, "the exporting vault keeps no token")
            #expect(try h.vault.transfers.all().map(\.id) == [report.transfer.id])

            let imported = try await b.service.importSession(blob)
            #expect(imported.hasRefreshToken)
            #expect(imported.account.origin?.transfer == report.transfer.id)
            #expect(imported.session.absoluteDeadline == original.absoluteDeadline, "never outlives its original lifetime")
            #expect(imported.session.startedAt == original.startedAt)
            #expect(try b.vault.events.latest(limit: 10).contains { $0.kind == "session_imported" && $0.data["transfer"] == report.transfer.id })
            #expect(try h.vault.events.latest(limit: 10).contains { $0.kind == "session_exported" && $0.data["transfer"] == report.transfer.id })

            await h.time.advance(by: .seconds(60))
            let refreshed = try await b.service.validAccessToken()
            #expect(refreshed.value != (try h.firstTokens(of: "alice")).accessToken)
            await h.expectTokenRequests(1)
            #expect(
                h.transport.exchanges.compactMap(\.presentedRefreshToken) == [try h.firstTokens(of: "alice").refreshToken].compactMap { $0 },
                "the importing vault refreshed with the exported refresh token")

            guard case .expired(alice, .exported)? = await sessionError({ try await h.service.validAccessToken(for: alice) }) else {
                Issue.record("the exporting vault still serves the moved session")
                await b.close()
                return
            }
            await h.expectTokenRequests(1)
            await b.close()
        }
    }

    @Test("access only: the exporting vault keeps its grant and refreshes; the importing vault gets no refresh token")
    func accessOnlyKeepsTheGrant() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(600), policy: .tokensOnly)
            let b = try Receiver(h)
            let (blob, report) = try await Self.export(h.service, SessionExportRequest(recipient: try await b.service.recipient(), mode: .accessOnly))
            #expect(report.endedSession == nil)
            let imported = try await b.service.importSession(blob)
            #expect(!imported.hasRefreshToken)
            let stored = try #require(try b.vault.tokens.current(for: imported.account.id))
            #expect(stored.tokens.refreshToken == nil && stored.tokens.idToken == nil)
            #expect(try await b.service.validAccessToken().value == (try h.firstTokens(of: "alice")).accessToken)
            #expect(try b.vault.accounts.clientSecret(for: imported.account.id) == nil)

            await h.time.advance(by: .seconds(660))
            _ = try await h.service.validAccessToken(for: alice)
            await h.expectTokenRequests(1)
            guard case .expired(_, .tokenExpired)? = await sessionError({ try await b.service.validAccessToken() }) else {
                Issue.record("the importing vault served past the access token's expiry without a refresh token")
                await b.close()
                return
            }
            await h.expectTokenRequests(1)
            await b.close()
        }
    }

    @Test("refused, and nothing stored: a replay, an expired blob, another vault's blob, a locked session's export")
    func refusals() async throws {
        try await SessionHarness.run { h in
            let policy = SessionPolicy(idleTimeout: .seconds(3600), absoluteLifetime: .seconds(24 * 3600))
            let alice = try await h.signIn("alice", expiresIn: .seconds(7200), policy: policy)
            let b = try Receiver(h)
            let c = try Receiver(h)
            let toB = try await b.service.recipient()

            let (first, _) = try await Self.export(h.service, SessionExportRequest(recipient: toB, mode: .accessOnly))
            _ = try await b.service.importSession(first)
            #expect(await Self.refusal { try await b.service.importSession(first) } == .alreadyImported)

            let (late, _) = try await Self.export(h.service, SessionExportRequest(recipient: toB, mode: .accessOnly))
            let (elsewhere, _) = try await Self.export(h.service, SessionExportRequest(recipient: try await c.service.recipient(), mode: .accessOnly))
            #expect(await Self.refusal { try await b.service.importSession(elsewhere) } == .wrongRecipient)
            await h.time.advance(by: .seconds(601))
            #expect(await Self.refusal { try await b.service.importSession(late) } == .expired)
            #expect(try b.vault.transfers.all().count == 1, "only the first import is remembered")
            #expect(try b.vault.accounts.all().count == 1)

            // Locked by its idle timeout: no export until it is unlocked.
            await h.time.advance(by: .seconds(3600))
            #expect(try await h.service.status(of: alice) == .locked(.idleTimeout))
            guard case .locked? = await sessionError({ try await Self.export(h.service, SessionExportRequest(recipient: toB)) }) else {
                Issue.record("a locked session was exported")
                await b.close()
                await c.close()
                return
            }
            // The keys are dropped while locked: what is left is read without them.
            #expect(try h.vault.tokens.metadata(for: alice)?.hasRefreshToken == true, "the refused export changed nothing")
            #expect(try h.vault.sessions.current(for: alice)?.state == .locked)
            #expect(try h.vault.transfers.all().count == 3, "three exports recorded, the refused one not")
            await b.close()
            await c.close()
        }
    }

    @Test("every byte of the blob is covered: any change is refused and nothing is stored; the blob holds no token in clear")
    func tamperingAndConfidentiality() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice", expiresIn: .seconds(3600), policy: .tokensOnly)
            let b = try Receiver(h)
            let (blob, _) = try await Self.export(h.service, SessionExportRequest(recipient: try await b.service.recipient()))
            let issued = try h.firstTokens(of: "alice")
            let decoded = try #require(Self.base64URL(String(blob.dropFirst("cvsession1:".count))))
            for secret in [issued.accessToken, issued.refreshToken, issued.idToken].compactMap({ $0 }) {
                #expect(!blob.contains(secret))
                #expect(!Self.contains(decoded, Array(secret.utf8)), "a token is in the decoded blob")
            }

            let characters = Array(blob.utf8)
            var accepted: [Int] = []
            for index in characters.indices {
                var changed = characters
                // Another character of the same alphabet: still text that decodes, unless it is the prefix.
                changed[index] = changed[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
                if await Self.refusal({ try await b.service.importSession(String(decoding: changed, as: UTF8.self)) }) == nil {
                    accepted.append(index)
                }
            }
            #expect(accepted.isEmpty, "changes accepted at \(accepted)")
            #expect(try b.vault.accounts.all().isEmpty)
            #expect(try b.vault.transfers.all().isEmpty)
            // The blob itself was fine all along.
            _ = try await b.service.importSession(blob)
            #expect(try b.vault.accounts.all().count == 1)
            await b.close()
        }
    }

    @Test("a blob that cannot be written changes nothing: the session, the tokens and the lease stay")
    func failedDeliveryChangesNothing() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
            let b = try Receiver(h)
            struct Broken: Error {}
            await #expect(throws: Broken.self) {
                try await h.service.exportSession(SessionExportRequest(recipient: try await b.service.recipient())) { _ in throw Broken() }
            }
            #expect(try h.vault.sessions.current(for: alice)?.state == .active)
            #expect(try h.vault.leases.state(for: alice).leaseHolder == nil, "the export's lease was released")
            #expect(try h.vault.transfers.all().isEmpty)
            await h.time.advance(by: .seconds(60))
            _ = try await h.service.validAccessToken()
            await h.expectTokenRequests(1)
            await b.close()
        }
    }

    @Test("tokens replaced while the blob is written: the move is not finished, the vault keeps the new tokens, and says the blob must not be imported")
    func tokensChangedDuringDelivery() async throws {
        try await SessionHarness.run { h in
            let alice = try await h.signIn("alice", expiresIn: .seconds(3600), policy: .tokensOnly)
            let b = try Receiver(h)
            let other = try h.openAnotherVault()
            let replacement = Samples.tokens("replacement")
            do {
                try await h.service.exportSession(SessionExportRequest(recipient: try await b.service.recipient())) { _ in
                    // Another process stores tokens meanwhile (a sign-in ignores the lease).
                    let generation = try other.tokens(for: alice)?.generation
                    _ = try other.writeTokens(replacement, for: alice, replacing: generation)
                }
                Issue.record("the move finished although the tokens changed under it")
            } catch let error as SessionTransferError {
                #expect(error.code == .changed)
                #expect(error.message.contains("do not import it"))
            }
            #expect(try h.vault.tokens.current(for: alice)?.tokens.accessToken == replacement.accessToken)
            #expect(try h.vault.sessions.current(for: alice)?.state == .active)
            #expect(try h.vault.leases.state(for: alice).leaseHolder == nil)
            #expect(try h.vault.transfers.all().isEmpty)
            await b.close()
        }
    }

    @Test("a recipient key is checked: a typo is refused, and rotating the vault key gives a new one")
    func recipientKeys() async throws {
        try await SessionHarness.run { h in
            let recipient = try await h.service.recipient()
            #expect(try SessionRecipient(parsing: recipient.description + "\n") == recipient)
            var text = Array(recipient.description.utf8)
            text[10] = text[10] == UInt8(ascii: "x") ? UInt8(ascii: "y") : UInt8(ascii: "x")
            #expect(throws: SessionTransferError.self) { try SessionRecipient(parsing: String(decoding: text, as: UTF8.self)) }
            #expect(throws: SessionTransferError.self) { try SessionRecipient(parsing: "age1qqqq") }
            try h.vault.maintenance.rotateKeys(credential: h.store.credential)
            #expect(try await h.service.recipient() != recipient)
        }
    }

    @Test(
        "a blob is checked inside too: an existing account's endpoints are never replaced, times must add up, a deleted record does not reopen a replay, and a vault does not export to itself"
    )
    func craftedBlobsAndEditedFiles() async throws {
        try await SessionHarness.run { h in
            _ = try await h.signIn("alice", expiresIn: .seconds(3600), policy: .tokensOnly)
            let b = try Receiver(h)
            let toB = try await b.service.recipient()
            #expect(
                await Self.refusal { try await Self.export(h.service, SessionExportRequest(recipient: try await h.service.recipient())) }
                    == .wrongRecipient, "its own key")

            // B already has alice, with the gateway's endpoints; a blob naming another
            // revocation endpoint (anyone can seal to B's public key) is refused, not applied.
            let (genuine, _) = try await Self.export(h.service, SessionExportRequest(recipient: toB, mode: .accessOnly))
            let stored = try await b.service.importSession(genuine)
            let (second, _) = try await Self.export(h.service, SessionExportRequest(recipient: toB, mode: .accessOnly))
            let redirected = try Self.reseal(second, b) { payload in
                var account = payload["account"] as? [String: Any] ?? [:]
                account["revocation_endpoint"] = "https://attacker.example/revoke"
                payload["account"] = account
            }
            #expect(await Self.refusal { try await b.service.importSession(redirected) } == .conflict)
            #expect(try b.vault.accounts.find(stored.account.id)?.client.revocationEndpoint == h.gateway.revocationEndpoint)

            let (third, _) = try await Self.export(h.service, SessionExportRequest(recipient: toB, mode: .accessOnly))
            let future = try Self.reseal(third, b) { payload in
                let created = ((payload["created_at"] as? NSNumber)?.int64Value ?? 0) + 3_600_000
                payload["created_at"] = created
                payload["expires_at"] = created + 600_000
            }
            #expect(await Self.refusal { try await b.service.importSession(future) } == .malformed)
            let huge = try Self.reseal(third, b) { payload in payload["expires_at"] = Int64.max }
            #expect(await Self.refusal { try await b.service.importSession(huge) } == .malformed)

            // Someone who can edit B's file deletes the record of the genuine import.
            let editor = try DatabaseQueue(path: b.store.url.path)
            try await editor.write { try $0.execute(sql: "DELETE FROM session_transfers") }
            try editor.close()
            do {
                _ = try await b.service.importSession(genuine)
                Issue.record("a replay was taken after its record was deleted from the file")
            } catch let error as SessionError {
                guard case .vault(let vaultError) = error, vaultError.code == .damaged else {
                    Issue.record("expected damaged, got \(error)")
                    await b.close()
                    return
                }
            }
            await b.close()
        }
    }

    /// The blob opened with `receiver`'s key, its JSON changed by `edit`, sealed again to it.
    static func reseal(_ blob: String, _ receiver: Receiver, _ edit: (inout [String: Any]) -> Void) throws -> String {
        let bytes = try #require(base64URL(String(blob.dropFirst("cvsession1:".count))))
        let pair = try receiver.vault.transfers.recipientKey()
        defer { pair.wipe() }
        let json = try pair.open(Array(bytes[9...]))
        var payload = try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
        edit(&payload)
        let box = try RecipientKeyPair.seal([UInt8](try JSONSerialization.data(withJSONObject: payload)), to: pair.publicKey)
        let armored = Data(Array(bytes[0..<9]) + box).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "cvsession1:" + armored
    }

    static func base64URL(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
