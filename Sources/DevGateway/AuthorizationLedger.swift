import Crypto
import Foundation

/// The sign-in state: who is signed in at the pretend browser session, when each subject last
/// authenticated, and the authorization codes issued (RFC 6749 §4.1, RFC 7636). Pure value
/// logic: the ``DevGateway`` actor owns the only instance and passes the time in.
struct AuthorizationLedger: Sendable {
    /// One authorization code and everything it is bound to.
    struct Code: Sendable {
        let clientID: String
        let redirectURI: String
        /// BASE64URL(SHA256(code_verifier)); nil when the (confidential) client sent none.
        let codeChallenge: String?
        let nonce: String?
        let scope: String
        let subject: String
        let authTime: Date
        let expiresAt: Date
        /// The `dpop_jkt` of the authorization request (RFC 9449 §10): the thumbprint of the
        /// DPoP key the exchange's proof must be signed by.
        var dpopJKT: String?
        var spent = false
        /// The grant its exchange opened, revoked if the code is presented again.
        var grantID: String?
    }

    /// The subject signed in at the browser session; nil shows the sign-in page instead.
    var browserUser: String?
    /// What the browser user does with authorization requests.
    var browserMode: BrowserUserMode = .approve
    /// Each subject's last authentication at the gateway (`auth_time`).
    private(set) var lastAuthentication: [String: Date] = [:]
    private var codes: [String: Code] = [:]

    /// How long a code stays redeemable (RFC 6749 §4.1.2 recommends at most 10 minutes).
    static let codeLifetime: TimeInterval = 60

    /// Records that `subject` authenticated at `now`.
    mutating func authenticate(_ subject: String, at now: Date) {
        lastAuthentication[subject] = now
    }

    /// Whether `subject` must authenticate again: `prompt=login`, `max_age=0`, more than
    /// `maxAge` seconds since the last authentication, or never authenticated.
    func needsReauthentication(_ subject: String, maxAge: Int?, promptLogin: Bool, now: Date) -> Bool {
        guard let last = lastAuthentication[subject] else { return true }
        if promptLogin { return true }
        guard let maxAge else { return false }
        return maxAge == 0 || now.timeIntervalSince(last) > TimeInterval(maxAge)
    }

    /// Issues a single-use code bound to the request; returns it.
    mutating func issueCode(
        clientID: String, redirectURI: String, codeChallenge: String?, nonce: String?,
        scope: String, subject: String, authTime: Date, now: Date, dpopJKT: String? = nil
    ) -> String {
        let code = TokenMint.token(prefix: "ac_")
        codes[code] = Code(
            clientID: clientID, redirectURI: redirectURI, codeChallenge: codeChallenge, nonce: nonce,
            scope: scope, subject: subject, authTime: authTime,
            expiresAt: now.addingTimeInterval(Self.codeLifetime), dpopJKT: dpopJKT)
        return code
    }

    enum Redemption: Sendable {
        case redeemed(Code)
        /// `revokeGrant`: the grant a reused code had produced (RFC 6749 §4.1.2).
        case rejected(OAuthRejection, revokeGrant: String?)
    }

    /// Redeems `code` for the authenticated `clientID` (RFC 6749 §4.1.3, RFC 7636 §4.6). Any
    /// attempt by the client the code was issued to spends it. A code issued with `dpop_jkt`
    /// needs `dpopThumbprint`, the key of the request's DPoP proof, to be that thumbprint
    /// (RFC 9449 §10).
    mutating func redeem(
        code: String, clientID: String, redirectURI: String?, codeVerifier: String?, dpopThumbprint: String? = nil, now: Date
    ) -> Redemption {
        guard var record = codes[code] else {
            return .rejected(.invalidGrant("unknown authorization code"), revokeGrant: nil)
        }
        guard record.clientID == clientID else {
            return .rejected(.invalidGrant("the authorization code was issued to another client"), revokeGrant: nil)
        }
        guard !record.spent else {
            return .rejected(
                .invalidGrant("the authorization code was already used; the grant it produced is revoked"),
                revokeGrant: record.grantID)
        }
        record.spent = true
        codes[code] = record
        guard now < record.expiresAt else {
            return .rejected(.invalidGrant("the authorization code has expired"), revokeGrant: nil)
        }
        guard redirectURI == record.redirectURI else {
            return .rejected(.invalidGrant("redirect_uri does not match the authorization request"), revokeGrant: nil)
        }
        switch (record.codeChallenge, codeVerifier) {
        case (nil, nil):
            break
        case (nil, .some):
            return .rejected(.invalidGrant("code_verifier sent but the authorization request had no code_challenge"), revokeGrant: nil)
        case (.some, nil):
            return .rejected(.invalidGrant("code_verifier is required"), revokeGrant: nil)
        case (let challenge?, let verifier?):
            guard Self.isWellFormedVerifier(verifier) else {
                return .rejected(.invalidGrant("code_verifier must be 43 to 128 unreserved characters"), revokeGrant: nil)
            }
            guard TokenMint.constantTimeEquals(Self.s256Challenge(verifier), challenge) else {
                return .rejected(.invalidGrant("code_verifier does not match the code_challenge"), revokeGrant: nil)
            }
        }
        if let expected = record.dpopJKT, dpopThumbprint != expected {
            let description =
                dpopThumbprint == nil
                ? "the authorization request named a DPoP key (dpop_jkt): send a DPoP proof signed by it"
                : "the DPoP proof is signed by another key than the authorization request's dpop_jkt"
            return .rejected(.invalidGrant(description), revokeGrant: nil)
        }
        return .redeemed(record)
    }

    /// Remembers the grant a redeemed code opened.
    mutating func recordGrant(_ grantID: String, forCode code: String) {
        codes[code]?.grantID = grantID
    }

    // MARK: - PKCE (RFC 7636 §4.1-4.2)

    /// BASE64URL(SHA256(ASCII(verifier))).
    static func s256Challenge(_ verifier: String) -> String {
        TokenMint.base64URL(Array(SHA256.hash(data: Data(verifier.utf8))))
    }

    /// 43 to 128 characters of `[A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~"`.
    static func isWellFormedVerifier(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count) && verifier.utf8.allSatisfy(isUnreserved)
    }

    /// A challenge is a base64url SHA-256: 43 characters of the same set.
    static func isWellFormedChallenge(_ challenge: String) -> Bool {
        challenge.utf8.count == 43 && challenge.utf8.allSatisfy(isUnreserved)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    // MARK: - Redirect URIs (RFC 8252 §7.3)

    /// Whether `uri` is an `http` loopback IP literal redirect (any port, any path, no fragment).
    static func isLoopbackRedirect(_ uri: String) -> Bool {
        guard let components = URLComponents(string: uri), components.scheme == "http",
            components.fragment == nil, components.user == nil, components.password == nil,
            let host = components.host
        else { return false }
        return host == "127.0.0.1" || host == "[::1]" || host == "::1"
    }
}
