import Foundation
import Logging

// MARK: - Provider metadata (OpenID Connect Discovery 1.0 §4, RFC 8414 §3)

extension OAuthClient {
    /// Finds the provider's endpoints from its issuer identifier.
    ///
    /// Reads, side by side, `ISSUER/.well-known/openid-configuration` (OpenID Connect Discovery
    /// §4.1), RFC 8414's `https://host/.well-known/oauth-authorization-server/PATH` (§3.1, the
    /// well-known segment inserted before the issuer's path) and, for an issuer with a path, the
    /// `ISSUER/.well-known/oauth-authorization-server` form some servers use; and merges them:
    /// each endpoint from whichever document has it (a provider's OpenID document may lack the
    /// `revocation_endpoint` its RFC 8414 one has). A document that is absent or fails to load
    /// is skipped (logged at debug level, what `--verbose` shows). Every document's `issuer`
    /// must equal the one asked for (§4.3 / §3.3; a single trailing slash typed by the user is
    /// forgiven), two documents may not disagree on an endpoint, and every endpoint must pass
    /// ``EndpointRule``; a document that fails any of these stops the discovery.
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
        var candidates: [(URL?, ProviderMetadata.Source)] = [(components.url, .openIDConfiguration)]
        components.path = "/.well-known/oauth-authorization-server" + path
        candidates.append((components.url, .authorizationServer))
        if !path.isEmpty {
            components.path = path + "/.well-known/oauth-authorization-server"
            candidates.append((components.url, .authorizationServer))
        }
        let attempts = candidates.compactMap { url, source in url.map { ($0, source) } }

        let answers = await withTaskGroup(of: (Int, Result<HTTPResponse, any Error>).self) { group in
            for (index, (url, _)) in attempts.enumerated() {
                group.addTask { [transport, requestDeadline, clock] in
                    do {
                        let request = HTTPRequest(method: .get, url: url, headers: ["Accept": "application/json"], pins: pins)
                        return (index, .success(try await transport.send(request, deadline: requestDeadline, clock: clock)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var answers: [Result<HTTPResponse, any Error>?] = Array(repeating: nil, count: attempts.count)
            for await (index, answer) in group { answers[index] = answer }
            return answers
        }
        if Task.isCancelled { throw .cancelled }

        var documents: [MetadataDocument] = []
        var reasons: [String] = []
        let trimmed = asked.hasSuffix("/") ? String(asked.dropLast()) : asked
        for ((url, source), answer) in zip(attempts, answers) {
            let response: HTTPResponse
            switch answer {
            case .success(let answered)?:
                response = answered
            case .failure(let error)?:
                if case .pinningFailed(let host, let reason)? = error as? TransportError {
                    throw .discoveryFailed(issuer: asked, reason: "pinning failed for \(host): \(reason)")
                }
                reasons.append("\(url.path): \(TransientFailure(transportFailure: error).map(\.description) ?? "no answer")")
                logger.debug("discovery document skipped: no answer", metadata: ["oauth.source": "\(source.rawValue)", "url.path": "\(url.path)"])
                continue
            case nil:
                continue
            }
            guard response.isSuccess else {
                reasons.append("\(url.path): HTTP \(response.status)")
                logger.debug(
                    "discovery document skipped: not there",
                    metadata: ["oauth.source": "\(source.rawValue)", "url.path": "\(url.path)", "http.status": "\(response.status)"])
                continue
            }
            let document: MetadataDocument
            do {
                document = try MetadataDocument(response.body, source: source)
            } catch .discoveryFailed(_, let reason) {
                // A document that does not parse is not the provider's word: skipped like a 404.
                reasons.append("\(url.path): \(reason)")
                logger.debug(
                    "discovery document skipped: unreadable", metadata: ["oauth.source": "\(source.rawValue)", "url.path": "\(url.path)"])
                continue
            } catch {
                throw error
            }
            guard document.issuer == asked || document.issuer == trimmed else {
                logger.debug("discovery refused", metadata: ["oauth.outcome": "issuer_mismatch", "url.path": "\(url.path)"])
                throw .issuerMismatch(expected: asked, found: Self.printable(document.issuer))
            }
            documents.append(document)
        }
        guard !documents.isEmpty else { throw .discoveryFailed(issuer: asked, reason: reasons.joined(separator: "; ")) }
        let metadata = try ProviderMetadata(merging: documents)
        try metadata.checkEndpoints()
        logger.debug("discovered", metadata: ["oauth.documents": "\(documents.count)", "oauth.source": "\(metadata.source.rawValue)"])
        return metadata
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
