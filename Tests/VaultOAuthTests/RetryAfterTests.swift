import Foundation
import Testing

@testable import VaultOAuth

/// RFC 9110 §10.2.3: Retry-After is delta-seconds or an HTTP date.
@Suite("Retry-After in both forms")
struct RetryAfterTests {
    static let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test("delta-seconds; more digits than an Int64 holds is the longest delay, not none")
    func seconds() {
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "120"], now: Self.now) == .seconds(120))
        #expect(TransientFailure.retryAfter(in: ["Retry-After": " 0 "], now: Self.now) == .zero)
        let longest = Duration.seconds(TransientFailure.longestRetryAfter)
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "99999999999999999999999"], now: Self.now) == longest)
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "-5"], now: Self.now) == nil)
    }

    @Test("an HTTP date, taken against the response's own Date header")
    func dateAgainstServerDate() {
        let headers: HTTPHeaderFields = ["Date": "Sun, 06 Nov 1994 08:49:37 GMT", "Retry-After": "Sun, 06 Nov 1994 08:51:07 GMT"]
        #expect(TransientFailure.retryAfter(in: headers, now: Date(timeIntervalSince1970: 0)) == .seconds(90))
    }

    @Test("an HTTP date without a Date header, against now; the obsolete forms too; a past date is now")
    func dateAgainstNow() throws {
        #expect(TransientFailure.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == Self.now)
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "Sun, 06 Nov 1994 08:50:07 GMT"], now: Self.now) == .seconds(30))
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "Sunday, 06-Nov-94 08:50:37 GMT"], now: Self.now) == .seconds(60))
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "Sun Nov  6 08:49:47 1994"], now: Self.now) == .seconds(10))
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "Sat, 05 Nov 1994 08:49:37 GMT"], now: Self.now) == .zero)
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "soon"], now: Self.now) == nil)
    }

    @Test("a 503's Retry-After is read as a 429's is (RFC 9110 §15.6.4), on refresh and revocation")
    func serviceUnavailable() {
        let response = HTTPResponse(status: 503, headers: ["Retry-After": "Sun, 06 Nov 1994 08:50:37 GMT"])
        #expect(OAuthClient.classifyRefresh(response, secrets: [], now: Self.now) == .failure(.transient(.server(status: 503, retryAfter: .seconds(60)))))
        #expect(OAuthClient.classifyRevocation(response, secrets: [], now: Self.now) == .transient(.server(status: 503, retryAfter: .seconds(60))))
        #expect(RefreshError.transient(.server(status: 503, retryAfter: .seconds(60))).description.contains("retry after 60 s"))
    }
}
