import Foundation

/// A failure the gateway answers one token request with, instead of processing it.
///
/// ```swift
/// await gateway.failNextTokenRequests(1, with: TokenFault(status: 429, retryAfter: 7))
/// ```
public struct TokenFault: Sendable, Hashable {
    /// The HTTP status to answer with, e.g. 503.
    public var status: Int
    /// A `Retry-After` value in seconds to add, if any.
    public var retryAfter: Int?
    /// An OAuth error code for a JSON body (`{"error": …}`); without it and without `body`,
    /// the body is the plain text `injected failure`.
    public var error: String?
    /// A raw body to send instead (with `Content-Type: text/plain`), e.g. to simulate garbage.
    public var body: String?
    /// Whether the JSON error's `error_description` repeats the request, as a careless server
    /// does: see ``echo(body:authorization:)``. Needs `error`.
    public var echoesRequest: Bool
    /// Header fields to send as given, set last (so they win): a `Retry-After` date with the
    /// server's `Date`, a `Content-Type` for a raw `body`.
    public var headers: [String: String]

    /// Creates a fault.
    public init(
        status: Int, retryAfter: Int? = nil, error: String? = nil, body: String? = nil, echoesRequest: Bool = false,
        headers: [String: String] = [:]
    ) {
        self.status = status
        self.retryAfter = retryAfter
        self.error = error
        self.body = body
        self.echoesRequest = echoesRequest
        self.headers = headers
    }

    /// What an echoing fault says about a request: its body as sent (form-encoded), decoded, and
    /// re-encoded with `%20` and lower-case hex; its `Authorization` header, and the Basic
    /// credential in it decoded; and the body in
    /// base64 and base64url, padded and not, whole and after one and two leading bytes (so a
    /// secret in it sits at every offset of a base64 group).
    public static func echo(body: Data, authorization: String?) -> String {
        let sent = String(decoding: body, as: UTF8.self)
        let decoded = FormBody.decode(Substring(sent)) ?? sent
        var parts = ["body=\(sent)", "decoded=\(decoded)"]
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~=&")
        if let percent = decoded.addingPercentEncoding(withAllowedCharacters: unreserved) {
            parts.append("percent=\(percent)")
            parts.append("lowercase=\(lowercasingHex(percent))")
        }
        if let authorization {
            parts.append("authorization=\(authorization)")
            if let basic = BasicCredentials(authorization: authorization) { parts.append("basic=\(basic.clientID):\(basic.secret)") }
        }
        for lead in 0..<3 {
            let standard = (Data(repeating: 0x20, count: lead) + body).base64EncodedString()
            let url = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            let unpadded = standard.trimmingCharacters(in: CharacterSet(charactersIn: "="))
            parts += ["base64=\(standard)", "base64url=\(url)", "unpadded=\(unpadded)"]
        }
        return parts.joined(separator: " ")
    }

    private static func lowercasingHex(_ text: String) -> String {
        var result = ""
        var remaining = 0
        for character in text {
            if character == "%" {
                remaining = 2
                result.append(character)
            } else if remaining > 0 {
                remaining -= 1
                result += character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }
}
