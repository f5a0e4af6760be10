import DevGateway
import Foundation
import Testing
import VaultTestSupport

@testable import VaultOAuth

/// A server that repeats what it was sent, in whatever encoding, never gets a token or the
/// client secret into an error, a description or a log line.
@Suite("Echoed secrets are redacted in every encoding")
struct EchoedSecretTests {
    /// Made-up secrets of the shapes that matter: an opaque token of URL-safe characters, one of
    /// standard base64 characters, and a client secret with characters every encoder escapes.
    enum Sample: String, CaseIterable, CustomTestStringConvertible {
        case urlSafeToken, base64Token, punctuatedSecret

        var value: String {
            switch self {
            case .urlSafeToken: "RT-made-up-8f3Kq_x9ZpL2vN7c"
            case .base64Token: "made/up+Token/Qm9ndXM=ZmFrZQ=="
            case .punctuatedSecret: "made up s3cr3t+/&=%é~!"
            }
        }

        var testDescription: String { rawValue }
    }

    /// Every encoding of `secret` made here with Foundation's own encoders, not VaultOAuth's.
    static func encodings(of secret: String) -> [String] {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        let percent = secret.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
        let form = percent.replacingOccurrences(of: "%20", with: "+")
        let bytes = Data(secret.utf8)
        var result = [secret, percent, form, percent.lowercased(), form.lowercased()]
        // Inside a longer base64 text, at each offset of a 3-byte group, with padding and without.
        for lead in 0..<3 {
            for trail in 0..<3 {
                let wrapped = Data(repeating: 0x41, count: lead) + bytes + Data(repeating: 0x42, count: trail)
                let standard = wrapped.base64EncodedString()
                let url = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                result += [standard, url, standard.replacingOccurrences(of: "=", with: ""), url.replacingOccurrences(of: "=", with: "")]
            }
        }
        return result
    }

    @Test("every encoding of a secret is replaced, and the words around it stay", arguments: Sample.allCases)
    func everyEncodingReplaced(_ sample: Sample) {
        let secret = sample.value
        let encodings = Self.encodings(of: secret)
        // Each encoding on its own, then all of them in one text.
        for (index, encoded) in encodings.enumerated() {
            let text = "server said: \(encoded) (done)"
            let safe = Redaction(secrets: [secret]).apply(to: text, limit: .max)
            #expect(SecretTrace.find(secret, in: safe) == nil, "encoding #\(index) survived redaction")
            #expect(safe.hasPrefix("server said: ") && safe.hasSuffix(" (done)"))
        }
        let all = encodings.joined(separator: " | ")
        let safe = Redaction(secrets: [secret]).apply(to: all, limit: .max)
        #expect(SecretTrace.find(secret, in: safe) == nil)
        #expect(safe.contains(Redaction.placeholder))
    }

    @Test("a secret cut in two by the length limit leaves no piece of itself")
    func secretAtTheCut() {
        let secret = Sample.urlSafeToken.value
        for filler in 490..<512 {
            let body = #"{"error":"invalid_grant","error_description":"\#(String(repeating: "x", count: filler))\#(secret) tail"}"#
            let result = OAuthClient.classifyRefresh(HTTPResponse(status: 400, body: Data(body.utf8)), secrets: [secret], now: Date())
            guard case .failure(.invalidGrant(let description?)) = result else {
                Issue.record("expected invalid_grant with a description, got \(result)")
                return
            }
            let longestPiece = (4...secret.count).last { description.contains(secret.prefix($0)) } ?? 0
            #expect(longestPiece < 4, "\(longestPiece) leading characters of the secret survived at filler \(filler)")
        }
    }

    @Test("short secrets redact only themselves, not the words around them")
    func shortSecret() {
        let safe = Redaction(secrets: ["ab"]).apply(to: "a cab and a bus, YWI=", limit: .max)
        #expect(safe == "a c\(Redaction.placeholder) and a bus, \(Redaction.placeholder)")
    }

