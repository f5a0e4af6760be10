import Foundation

/// Why a sign-in (discovery, device authorization, authorization code, guest registration, or
/// the ID-token check) stopped. Every case means nothing was stored.
///
/// Server text kept in a case (`description:` values) is the server's `error_description`,
/// sanitised and stripped of every secret the request carried (`Redaction`).
///
/// ```swift
/// do {
///     tokens = try await oauth.pollDeviceAuthorization(authorization, tokenEndpoint: metadata.tokenEndpoint, client: client)
/// } catch .authorizationDenied {
///     print("the sign-in was declined")
/// }
/// ```
public enum SignInError: Error, Sendable, Hashable {
    /// The provider's metadata could not be found or read at either well-known address.
    case discoveryFailed(issuer: String, reason: String)
    /// The metadata names another issuer than the one asked for (OIDC Discovery §4.3, RFC 8414 §3.3):
    /// it may be an impostor's document, so nothing from it is used.
    case issuerMismatch(expected: String, found: String)
    /// Two of the provider's metadata documents name different URLs for one endpoint; neither is used.
    case metadataConflict(field: String, first: String, second: String)
    /// The flow needs an endpoint (or value) the provider does not publish and that was not given.
    case missingMetadata(field: String)
    /// An endpoint would receive a credential over plain HTTP off this machine, or is not a URL.
    case insecureEndpoint(field: String, reason: String)
    /// The user (or the provider on their behalf) declined: `access_denied` (RFC 6749 §4.1.2.1,
    /// RFC 8628 §3.5).
    case authorizationDenied(description: String?)
    /// The authorization or device authorization endpoint answered with another error code.
    case authorizationFailed(code: String, description: String?)
    /// The redirect's `state` is not the one sent (RFC 6749 §10.12): another site's or an old
    /// tab's answer. Not used.
    case stateMismatch
    /// The redirect's `iss` is not the provider's (RFC 9207 §2.4): a mix-up. Not used.
    case issuerParameterMismatch
    /// The device code expired before the user approved it (`expired_token`, or its `expires_in`).
    case deviceCodeExpired
    /// Nothing came back to the loopback redirect within the time allowed.
    case timedOut(seconds: Int)
    /// The loopback redirect listener could not start.
    case listenerFailed(reason: String)
    /// A redirect URI that is not a loopback one this machine can listen on (RFC 8252 §7.3).
    case invalidRedirectURI(reason: String)
    /// A request of the sign-in (which one: `step`) was refused or failed; its failure is
    /// classified like a refresh's, and worded for the step.
    case tokenRequestFailed(RefreshError, step: SignInStep)
    /// A response that is not what the RFC says (device authorization, guest endpoint).
    case malformedResponse(endpoint: String, reason: String)
    /// `openid` was asked for and the token response has no `id_token`.
    case missingIDToken
    /// The ID token failed a check (OIDC Core §3.1.3.7); which one is in the failure.
    case idTokenRejected(IDTokenFailure)
    /// Signed in as someone else than the account being signed in again.
    case wrongAccount(expected: String, signedInAs: String)
    /// The calling task was cancelled; nothing was stored.
    case cancelled

    /// A stable, secret-free name, for log metadata and the command's JSON output.
    public var code: String {
        switch self {
        case .discoveryFailed: "discovery_failed"
        case .issuerMismatch: "issuer_mismatch"
        case .metadataConflict: "metadata_conflict"
        case .missingMetadata: "missing_metadata"
        case .insecureEndpoint: "insecure_endpoint"
        case .authorizationDenied: "access_denied"
        case .authorizationFailed: "authorization_failed"
        case .stateMismatch: "state_mismatch"
        case .issuerParameterMismatch: "issuer_parameter_mismatch"
        case .deviceCodeExpired: "expired_token"
        case .timedOut: "timed_out"
        case .listenerFailed: "listener_failed"
        case .invalidRedirectURI: "invalid_redirect_uri"
        case .tokenRequestFailed: "token_request_failed"
        case .malformedResponse: "malformed_response"
        case .missingIDToken: "missing_id_token"
        case .idTokenRejected(let failure): "id_token_\(failure.check)"
        case .wrongAccount: "wrong_account"
        case .cancelled: "cancelled"
        }
    }
}

