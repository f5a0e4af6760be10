import Foundation
import Testing
import VaultOAuth
import VaultTestSupport

@Suite("TokenResponse.parse")
struct TokenResponseParserTests {
    private func parse(_ json: String) throws(OAuthError) -> TokenResponse {
        try TokenResponse.parse(Data(json.utf8))
    }

    @Test("a complete response keeps every field; unknown members are ignored")
    func completeResponse() throws {
        let tokens = try parse(
            """
            {"access_token":"at-1","token_type":"bearer","expires_in":3600,"refresh_token":"rt-1",
             "scope":"openid profile","id_token":"eyJ.x.y","x_vendor":{"nested":[1,2,{"a":null}]}}
            """)
        #expect(
            tokens
                == TokenResponse(
                    accessToken: "at-1", tokenType: "bearer", expiresIn: 3600,
                    refreshToken: "rt-1", scope: "openid profile", idToken: "eyJ.x.y"
                ))
        #expect(tokens.isBearer)
    }

    @Test("only access_token and token_type are required; other token types are kept")
    func minimalResponse() throws {
        let tokens = try parse(#"{"access_token":"at","token_type":"DPoP","refresh_token":null}"#)
        #expect(tokens.tokenType == "DPoP")
        #expect(!tokens.isBearer)
        #expect(tokens.expiresIn == nil)
        #expect(tokens.refreshToken == nil)
    }

    @Test("expires_in as a numeric string is accepted")
    func numericStringExpiresIn() throws {
        #expect(try parse(#"{"access_token":"a","token_type":"Bearer","expires_in":"3600"}"#).expiresIn == 3600)
        #expect(try parse(#"{"access_token":"a","token_type":"Bearer","expires_in":0}"#).expiresIn == 0)
    }

    @Test(
        "invalid bodies are rejected with the reason",
        arguments: [
            (#"{"token_type":"Bearer"}"#, OAuthError.missingField("access_token")),
            (#"{"access_token":"a"}"#, .missingField("token_type")),
            (#"{"access_token":null,"token_type":"Bearer"}"#, .missingField("access_token")),
            (#"{"access_token":42,"token_type":"Bearer"}"#, .wrongType(field: "access_token", expected: "a string (got a number)")),
            (#"{"access_token":"a","token_type":true}"#, .wrongType(field: "token_type", expected: "a string (got a boolean)")),
            (
                #"{"access_token":"a","token_type":"Bearer","refresh_token":["r"]}"#,
                .wrongType(field: "refresh_token", expected: "a string (got an array of strings)")
            ),
            (
                #"{"access_token":"a","token_type":"Bearer","refresh_token":{"r":1}}"#,
                .wrongType(field: "refresh_token", expected: "a string (got an array or object)")
            ),
            (#"{"access_token":"a","token_type":"Bearer","expires_in":true}"#, .wrongType(field: "expires_in", expected: "an integer (got a boolean)")),
            (#"{"access_token":"a","token_type":"Bearer","expires_in":"soon"}"#, .wrongType(field: "expires_in", expected: "an integer or a string of digits")),
            (#"{"access_token":"a","token_type":"Bearer","expires_in":-1}"#, .invalidValue(field: "expires_in", reason: "negative")),
            (#"{"access_token":"a","token_type":"Bearer","expires_in":"-60"}"#, .invalidValue(field: "expires_in", reason: "negative")),
            (
                #"{"access_token":"a","token_type":"Bearer","expires_in":3600.5}"#,
                .invalidValue(field: "expires_in", reason: "not a whole number of seconds in range")
            ),
            (#"{"access_token":"a","token_type":"Bearer","expires_in":99999999999}"#, .invalidValue(field: "expires_in", reason: "out of range")),
            (#"{"access_token":"","token_type":"Bearer"}"#, .invalidValue(field: "access_token", reason: "empty")),
            (
                #"{"access_token":"a\r\nX-Injected: 1","token_type":"Bearer"}"#,
                .invalidValue(field: "access_token", reason: "contains characters outside visible ASCII")
            ),
            (
                #"{"access_token":"a","token_type":"Bearer X-Injected"}"#,
                .invalidValue(field: "token_type", reason: "not a token type name (letters, digits, '-', '.', '_'; at most 64)")
            ),
            (
                #"{"access_token":"a","token_type":"B%ear"}"#,
                .invalidValue(field: "token_type", reason: "not a token type name (letters, digits, '-', '.', '_'; at most 64)")
            ),
            ("not json", .notJSONObject),
            ("", .notJSONObject),
            ("null", .notJSONObject),
            (#"[{"access_token":"a","token_type":"Bearer"}]"#, .notJSONObject),
            (#"{"access_token":"a","token_type":"Bearer""#, .notJSONObject),
        ])
    func invalidBodies(json: String, expected: OAuthError) {
        #expect(throws: expected) { try parse(json) }
    }

    @Test("huge and deeply nested inputs are rejected without crashing")
    func hugeInputs() throws {
        let oversized = Data(repeating: UInt8(ascii: " "), count: TokenResponse.maximumBodySize + 1)
        #expect(throws: OAuthError.bodyTooLarge(bytes: oversized.count)) { try TokenResponse.parse(oversized) }

        let deep = String(repeating: "[", count: 200_000) + String(repeating: "]", count: 200_000)
        #expect(throws: OAuthError.notJSONObject) { try parse(deep) }

        let deepObject = String(repeating: #"{"a":"#, count: 100_000) + "1" + String(repeating: "}", count: 100_000)
        #expect(throws: OAuthError.self) { try parse(deepObject) }

        #expect(throws: OAuthError.self) { try parse(#"{"access_token":"a","token_type":"Bearer","expires_in":1e400}"#) }

        // A big but legitimate response (a large unknown member) still parses.
        let padding = String(repeating: "x", count: 900_000)
        let big = try parse(#"{"access_token":"a","token_type":"Bearer","x_padding":"\#(padding)"}"#)
        #expect(big.accessToken == "a")
    }

    @Test("random and mutated inputs either parse or throw, never crash")
    func fuzzedInputsNeverCrash() {
        var random = SplitMix64(seed: 0x5EED)
        let valid = Array(#"{"access_token":"at","token_type":"Bearer","expires_in":"3600","refresh_token":"rt","scope":"a b"}"#.utf8)
        let interesting = Array(#"{}[]",:0123456789-+.eE"\truefalsenull"#.utf8) + [0x00, 0x7F, 0xC3, 0xFF]
        var parsed = 0
        for round in 0..<3_000 {
            var bytes: [UInt8]
            if round.isMultiple(of: 2) {
                bytes = (0..<Int(random.next() % 64)).map { _ in interesting[Int(random.next() % UInt64(interesting.count))] }
            } else {
                bytes = valid
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    let index = Int(random.next() % UInt64(bytes.count))
                    switch random.next() % 3 {
                    case 0: bytes[index] = interesting[Int(random.next() % UInt64(interesting.count))]
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(interesting[Int(random.next() % UInt64(interesting.count))], at: index)
                    }
                    if bytes.isEmpty { break }
                }
            }
            if let tokens = try? TokenResponse.parse(Data(bytes)) {
                parsed += 1
                #expect(!tokens.accessToken.isEmpty && !tokens.tokenType.isEmpty)
                #expect((tokens.expiresIn ?? 0) >= 0)
            }
            _ = OAuthErrorResponse.parse(Data(bytes))
        }
        #expect(parsed > 0, "some mutations should still be valid responses")
    }

    /// Found by the TokenResponse fuzzer: a server that echoes the access token into
    /// `token_type` (or `scope`) must not get it printed through that field.
    @Test("a token echoed into the token type or scope is not printed through them")
    func echoedTokens() throws {
        let echoedType = try parse(#"{"access_token":"A-T-seed","token_type":"x-A-T-seed"}"#)
        let echoedScope = try parse(#"{"access_token":"AT-SECRET-VALUE","token_type":"Bearer","scope":"openid AT-SECRET-VALUE"}"#)
        let spacedToken = try parse(#"{"access_token":" AT-seed-1","token_type":"AT-seed-1"}"#)
        // Spelled across a field's name and value, as `dump` printed them one by one.
        let acrossFieldName = try parse(#"{"access_token":"tokenType: \"Bearer\"","token_type":"Bearer"}"#)
        for tokens in [echoedType, echoedScope, spacedToken, acrossFieldName] {
            var dumped = ""
            dump(tokens, to: &dumped)
            for rendered in [tokens.description, dumped] {
                #expect(!rendered.contains(tokens.accessToken.trimmingCharacters(in: .whitespaces)))
            }
        }
        #expect(try parse(#"{"access_token":"AT-SECRET-VALUE","token_type":"DPoP","scope":"openid"}"#).description.contains("type: DPoP, "))
    }

    @Test("description and dump show no token")
    func redactedDescriptions() {
        let tokens = TokenResponse(
            accessToken: "AT-SECRET-VALUE", tokenType: "Bearer", expiresIn: 60, refreshToken: "RT-SECRET-VALUE", scope: "openid", idToken: "ID-SECRET-VALUE")
        var dumped = ""
        dump(tokens, to: &dumped)
        for rendered in [tokens.description, String(reflecting: tokens), "\(tokens)", dumped] {
            #expect(!rendered.contains("SECRET-VALUE"), "\(rendered)")
        }
        #expect(tokens.description.contains("<redacted 15 bytes>"))
        #expect(tokens.description.contains("expiresIn: 60"))
    }

    @Test("refresh_expires_in (Keycloak's, not RFC 6749) is read as a hint: a positive whole number of seconds, anything else ignored, never an error")
    func refreshExpiresIn() throws {
        func told(_ value: String) throws -> Int? {
            try TokenResponse.parse(Data(#"{"access_token":"a","token_type":"Bearer","refresh_expires_in":\#(value)}"#.utf8)).refreshExpiresIn
        }
        #expect(try told("1800") == 1800)
        for ignored in ["0", "-5", "1.5", #""1800""#, "null", "99999999999", "[1]"] {
            #expect(try told(ignored) == nil, "\(ignored)")
        }
    }

    @Test("error bodies parse leniently")
    func errorResponses() {
        #expect(
            OAuthErrorResponse.parse(Data(#"{"error":"invalid_grant","error_description":"revoked","error_uri":7}"#.utf8))
                == OAuthErrorResponse(error: "invalid_grant", errorDescription: "revoked"))
        #expect(OAuthErrorResponse.parse(Data(#"{"error_description":"no code"}"#.utf8)) == nil)
        #expect(OAuthErrorResponse.parse(Data("Service Unavailable".utf8)) == nil)
    }
}
