import Foundation
import Logging

// MARK: - Provider metadata (OpenID Connect Discovery 1.0 §4, RFC 8414 §3)

extension OAuthClient {
    /// Finds the provider's endpoints from its issuer identifier.
    ///
    /// Asks `ISSUER/.well-known/openid-configuration` first (OpenID Connect Discovery §4.1), then
    /// RFC 8414's `https://host/.well-known/oauth-authorization-server/PATH` (§3.1, the
    /// well-known segment inserted before the issuer's path). The document's `issuer` must equal
    /// the one asked for (§4.3 / §3.3; a single trailing slash typed by the user is forgiven), and
    /// every endpoint in it must pass ``EndpointRule``: a document that fails either is not used.
    ///
    /// ```swift
    /// let metadata = try await oauth.discover(issuer: URL(string: "https://id.example.com/realms/dev")!)
    /// ```
    public func discover(issuer: URL, pins: [SPKIPin] = []) async throws(SignInError) -> ProviderMetadata {
        let asked = issuer.absoluteString
        if let reason = EndpointRule.violation(issuer) { throw .insecureEndpoint(field: "issuer", reason: reason) }
        guard var components = URLComponents(url: issuer, resolvingAgainstBaseURL: false),
            components.query == nil, components.fragment == nil
        else {
            throw .insecureEndpoint(field: "issuer", reason: "an issuer identifier has no query or fragment (RFC 8414 §2)")
        }
        let path = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        let logger = logger(for: issuer, operation: "discovery")

        components.path = path + "/.well-known/openid-configuration"
        var attempts: [(URL?, ProviderMetadata.Source)] = [(components.url, .openIDConfiguration)]
        components.path = "/.well-known/oauth-authorization-server" + path
        attempts.append((components.url, .authorizationServer))

        var reasons: [String] = []
        for (candidate, source) in attempts {
            guard let url = candidate else { continue }
            let response: HTTPResponse
            do {
                let request = HTTPRequest(method: .get, url: url, headers: ["Accept": "application/json"], pins: pins)
                response = try await transport.send(request, deadline: requestDeadline, clock: clock)
            } catch {
                if Task.isCancelled { throw .cancelled }
                if case .pinningFailed(let host, let reason)? = error as? TransportError {
                    throw .discoveryFailed(issuer: asked, reason: "pinning failed for \(host): \(reason)")
                }
                reasons.append("\(url.path): \(TransientFailure(transportFailure: error).map(\.description) ?? "no answer")")
                logger.debug("discovery request failed", metadata: ["oauth.source": "\(source.rawValue)"])
                continue
            }
            guard response.isSuccess else {
                reasons.append("\(url.path): HTTP \(response.status)")
                logger.debug("discovery document not there", metadata: ["oauth.source": "\(source.rawValue)", "http.status": "\(response.status)"])
                continue
            }
            let metadata: ProviderMetadata
            do {
                metadata = try ProviderMetadata(document: response.body, source: source)
            } catch .discoveryFailed(_, let reason) {
                throw .discoveryFailed(issuer: asked, reason: "\(url.path): \(reason)")
            } catch {
                throw error
            }
            let trimmed = asked.hasSuffix("/") ? String(asked.dropLast()) : asked
            guard metadata.issuer == asked || metadata.issuer == trimmed else {
                logger.debug("discovery refused", metadata: ["oauth.outcome": "issuer_mismatch"])
                throw .issuerMismatch(expected: asked, found: Self.printable(metadata.issuer))
            }
            try metadata.checkEndpoints()
            logger.debug("discovered", metadata: ["oauth.source": "\(source.rawValue)"])
            return metadata
        }
        throw .discoveryFailed(issuer: asked, reason: reasons.joined(separator: "; "))
    }

    /// A server-chosen string made safe for a one-line message: control characters dropped,
    /// at most 200 characters.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { !$0.properties.generalCategory.isControl }.prefix(200)))
    }
}

extension Unicode.GeneralCategory {
    var isControl: Bool {
        switch self {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned: true
        default: false
        }
    }
}