extension SignInError: CustomStringConvertible {
    /// What went wrong and what to do, in one line.
    public var description: String {
        switch self {
        case .discoveryFailed(let issuer, let reason):
            "cannot read the provider metadata of \(issuer): \(reason); give the endpoints with --token-endpoint and friends"
        case .issuerMismatch(let expected, let found):
            "the provider metadata names the issuer \(found), not \(expected); nothing from it was used"
        case .metadataConflict(let field, let first, let second):
            "the provider's metadata documents disagree on its \(field) (\(first); \(second)); nothing from them was used — give the endpoints explicitly"
        case .missingMetadata(let field):
            "the provider publishes no \(field); give it explicitly"
        case .insecureEndpoint(let field, let reason):
            "the \(field) is refused: \(reason)"
        case .authorizationDenied(let detail):
            "the sign-in was declined (access_denied\(detail.map { ": \($0)" } ?? ""))"
        case .authorizationFailed(let code, let detail):
            "the provider refused the sign-in (\(code)\(detail.map { ": \($0)" } ?? ""))"
        case .stateMismatch:
            "the browser came back with another sign-in's state; it was ignored and nothing was stored — sign in again"
        case .issuerParameterMismatch:
            "the browser came back with an answer from another issuer (RFC 9207); nothing was stored"
        case .deviceCodeExpired:
            "the code expired before the sign-in was approved; run the command again for a new code"
        case .timedOut(let seconds):
            "the browser did not come back within \(seconds) s; nothing was stored (raise --timeout, or use --device)"
        case .listenerFailed(let reason):
            "cannot listen for the browser's redirect: \(reason); use --device"
        case .invalidRedirectURI(let reason):
            "the redirect URI is refused: \(reason)"
        case .tokenRequestFailed(let failure, let step):
            Self.wording(failure, step: step)
        case .malformedResponse(let endpoint, let reason):
            "the \(endpoint) sent an invalid response: \(reason)"
        case .missingIDToken:
            "the provider sent no ID token although openid was asked for, and publishes no userinfo endpoint to say who signed in; nothing was stored: ask for scopes without openid (the account then gets a generated subject), or have the provider send an ID token"
        case .idTokenRejected(let failure):
            "the ID token was rejected: \(failure); nothing was stored"
        case .wrongAccount(let expected, let signedInAs):
            "signed in as \(signedInAs), this account is \(expected)'s; nothing was stored"
        case .cancelled:
            "the sign-in was cancelled; nothing was stored"
        }
    }

    /// A failed request of the sign-in, in words that name the request: a 5xx on the device
    /// poll is not a "token refresh".
    static func wording(_ failure: RefreshError, step: SignInStep) -> String {
        let detail = { (text: String?) in text.map { ": \($0)" } ?? "" }
        switch failure {
        case .invalidGrant(let description) where step == .codeExchange || step == .devicePoll:
            // The grant here is the sign-in's authorization or device code, not a refresh token.
            return "the provider no longer accepts this sign-in's code (invalid_grant\(detail(description))); nothing was stored: sign in again"
        case .invalidGrant(let description):
            return "the provider refused the \(step) (invalid_grant\(detail(description))); nothing was stored"
        case .transient(let failure):
            return "the \(step) failed: \(failure); nothing was stored, try again later"
        case .clientMisconfigured("dpop_binding", let description):
            // RFC 9449 §5: a token not bound to the proof's key is discarded, not stored.
            return
                "\(description ?? "the token is not bound to the proof's key"); nothing was stored: the provider does not do DPoP for this client, so sign in without --dpop or enable DPoP there"
        case .clientMisconfigured(let code, let description):
            return "the provider rejected this client at the \(step) (\(code)\(detail(description))); check the client id, its secret and the endpoint"
        case .unrecognizedError(let status, let code, let description):
            return "the provider refused the \(step) with HTTP \(status) \(code)\(detail(description)); nothing was stored"
        case .malformedResponse(let status, let reason):
            return "the provider's answer to the \(step) is invalid (HTTP \(status)): \(reason)"
        case .cancelled:
            return "the sign-in was cancelled; nothing was stored"
        case .pinningFailed:
            return failure.description
        }
    }
}

/// Which request of a sign-in failed, for its message.
public enum SignInStep: String, Sendable, Hashable, CustomStringConvertible {
    case deviceAuthorization = "device authorization request"
    case devicePoll = "device token poll"
    case codeExchange = "authorization code exchange"
    case guestRegistration = "guest registration"
    case guestConversion = "guest conversion"
    case userinfo = "userinfo request"
    case clientCredentials = "client credentials grant"

    public var description: String { rawValue }
}
