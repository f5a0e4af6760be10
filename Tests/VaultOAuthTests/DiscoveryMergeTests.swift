import Foundation
import Testing

@testable import VaultOAuth

/// A provider's OpenID Connect and RFC 8414 documents read as one (django-oauth-toolkit
/// publishes its revocation endpoint in the second only).
@Suite("Discovery: documents merged endpoint by endpoint, disagreements refused")
struct DiscoveryMergeTests {
    static func document(_ json: String, _ source: ProviderMetadata.Source) throws -> MetadataDocument {
        try MetadataDocument(Data(json.utf8), source: source)
    }

    static let openID = """
        {"issuer": "https://id.example.com/o", "token_endpoint": "https://id.example.com/o/token/",
         "authorization_endpoint": "https://id.example.com/o/authorize/", "jwks_uri": "https://id.example.com/o/jwks/",
         "userinfo_endpoint": "https://id.example.com/o/userinfo/", "code_challenge_methods_supported": ["S256"]}
        """

    @Test("each endpoint comes from whichever document names it; lists from the first that has them")
    func merged() throws {
        let rfc8414 = """
            {"issuer": "https://id.example.com/o", "token_endpoint": "https://id.example.com/o/token/",
             "revocation_endpoint": "https://id.example.com/o/revoke_token/", "code_challenge_methods_supported": ["plain", "S256"],
             "revocation_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
             "authorization_response_iss_parameter_supported": true}
            """
        let metadata = try ProviderMetadata(merging: [Self.document(Self.openID, .openIDConfiguration), Self.document(rfc8414, .authorizationServer)])
        #expect(metadata.revocationEndpoint?.absoluteString == "https://id.example.com/o/revoke_token/")
        #expect(metadata.userinfoEndpoint?.absoluteString == "https://id.example.com/o/userinfo/")
        #expect(metadata.jwksURI?.absoluteString == "https://id.example.com/o/jwks/")
        #expect(metadata.codeChallengeMethods == ["S256"], "the first document's list")
        #expect(metadata.revocationEndpointAuthMethods == ["client_secret_post", "client_secret_basic"])
        #expect(metadata.issuesIssuerParameter)
        #expect(metadata.source == .openIDConfiguration)
        // The stored form keeps what was merged.
        #expect(ProviderMetadata.decoded(metadata.encoded()) == metadata)
    }

    @Test("two documents naming different URLs for one endpoint: refused, naming both")
    func conflict() throws {
        let other = """
            {"issuer": "https://id.example.com/o", "token_endpoint": "https://evil.example.net/token"}
            """
        #expect {
            _ = try ProviderMetadata(merging: [Self.document(Self.openID, .openIDConfiguration), Self.document(other, .authorizationServer)])
        } throws: { error in
            guard case .metadataConflict(let field, let first, let second)? = error as? SignInError else { return false }
            return field == "token_endpoint" && first.contains("id.example.com") && second.contains("evil.example.net")
        }
    }

    @Test("no document names a token endpoint: missing, named")
    func noTokenEndpoint() throws {
        let bare = #"{"issuer": "https://id.example.com/o", "jwks_uri": "https://id.example.com/o/jwks/"}"#
        #expect(throws: SignInError.missingMetadata(field: "token_endpoint")) {
            try ProviderMetadata(merging: [Self.document(bare, .openIDConfiguration)])
        }
    }
}
