import DevGateway
import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// The server's `Retry-After` (RFC 9110 §10.2.3), in seconds or as an HTTP date, on a 429 or a
/// 503: no refresh request before it, the next one after it, never longer than the back-off cap.
@Suite("Retry-After from the identity service", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct RetryAfterTests {
    /// An IMF-fixdate, as a server sends it.
    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    /// Signs alice in with a token valid for 30 s (so the first call wants a refresh), answers
    /// that refresh with `fault`, and returns when the vault will try again.
    static func retryAt(after fault: TokenFault, _ h: SessionHarness) async throws -> Date {
        try await h.signIn("alice", expiresIn: .seconds(30), policy: .tokensOnly)
        await h.gateway.failNextTokenRequests(1, with: fault)
        let mark = h.events.mark
        _ = try await h.service.validAccessToken()
        await h.expectTokenRequests(1)
        let failure = try #require(await h.events.next(after: mark) { $0.refreshFailure != nil }?.refreshFailure)
        return try #require(failure.retryAt)
    }

    /// No request until `retryAt` (the token has expired by then: the caller is told when to
    /// come back), a successful refresh just after it.
    static func expectNothingUntil(_ retryAt: Date, _ h: SessionHarness, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        await h.time.advance(to: retryAt.addingTimeInterval(-1))
        let error = await sessionError(sourceLocation: sourceLocation) { try await h.service.validAccessToken() }
        guard case .temporarilyUnavailable(_, _, let told?)? = error else {
            Issue.record("expected temporarilyUnavailable with retryAt, got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(told == retryAt, sourceLocation: sourceLocation)
        await h.expectTokenRequests(1, sourceLocation: sourceLocation)
        await h.time.advance(to: retryAt.addingTimeInterval(0.001))
        let refreshed = try await h.service.validAccessToken()
        #expect(refreshed.value != (try h.firstTokens(of: "alice").accessToken), sourceLocation: sourceLocation)
        await h.expectTokenRequests(2, sourceLocation: sourceLocation)
    }

    @Test("delta-seconds on a 429 and on a 503", arguments: [429, 503])
    func seconds(_ status: Int) async throws {
        try await SessionHarness.run { h in
            let start = h.time.now()
            let retryAt = try await Self.retryAt(after: TokenFault(status: status, retryAfter: 120), h)
            #expect(retryAt == start.addingTimeInterval(120))
            try await Self.expectNothingUntil(retryAt, h)
        }
    }

    @Test("an HTTP date on a 503, read against the server's own Date: its clock may be an hour off")
    func dateAgainstServerClock() async throws {
        try await SessionHarness.run { h in
            let start = h.time.now()
            let serverNow = start.addingTimeInterval(-3600)
            let fault = TokenFault(
                status: 503,
                headers: [
                    "Date": Self.httpDate(serverNow),
                    "Retry-After": Self.httpDate(serverNow.addingTimeInterval(90)),
                ])
            let retryAt = try await Self.retryAt(after: fault, h)
            #expect(retryAt == start.addingTimeInterval(90))
            try await Self.expectNothingUntil(retryAt, h)
        }
    }

    @Test("an HTTP date without a Date header, read against the vault's wall clock")
    func dateAgainstWallClock() async throws {
        try await SessionHarness.run { h in
            let start = h.time.now()
            let fault = TokenFault(status: 429, headers: ["Retry-After": Self.httpDate(start.addingTimeInterval(45))])
            let retryAt = try await Self.retryAt(after: fault, h)
            #expect(retryAt == start.addingTimeInterval(45))
            try await Self.expectNothingUntil(retryAt, h)
        }
    }

    @Test("an HTTP date a month away waits only the back-off cap")
    func farDateIsCapped() async throws {
        try await SessionHarness.run { h in
            let start = h.time.now()
            let fault = TokenFault(
                status: 503,
                headers: [
                    "Date": Self.httpDate(start),
                    "Retry-After": Self.httpDate(start.addingTimeInterval(30 * 86_400)),
                ])
            let retryAt = try await Self.retryAt(after: fault, h)
            #expect(retryAt == start.addingTimeInterval(h.configuration.backoffCap.timeInterval))
            try await Self.expectNothingUntil(retryAt, h)
        }
    }

    @Test("an HTTP date already past means now: only the vault's own back-off")
    func pastDateIsNow() async throws {
        try await SessionHarness.run { h in
            let start = h.time.now()
            let fault = TokenFault(
                status: 503,
                headers: [
                    "Date": Self.httpDate(start),
                    "Retry-After": Self.httpDate(start.addingTimeInterval(-86_400)),
                ])
            let retryAt = try await Self.retryAt(after: fault, h)
            // The first back-off: between half and all of backoffBase.
            let base = h.configuration.backoffBase.timeInterval
            #expect(retryAt >= start.addingTimeInterval(base / 2) && retryAt <= start.addingTimeInterval(base))
            await h.time.advance(to: retryAt.addingTimeInterval(0.001))
            _ = try await h.service.validAccessToken()
            await h.expectTokenRequests(2)
        }
    }
}
