import Foundation
import Testing
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultStore

/// Who tokens imported from elsewhere belong to, before anything is verified: the rules that
/// keep a token response from choosing the keys it is checked against or the account it lands in.
@Suite("Token import naming rules")
struct TokenImportTests {
    private let endpoint = URL(string: "https://id.example:8443/oauth/token")!

    /// An unsigned JWT with `claims` as its payload (the rules read it unverified).
    private func jwt(_ claims: [String: String]) throws -> String {
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return Base64URL.encode(Array(#"{"alg":"RS256"}"#.utf8)) + "." + Base64URL.encode(payload) + ".c2ln"
    }

    private func request(idToken: String?, issuer: String? = nil, subject: String? = nil) -> TokenImport {
        TokenImport(
            tokens: TokenResponse(accessToken: "opaque", tokenType: "Bearer", expiresIn: 3600, idToken: idToken),
            client: OAuthClientSettings(tokenEndpoint: endpoint, clientID: "cli"), issuer: issuer, subject: subject)
    }

    @Test("an ID token's own issuer vouches only when it is the token endpoint's origin")
    func vouchingIssuer() throws {
        #expect(request(idToken: try jwt(["iss": "https://id.example:8443", "sub": "alice"])).vouchingIssuer == "https://id.example:8443")
        #expect(request(idToken: try jwt(["iss": "https://attacker.example", "sub": "alice"])).vouchingIssuer == nil)
        #expect(request(idToken: try jwt(["iss": "https://id.example", "sub": "alice"])).vouchingIssuer == nil, "another port is another origin")
        #expect(request(idToken: try jwt(["iss": "http://id.example:8443", "sub": "alice"])).vouchingIssuer == nil, "another scheme too")
        #expect(
            request(idToken: try jwt(["iss": "https://attacker.example"]), issuer: "https://named.example").vouchingIssuer
                == "https://named.example", "the issuer the user named always vouches")
        #expect(request(idToken: nil).vouchingIssuer == nil)
        #expect(request(idToken: "not.a-jwt").vouchingIssuer == nil)
    }

    @Test("unverified names: the ID token's, else the endpoint's origin and a generated subject")
    func unverifiedNames() throws {
        let named = request(idToken: try jwt(["iss": "https://id.example:8443", "sub": "alice"]))
        #expect(named.tokens.unverifiedIDTokenNames.subject == "alice")
        let unnamed = request(idToken: nil)
        #expect(unnamed.tokens.unverifiedIDTokenNames.issuer == nil && unnamed.tokens.unverifiedIDTokenNames.subject == nil)
        #expect(TokenImport.origin(of: endpoint) == "https://id.example:8443")
        let empty = request(idToken: try jwt(["iss": "", "sub": ""]))
        #expect(empty.tokens.unverifiedIDTokenNames.subject == nil, "an empty claim names no one")
    }
}
