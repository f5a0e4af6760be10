import Foundation

/// A successful token endpoint response (RFC 6749 §5.1).
///
/// Its `description` shows the token type, lifetime and scope and redacts every token:
/// `TokenResponse(access: <redacted 43 bytes>, type: Bearer, expiresIn: 3600, refresh: <redacted 43 bytes>, scope: openid, idToken: none)`.
///
/// ```swift
/// let tokens = try TokenResponse.parse(response.body)
/// request.headers["Authorization"] = "\(tokens.tokenType) \(tokens.accessToken)"
/// ```
public struct TokenResponse: Sendable, Hashable {
    /// The access token (`access_token`).
    public var accessToken: String
    /// The token type (`token_type`) as the server spelled it, e.g. `Bearer`.
    public var tokenType: String
    /// The access token's lifetime in seconds from issue (`expires_in`), if the server said.
    public var expiresIn: Int?
    /// A new refresh token (`refresh_token`); `nil` means keep using the one presented.
    public var refreshToken: String?
    /// The granted scope (`scope`); `nil` means the scope requested.
    public var scope: String?
    /// An OpenID Connect ID token (`id_token`), if any.
    public var idToken: String?
    /// The refresh token's lifetime in seconds (`refresh_expires_in`), where a provider says
    /// (Keycloak; not in RFC 6749). Read leniently, as a hint: a value that is not a positive
    /// whole number of seconds in range (Keycloak's `0` for an offline token) is nil and
    /// never fails the response.
    public var refreshExpiresIn: Int?

    /// Creates a response from its fields.
    public init(
        accessToken: String,
        tokenType: String,
        expiresIn: Int? = nil,
        refreshToken: String? = nil,
        scope: String? = nil,
        idToken: String? = nil
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.scope = scope
        self.idToken = idToken
    }

    /// Whether the token type is `Bearer` (RFC 6750), compared case-insensitively.
    public var isBearer: Bool { tokenType.lowercased() == "bearer" }

    /// The access token's lifetime as a duration, if the server said.
    public var lifetime: Duration? { expiresIn.map { .seconds($0) } }
}

// MARK: - Parsing

extension TokenResponse {
    /// The largest body ``parse(_:)`` reads; token responses are a few kilobytes at most.
    public static let maximumBodySize = 1 << 20

    /// The largest accepted `expires_in`: about 68 years, so callers can add it to any clock safely.
    public static let maximumExpiresIn = Int(Int32.max)

    /// Parses and validates a token endpoint response body (RFC 6749 §5.1).
    ///
    /// Requires `access_token` and `token_type` as non-empty strings of visible ASCII;
    /// `refresh_token`, `scope` and `id_token` must be strings when present (`null` counts as
    /// absent); `expires_in` must be a non-negative integer or a string of digits. Unknown
    /// members are ignored. Never traps, whatever the input.
    ///
    /// ```swift
    /// let tokens = try TokenResponse.parse(Data(#"{"access_token":"a","token_type":"Bearer"}"#.utf8))
    /// ```
    public static func parse(_ data: Data) throws(OAuthError) -> TokenResponse {
        guard data.count <= maximumBodySize else { throw .bodyTooLarge(bytes: data.count) }
        guard let fields = JSONFields.parse(data) else { throw .notJSONObject }

        let accessToken = try requiredToken("access_token", in: fields)
        let tokenType = try requiredTokenType(in: fields)
        let refreshToken = try optionalToken("refresh_token", in: fields)
        let idToken = try optionalToken("id_token", in: fields)
        let scope = try optionalScope(in: fields)
        let expiresIn = try optionalExpiresIn(in: fields)

        var response = TokenResponse(
            accessToken: accessToken,
            tokenType: tokenType,
            expiresIn: expiresIn,
            refreshToken: refreshToken,
            scope: scope,
            idToken: idToken
        )
        if case .integer(let seconds)? = fields["refresh_expires_in"], seconds > 0, seconds <= maximumExpiresIn {
            response.refreshExpiresIn = seconds
        }
        return response
    }

    private static func requiredToken(_ name: String, in fields: JSONFields) throws(OAuthError) -> String {
        guard let value = try optionalToken(name, in: fields) else { throw .missingField(name) }
        return value
    }

