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

    /// Creates a fault.
    public init(status: Int, retryAfter: Int? = nil, error: String? = nil, body: String? = nil) {
        self.status = status
        self.retryAfter = retryAfter
        self.error = error
        self.body = body
    }
}
