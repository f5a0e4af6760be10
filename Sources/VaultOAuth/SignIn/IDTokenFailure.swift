import Foundation

/// Which check of an ID token failed (OpenID Connect Core §3.1.3.7). Never carries the token.
public enum IDTokenFailure: Error, Sendable, Hashable {
    /// Not three base64url parts with a JSON header and claims.
    case malformed(reason: String)
    /// The header's `alg` is not one this client accepts: `none`, a symmetric (HS*) algorithm,
    /// or one the provider does not use for ID tokens.
    case algorithmRefused(String)
    /// No key in the provider's JWKS (fetched again once) has the token's `kid` and algorithm.
    case unknownKey(kid: String?)
    /// The JWKS could not be fetched or read.
    case keySetUnavailable(reason: String)
    /// The signature does not verify with the provider's key.
    case signature
    /// `iss` is not the provider's issuer.
    case issuer(expected: String, found: String)
    /// `aud` does not contain this client's id.
    case audience(clientID: String)
    /// Several audiences without `azp`, or an `azp` that is not this client (§3.1.3.7 items 4–5).
    case authorizedParty(clientID: String)
    /// `exp` has passed (beyond the allowed clock skew).
    case expired(at: Date)
    /// `iat` lies in the future (beyond the allowed clock skew).
    case issuedInFuture(at: Date)
    /// `nonce` is missing or not the one this sign-in sent (a replayed token).
    case nonce
    /// `max_age` was asked for and `auth_time` is missing or older (§3.1.2.1).
    case authenticationTooOld
    /// A required claim (`iss`, `sub`, `aud`, `exp`, `iat`) is missing or of the wrong type.
    case missingClaim(String)

    /// The check's name: `signature`, `issuer`, `audience`, `azp`, `exp`, `iat`, `nonce`, …
    public var check: String {
        switch self {
        case .malformed: "malformed"
        case .algorithmRefused: "algorithm"
        case .unknownKey: "kid"
        case .keySetUnavailable: "jwks"
        case .signature: "signature"
        case .issuer: "issuer"
        case .audience: "audience"
        case .authorizedParty: "azp"
        case .expired: "exp"
        case .issuedInFuture: "iat"
        case .nonce: "nonce"
        case .authenticationTooOld: "auth_time"
        case .missingClaim: "claim"
        }
    }
}

extension IDTokenFailure: CustomStringConvertible {
    public var description: String {
        switch self {
        case .malformed(let reason): "it is not a signed JWT (\(reason))"
        case .algorithmRefused(let alg): "its algorithm \(OAuthClient.printable(alg)) is refused (only RS256, ES256 and EdDSA signatures are accepted)"
        case .unknownKey(let kid): "no key of the provider's JWKS matches it (kid \(kid.map(OAuthClient.printable) ?? "absent"))"
        case .keySetUnavailable(let reason): "the provider's keys (JWKS) could not be read: \(reason)"
        case .signature: "its signature does not verify with the provider's key"
        case .issuer(let expected, let found): "its issuer is \(OAuthClient.printable(found)), not \(expected)"
        case .audience(let clientID): "it was not issued to this client (\(clientID) is not in aud)"
        case .authorizedParty(let clientID): "its authorized party (azp) is not this client (\(clientID))"
        case .expired(let at): "it expired at \(at.formatted(.iso8601))"
        case .issuedInFuture(let at): "it was issued in the future (iat \(at.formatted(.iso8601))); check this machine's clock"
        case .nonce: "its nonce is not the one this sign-in sent"
        case .authenticationTooOld: "the authentication it reports (auth_time) is missing or older than the maximum age asked for"
        case .missingClaim(let name): "it lacks the claim \(name)"
        }
    }
}

/// The claims of an ID token that passed every check.
public struct VerifiedIDToken: Sendable, Hashable {
    public var issuer: String
    public var subject: String
    public var audience: [String]
    public var expiresAt: Date
    public var issuedAt: Date
    /// When the user last authenticated (`auth_time`), if the provider said.
    public var authTime: Date?
    public var nonce: String?
    public var email: String?
    public var name: String?
    public var preferredUsername: String?
    /// The guest protocol's `guest` claim.
    public var isGuest: Bool
}

/// What a verified ID token must say.
public struct IDTokenExpectations: Sendable, Hashable {
    /// The provider's issuer identifier (its metadata's `issuer`).
    public var issuer: String
    /// This client's id: must be in `aud` (and be `azp` when `azp` is present).
    public var clientID: String
    /// The nonce the authorization request carried; nil when none was sent (device, refresh).
    public var nonce: String?
    /// The `max_age` the request asked for: `auth_time` must then be present and recent enough.
    public var maxAge: Duration?
    /// How far this machine's clock may be from the provider's.
    public var skew: Duration
    /// Now, on the wall clock the vault uses.
    public var now: Date
    /// Accepted `alg` values: RS256, ES256, EdDSA at most.
    public var algorithms: Set<String>
    /// Whether `exp` is checked. Off only for an ID token imported with a token response some
    /// other program received earlier: its signature still proves who it names.
    public var checksExpiry = true

    /// The algorithms this client can accept: asymmetric, with keys published in a JWKS.
    public static let supportedAlgorithms: Set<String> = ["RS256", "ES256", "EdDSA"]

    public init(
        issuer: String, clientID: String, nonce: String? = nil, maxAge: Duration? = nil,
        skew: Duration = .seconds(120), now: Date, algorithms: Set<String> = IDTokenExpectations.supportedAlgorithms
    ) {
        self.issuer = issuer
        self.clientID = clientID
        self.nonce = nonce
        self.maxAge = maxAge
        self.skew = skew
        self.now = now
        self.algorithms = algorithms.intersection(Self.supportedAlgorithms)
    }
}