    /// `token_type` is a type name (RFC 6749 §11.1: letters, digits, `-`, `.`, `_`), such as
    /// `Bearer` or `DPoP`: it goes into an `Authorization` header before the token.
    private static func requiredTokenType(in fields: JSONFields) throws(OAuthError) -> String {
        let value = try requiredToken("token_type", in: fields)
        let nameCharacters = value.utf8.allSatisfy { byte in
            byte == 0x2D || byte == 0x2E || byte == 0x5F || (0x30...0x39).contains(byte)
                || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
        guard nameCharacters, value.utf8.count <= maximumTokenTypeLength else {
            throw .invalidValue(field: "token_type", reason: "not a token type name (letters, digits, '-', '.', '_'; at most \(maximumTokenTypeLength))")
        }
        return value
    }

    /// The longest accepted `token_type`.
    package static let maximumTokenTypeLength = 64

    /// A token is 1*VSCHAR (RFC 6749 Appendix A): visible ASCII and space, so it is safe in a header.
    private static func optionalToken(_ name: String, in fields: JSONFields) throws(OAuthError) -> String? {
        switch fields[name] {
        case nil, .null?:
            return nil
        case .string(let value)?:
            guard !value.isEmpty else { throw .invalidValue(field: name, reason: "empty") }
            guard value.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
                throw .invalidValue(field: name, reason: "contains characters outside visible ASCII")
            }
            return value
        case let other?:
            throw .wrongType(field: name, expected: "a string (got \(other.typeName))")
        }
    }

    /// `scope` is space-separated scope tokens (RFC 6749 §3.3): visible ASCII except `"` and `\`.
    private static func optionalScope(in fields: JSONFields) throws(OAuthError) -> String? {
        switch fields["scope"] {
        case nil, .null?:
            return nil
        case .string(let value)?:
            let allowed = value.utf8.allSatisfy { $0 == 0x20 || ((0x21...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C) }
            guard allowed else { throw .invalidValue(field: "scope", reason: "contains characters not allowed in a scope") }
            return value
        case let other?:
            throw .wrongType(field: "scope", expected: "a string (got \(other.typeName))")
        }
    }

    private static func optionalExpiresIn(in fields: JSONFields) throws(OAuthError) -> Int? {
        let seconds: Int
        switch fields["expires_in"] {
        case nil, .null?:
            return nil
        case .integer(let value)?:
            seconds = value
        case .number(let value)?:
            // Fractional (3600.5) or beyond Int (1e30): not a whole number of seconds we can hold.
            throw .invalidValue(field: "expires_in", reason: value < 0 ? "negative" : "not a whole number of seconds in range")
        case .string(let text)?:
            // Some servers send a numeric string; accept plain digits only.
            let digits = text.trimmingCharacters(in: .whitespaces)
            guard !digits.isEmpty, digits.utf8.count <= 18, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                throw text.hasPrefix("-")
                    ? .invalidValue(field: "expires_in", reason: "negative")
                    : .wrongType(field: "expires_in", expected: "an integer or a string of digits")
            }
            guard let value = Int(digits) else {
                throw .invalidValue(field: "expires_in", reason: "out of range")
            }
            seconds = value
        case let other?:
            throw .wrongType(field: "expires_in", expected: "an integer (got \(other.typeName))")
        }
        guard seconds >= 0 else { throw .invalidValue(field: "expires_in", reason: "negative") }
        guard seconds <= maximumExpiresIn else { throw .invalidValue(field: "expires_in", reason: "out of range") }
        return seconds
    }
}

// MARK: - Redacted descriptions

extension TokenResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Token type, lifetime and scope, with every token redacted.
    public var description: String {
        let rendered = render(type: shown(tokenType), scope: scope.map(shown) ?? "unchanged")
        // A token can also be spelled across a field and the punctuation around it (a scope
        // ending "AT-x" before ", " spells the token "AT-x,"): then neither field is shown.
        return tokens.contains { rendered.contains($0) } ? render(type: Redaction.placeholder, scope: Redaction.placeholder) : rendered
    }

    private func render(type: String, scope: String) -> String {
        let expiry = expiresIn.map(String.init) ?? "unknown"
        let refresh = refreshToken.map(redacted) ?? "none"
        let id = idToken.map(redacted) ?? "none"
        return "TokenResponse(access: \(redacted(accessToken)), type: \(type), expiresIn: \(expiry), refresh: \(refresh), scope: \(scope), idToken: \(id))"
    }

    /// The tokens, spaces around them ignored (what a reader would recognise).
    private var tokens: [String] {
        [accessToken, refreshToken, idToken].compactMap { $0?.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `text` (a type or scope the server sent) unless it contains one of the tokens: a server
    /// that echoes a token into another field must not get it printed through that field. A
    /// token spelled across a field and the text around it is caught by ``description``, which
    /// checks the whole rendering.
    private func shown(_ text: String) -> String {
        tokens.contains { text.contains($0) } ? Redaction.placeholder : text
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// A mirror without children, so `dump(tokens)` prints only ``description``, which is
    /// checked whole (fields printed one by one could spell a token across a field's name and
    /// its value, which no per-field check sees).
    public var customMirror: Mirror {
        Mirror(self, children: [:], displayStyle: .struct)
    }
}