    @Test("descriptions and mirrors of a redaction never hold a secret")
    func redactionDescribesNoSecret() {
        let secret = Sample.punctuatedSecret.value
        let redaction = Redaction(secrets: [secret])
        var dumped = ""
        dump(redaction, to: &dumped)
        for text in [redaction.description, String(reflecting: redaction), "\(redaction)", dumped] {
            #expect(SecretTrace.find(secret, in: text) == nil)
        }
    }

    enum EchoingError: String, CaseIterable, CustomTestStringConvertible {
        case invalidGrant = "invalid_grant"
        case invalidClient = "invalid_client"
        case unregistered = "made_up_error"
        var testDescription: String { rawValue }
    }

    @Test(
        "a token endpoint that echoes the request in its error leaks neither the refresh token nor the Basic credential",
        arguments: EchoingError.allCases)
    func echoingTokenEndpoint(_ code: EchoingError) async throws {
        let capture = LogCapture()
        let secret = Sample.punctuatedSecret.value
        try await withGateway(logger: capture.logger(label: "test.gateway")) { gateway in
            let (client, transport) = makeClient(logger: capture.logger(label: "test.client"))
            let credentials = ClientCredentials(clientID: "vault sync", authentication: .clientSecretBasic(ClientSecret(secret)))
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault sync", clientSecret: secret)
            let refreshToken = try issued.requiredRefreshToken
            await gateway.failNextTokenRequests(with: TokenFault(status: 400, error: code.rawValue, echoesRequest: true))
            let error = try #require(
                await refreshFailure(
                    client, refreshToken: refreshToken, endpoint: gateway.tokenEndpoint,
                    credentials: credentials))
            // The request really carried them: the Basic header and the form-encoded token.
            let sent = try #require(transport.requests.last)
            #expect(sent.headers["Authorization"]?.hasPrefix("Basic ") == true)
            #expect(sent.formParameters["refresh_token"] == refreshToken)

            var dumped = ""
            dump(error, to: &dumped)
            let texts =
                [error.description, String(reflecting: error), error.localizedDescription, "\(error)", dumped]
                + capture.capturedLines
            let secrets = [refreshToken, secret, "vault sync:\(secret)", "vault+sync:" + Self.encodings(of: secret)[2]]
            for text in texts {
                #expect(SecretTrace.firstFound(of: secrets, in: text) == nil, "a secret survived in: \(text.count) characters")
            }
            #expect(error.description.contains(Redaction.placeholder), "the echo was kept, redacted: \(error)")
        }
    }

    @Test("a revocation endpoint that echoes the request in its error leaks neither the token nor the Basic credential")
    func echoingRevocationEndpoint() async throws {
        let secret = Sample.punctuatedSecret.value
        try await withGateway { gateway in
            let (client, _) = makeClient()
            let credentials = ClientCredentials(clientID: "vault-sync", authentication: .clientSecretBasic(ClientSecret(secret)))
            let issued = await gateway.issueGrant(subject: "alice", clientID: "vault-sync", clientSecret: secret)
            let refreshToken = try issued.requiredRefreshToken
            await gateway.failNextRevocationRequests(1, with: TokenFault(status: 400, error: "invalid_request", echoesRequest: true))
            do throws(RevocationError) {
                try await client.revoke(token: refreshToken, hint: .refreshToken, endpoint: gateway.revocationEndpoint, client: credentials)
                Issue.record("the revocation was refused by the gateway, yet succeeded")
            } catch {
                var dumped = ""
                dump(error, to: &dumped)
                for text in [error.description, String(reflecting: error), dumped] {
                    #expect(SecretTrace.firstFound(of: [refreshToken, secret, "vault-sync:\(secret)"], in: text) == nil)
                }
                #expect(error.description.contains(Redaction.placeholder))
            }
        }
    }
}
