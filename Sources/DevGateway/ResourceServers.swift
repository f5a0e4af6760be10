import Foundation

/// The resource servers the gateway issues audience-restricted access tokens for, and the rule
/// a `resource` parameter must pass (RFC 8707 §2). Pure value logic: the ``DevGateway`` actor
/// owns the only instance.
struct ResourceServers: Sendable {
    /// The resource URIs served, in the order given. Compared with a `resource` value exactly:
    /// no normalisation, so `…/api/` is not `…/api`.
    private(set) var uris: [String]

    /// Serves `uris`.
    init(uris: [String] = []) {
        self.uris = uris
    }

    /// The defaults for a gateway at `baseURL`: `baseURL/api` (`GET /api/profile`) and the
    /// resource servers `baseURL/rs/files` and `baseURL/rs/mail`.
    init(defaultsAt baseURL: URL) {
        let base = baseURL.absoluteString
        self.init(uris: [base + "/api", base + "/rs/files", base + "/rs/mail"])
    }

    /// Whether `uri` is a resource served here.
    func serves(_ uri: String) -> Bool { uris.contains(uri) }

    /// The audiences of a token request's `resource` values, each once, in the order sent; or
    /// `invalid_target` for the first value that is not an absolute URI, has a fragment, or is
    /// not served here.
    ///
    /// ```swift
    /// servers.audiences(for: ["http://127.0.0.1:41234/rs/files#x"])   // invalid_target
    /// ```
    func audiences(for resources: [String]) -> Result<[String], OAuthRejection> {
        var audiences: [String] = []
        for resource in resources {
            // `#` can only start a fragment in a URI (RFC 3986 §2.2); check before parsing,
            // since an empty fragment (`…/files#`) parses as none on some platforms.
            guard !resource.contains("#") else {
                return .failure(.invalidTarget("resource must not contain a fragment (RFC 8707 §2): \(resource)"))
            }
            guard let components = URLComponents(string: resource), let scheme = components.scheme, !scheme.isEmpty else {
                return .failure(.invalidTarget("resource must be an absolute URI (RFC 8707 §2): \(resource)"))
            }
            guard serves(resource) else {
                return .failure(.invalidTarget("this gateway issues no tokens for the resource \(resource)"))
            }
            if !audiences.contains(resource) { audiences.append(resource) }
        }
        return .success(audiences)
    }
}
