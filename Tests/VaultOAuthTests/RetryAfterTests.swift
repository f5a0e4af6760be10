import Foundation
import Testing
@testable import VaultOAuth

/// RFC 9110 §10.2.3: Retry-After is delta-seconds or an HTTP date.
@Suite("Retry-After in both forms")
struct RetryAfterTests {
    @Test("delta-seconds")
    func seconds() {
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "120"]) == .seconds(120))
    }

    @Test("an HTTP date, taken against the response's own Date header")
    func dateAgainstServerDate() {
        let headers: HTTPHeaderFields = ["Date": "Sun, 06 Nov 1994 08:49:37 GMT", "Retry-After": "Sun, 06 Nov 1994 08:51:07 GMT"]
        #expect(TransientFailure.retryAfter(in: headers, now: Date(timeIntervalSince1970: 0)) == .seconds(90))
    }

    @Test("an HTTP date without a Date header, against now; the obsolete forms too; a past date is now")
    func dateAgainstNow() throws {
        let now = try #require(TransientFailure.httpDate("Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "Sunday, 06-Nov-94 08:50:37 GMT"], now: now) == .seconds(60))
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "Sun Nov  6 08:49:47 1994"], now: now) == .seconds(10))
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "Sat, 05 Nov 1994 08:49:37 GMT"], now: now) == .zero)
        #expect(TransientFailure.retryAfter(in: ["Retry-After": "soon"], now: now) == nil)
    }
}
