import FlyingFox
import Foundation

/// JSON bodies the gateway sends.
enum GatewayJSON {
    /// RFC 6749 §5.1 success, plus `grant_id` for the admin API.
    struct Tokens: Encodable {
        let accessToken: String
        let tokenType: String
        let expiresIn: Int
        let refreshToken: String?
        let scope: String
        let idToken: String?
        let grantID: String?
        /// Keycloak's `refresh_expires_in`: seconds the refresh token has left, when refresh
        /// tokens have a lifetime (``DevGateway/setRefreshTokenLifetime(_:)``).
        var refreshExpiresIn: Int?

        init(_ tokens: IssuedTokens, includeGrantID: Bool) {
            accessToken = tokens.accessToken
            tokenType = tokens.tokenType
            expiresIn = tokens.expiresIn
            refreshToken = tokens.refreshToken
            scope = tokens.scope
            idToken = tokens.idToken
            grantID = includeGrantID ? tokens.grantID : nil
        }

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token", tokenType = "token_type", expiresIn = "expires_in"
            case refreshToken = "refresh_token", scope, idToken = "id_token", grantID = "grant_id"
            case refreshExpiresIn = "refresh_expires_in"
        }
    }

    /// RFC 6749 §5.2 error.
    struct Failure: Encodable {
        let error: String
        let errorDescription: String?

        enum CodingKeys: String, CodingKey {
            case error, errorDescription = "error_description"
        }
    }

    static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding these plain structs cannot fail; an empty object keeps the response well-formed.
        return (try? encoder.encode(value)) ?? Data("{}".utf8)
    }
}

extension HTTPResponse {
    /// A JSON response that caches must not store (RFC 6749 §5.1).
    static func json(_ value: some Encodable, status: Int = 200, headers extra: [(HTTPHeader, String)] = []) -> HTTPResponse {
        var headers: HTTPHeaders = [
            .contentType: "application/json",
            .cacheControl: "no-store",
            HTTPHeader("Pragma"): "no-cache",
        ]
        for (name, value) in extra { headers[name] = value }
        return HTTPResponse(statusCode: .gateway(status), headers: headers, body: GatewayJSON.encode(value))
    }

    /// An OAuth error response; a 401 names the Basic scheme in `WWW-Authenticate` when the
    /// client tried HTTP Basic (RFC 6749 §5.2; see ``OAuthRejection/challengesBasic``).
    static func oauthError(_ rejection: OAuthRejection) -> HTTPResponse {
        var extra: [(HTTPHeader, String)] = []
        if rejection.status == 401, rejection.challengesBasic {
            extra.append((HTTPHeader("WWW-Authenticate"), #"Basic realm="DevGateway""#))
        }
        return .json(GatewayJSON.Failure(error: rejection.error, errorDescription: rejection.description), status: rejection.status, headers: extra)
    }

    /// A small HTML page (`text/html`) that caches must not store.
    static func html(title: String, paragraphs: [String], status: Int = 200) -> HTTPResponse {
        let escapedTitle = htmlEscaped(title)
        let body = paragraphs.map { "<p>\(htmlEscaped($0))</p>" }.joined(separator: "\n")
        let page =
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>\(escapedTitle)</title></head>\n"
            + "<body><h1>\(escapedTitle)</h1>\n\(body)\n</body></html>\n"
        let headers: HTTPHeaders = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
        return HTTPResponse(statusCode: .gateway(status), headers: headers, body: Data(page.utf8))
    }

    /// `302 Found` to `location` (RFC 6749 §4.1.2).
    static func redirect(to location: String) -> HTTPResponse {
        let headers: HTTPHeaders = [.location: location, .cacheControl: "no-store"]
        return HTTPResponse(statusCode: .found, headers: headers)
    }

    /// `text` with `&`, `<`, `>` and quotes escaped for HTML.
    static func htmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    /// An empty response that caches must not store.
    static func empty(status: Int) -> HTTPResponse {
        let headers: HTTPHeaders = [.cacheControl: "no-store"]
        return HTTPResponse(statusCode: .gateway(status), headers: headers)
    }

    /// The response for an injected fault; an echoing one repeats `request` (see ``TokenFault/echo(body:authorization:)``).
    static func fault(_ fault: TokenFault, echoing request: (body: Data, authorization: String?)? = nil) -> HTTPResponse {
        var headers: HTTPHeaders = [.cacheControl: "no-store"]
        if let retryAfter = fault.retryAfter { headers[HTTPHeader("Retry-After")] = String(retryAfter) }
        let body: Data
        if let raw = fault.body {
            headers[.contentType] = "text/plain"
            body = Data(raw.utf8)
        } else if let error = fault.error {
            headers[.contentType] = "application/json"
            let description =
                fault.echoesRequest
                ? TokenFault.echo(body: request?.body ?? Data(), authorization: request?.authorization)
                : "injected by DevGateway"
            body = GatewayJSON.encode(GatewayJSON.Failure(error: error, errorDescription: description))
        } else {
            headers[.contentType] = "text/plain"
            body = Data("injected failure".utf8)
        }
        for (name, value) in fault.headers { headers[HTTPHeader(name)] = value }
        return HTTPResponse(statusCode: .gateway(fault.status), headers: headers, body: body)
    }
}

extension HTTPStatusCode {
    /// A status for any code, with a reason phrase for the common ones.
    static func gateway(_ code: Int) -> HTTPStatusCode {
        let known: [HTTPStatusCode] = [
            .ok, .created, .noContent, .found, .badRequest, .unauthorized, .notFound, .methodNotAllowed,
            .requestTimeout, .tooManyRequests, .internalServerError, .badGateway, .serviceUnavailable, .gatewayTimeout,
        ]
        return known.first { $0.code == code } ?? HTTPStatusCode(code, phrase: "Status \(code)")
    }
}
