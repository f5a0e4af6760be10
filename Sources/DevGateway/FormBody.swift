import Foundation

/// The parameters of an `application/x-www-form-urlencoded` body (RFC 6749 Appendix B).
///
/// Every parameter may appear once (RFC 6749 §3.2), except `resource`, which a client repeats
/// to ask for a token for several resource servers (RFC 8707 §2).
struct FormBody: Sendable {
    /// The parameters that may be repeated.
    static let repeatable: Set<String> = ["resource"]

    private let parameters: [String: [String]]

    /// The parameter's value; for a repeated one, the first.
    subscript(name: String) -> String? { parameters[name]?.first }

    /// Every value of the parameter, in the order sent; empty when it is absent.
    func values(_ name: String) -> [String] { parameters[name] ?? [] }

    /// Parses `data`; rejects invalid percent-encoding and repeated parameters other than
    /// ``repeatable`` ones (RFC 6749 §3.2).
    static func parse(_ data: Data) -> Result<FormBody, OAuthRejection> {
        guard let text = String(data: data, encoding: .utf8) else {
            return .failure(.invalidRequest("the body is not UTF-8"))
        }
        var parameters: [String: [String]] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : "") else {
                return .failure(.invalidRequest("the body is not valid form encoding"))
            }
            guard parameters[name] == nil || repeatable.contains(name) else {
                return .failure(.invalidRequest("parameter \(name) is repeated"))
            }
            parameters[name, default: []].append(value)
        }
        return .success(FormBody(parameters: parameters))
    }

    /// `+` is a space, then percent-decoding; nil for invalid escapes.
    static func decode(_ component: Substring) -> String? {
        component.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}

/// Client credentials from an `Authorization: Basic` header (RFC 6749 §2.3.1).
struct BasicCredentials: Sendable {
    let clientID: String
    let secret: String

    /// Decodes base64, splits at the first `:`, then form-decodes each half; nil if malformed.
    init?(authorization: String) {
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic",
            let data = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
            let pair = String(data: data, encoding: .utf8),
            let colon = pair.firstIndex(of: ":"),
            let clientID = FormBody.decode(pair[..<colon]),
            let secret = FormBody.decode(pair[pair.index(after: colon)...])
        else {
            return nil
        }
        self.clientID = clientID
        self.secret = secret
    }
}
