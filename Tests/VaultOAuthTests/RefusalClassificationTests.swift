import Foundation
import Testing

@testable import VaultOAuth

/// Which token endpoint answers count as a refusal whose meaning is unknown (issue 13, part 5):
/// the session layer ends a grant after a few of them in a row, so a wrong "yes" wipes tokens
/// that may be fine, and a wrong "no" backs off forever.
@Suite("Refusals of unknown meaning")
struct RefusalClassificationTests {
    struct Answer: CustomTestStringConvertible, Sendable {
        var name: String
        var status: Int
        var body: String
        var isRefusal: Bool
        var testDescription: String { name }
    }

    static let answers: [Answer] = [
        Answer(name: "400 with an unknown code", status: 400, body: #"{"error":"interaction_required"}"#, isRefusal: true),
        Answer(name: "403 with a vendor's code", status: 403, body: #"{"error":"unauthorized_client_tenant"}"#, isRefusal: true),
        Answer(name: "400 without JSON", status: 400, body: "Bad Request", isRefusal: true),
        Answer(name: "401 without JSON", status: 401, body: "", isRefusal: true),
        Answer(name: "403 page from a firewall", status: 403, body: "<html>Forbidden</html>", isRefusal: false),
        Answer(name: "404 page", status: 404, body: "<html>Not Found</html>", isRefusal: false),
        Answer(name: "invalid_grant (a verdict of its own)", status: 400, body: #"{"error":"invalid_grant"}"#, isRefusal: false),
        Answer(name: "unauthorized_client (the client's settings)", status: 400, body: #"{"error":"unauthorized_client"}"#, isRefusal: false),
        Answer(name: "temporarily_unavailable", status: 400, body: #"{"error":"temporarily_unavailable"}"#, isRefusal: false),
        Answer(name: "429", status: 429, body: "slow down", isRefusal: false),
        Answer(name: "408", status: 408, body: "", isRefusal: false),
        Answer(name: "503", status: 503, body: "", isRefusal: false),
        Answer(name: "200 that is not JSON", status: 200, body: "<html>", isRefusal: false),
    ]

    @Test("counted as a refusal only when the token endpoint itself refused without known words", arguments: answers)
    func classification(_ answer: Answer) throws {
        let result = OAuthClient.classifyRefresh(HTTPResponse(status: answer.status, body: Data(answer.body.utf8)), secrets: [], now: Date())
        guard case .failure(let error) = result else {
            Issue.record("\(answer.name) was taken for tokens")
            return
        }
        #expect(error.isUnexplainedRefusal == answer.isRefusal, "\(answer.name): \(error)")
    }
}
