import Foundation
import JWTKit

/// The claims of a JWT access token the gateway issues for a token request with `resource`
/// (RFC 9068 §2.2). Times are whole seconds since 1970, as JSON numbers.
struct AccessTokenClaims: JWTPayload {
    var iss: String
    var sub: String
    /// A string for one resource, an array for several (RFC 7519 §4.1.3).
    var aud: AudienceClaim
    var clientID: String
    /// Space-separated, as in a token response.
    var scope: String
    var iat: Int
    var exp: Int
    var jti: String
    /// The DPoP key the token is bound to (RFC 9449 §6.1); absent for a bearer token.
    var cnf: Confirmation?

    /// `cnf` (RFC 7800 §3.1) with the RFC 7638 thumbprint of a DPoP key (RFC 9449 §6.1).
    struct Confirmation: Codable, Sendable, Hashable {
        var jkt: String
    }

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud
        case clientID = "client_id"
        case scope, iat, exp, jti, cnf
    }

    /// The gateway only signs these; verifying is the resource server's job.
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// The media type in the JWS header's `typ` (RFC 9068 §2.1).
    static let headerType = "at+jwt"

    /// The compact JWS of these claims signed by `key`, header `{alg, kid, typ: "at+jwt"}`:
    /// the same key and JWTKit path as ID tokens, so the JWKS verifies both.
    func signed(with key: SigningKey) async throws -> String {
        var header = JWTHeader()
        header.typ = Self.headerType
        return try await key.keyCollection().sign(self, kid: JWKIdentifier(string: key.kid), header: header)
    }
}
