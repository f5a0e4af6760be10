/// The client authentication a token or revocation request makes, read from its
/// `Authorization` header and form body before anything is checked (RFC 6749 §2.3, RFC 7521
/// §4.2, RFC 7523 §2.2). A request may use one method only (RFC 6749 §2.3).
///
/// ```swift
/// switch ClientAuthenticationAttempt.read(authorization: request.headers[.authorization], parameters) { … }
/// ```
enum ClientAuthenticationAttempt: Sendable {
    /// `Authorization: Basic` (client_secret_basic).
    case basic(BasicCredentials)
    /// `client_id` and `client_secret` in the body (client_secret_post).
    case post(clientID: String, secret: String)
    /// `client_assertion_type` and `client_assertion` (private_key_jwt); `client_id` is optional.
    case assertion(clientID: String?, assertion: String)
    /// `client_id` alone: a public client.
    case none(clientID: String)

    var method: ClientAuthenticationMethod {
        switch self {
        case .basic: .clientSecretBasic
        case .post: .clientSecretPost
        case .assertion: .privateKeyJWT
        case .none: .none
        }
    }

    /// The client id the request names, before it is authenticated; for an assertion without
    /// `client_id`, the assertion's `sub`.
    var claimedClientID: String? {
        switch self {
        case .basic(let credentials): credentials.clientID
        case .post(let clientID, _), .none(let clientID): clientID
        case .assertion(let clientID, let assertion): clientID ?? ClientAssertionVerifier.claimedClientID(of: assertion)
        }
    }

    /// What the request sends; `invalid_client` (RFC 6749 §5.2) for malformed credentials, more
    /// than one method, or none at all. The rejection's method, for counting, is the one the
    /// request seems to try.
    static func read(
        authorization: String?, _ parameters: FormBody
    ) -> Result<ClientAuthenticationAttempt, ClientAuthenticationFailure> {
        let sendsAssertion = parameters["client_assertion"] != nil || parameters["client_assertion_type"] != nil
        let sendsSecret = parameters["client_secret"] != nil
        let sendsBasic = authorization != nil
        let methods = [sendsBasic, sendsSecret, sendsAssertion].filter { $0 }.count
        let tried: ClientAuthenticationMethod =
            sendsBasic ? .clientSecretBasic : sendsAssertion ? .privateKeyJWT : sendsSecret ? .clientSecretPost : .none
        func refused(_ description: String) -> Result<ClientAuthenticationAttempt, ClientAuthenticationFailure> {
            .failure(ClientAuthenticationFailure(method: tried, rejection: .invalidClient(description)))
        }
        guard methods <= 1 else { return refused("use one client authentication method") }

        if let authorization {
            guard let credentials = BasicCredentials(authorization: authorization) else {
                return refused("malformed HTTP Basic credentials")
            }
            if let bodyID = parameters["client_id"], bodyID != credentials.clientID {
                return refused("client_id does not match the authenticated client")
            }
            return .success(.basic(credentials))
        }
        if sendsAssertion {
            guard parameters["client_assertion_type"] == ClientAssertionVerifier.assertionType else {
                return refused("client_assertion_type must be \(ClientAssertionVerifier.assertionType)")
            }
            guard let assertion = parameters["client_assertion"], !assertion.isEmpty else {
                return refused("client_assertion is required with client_assertion_type")
            }
            return .success(.assertion(clientID: parameters["client_id"], assertion: assertion))
        }
        guard let clientID = parameters["client_id"] else {
            return refused(sendsSecret ? "client_secret needs client_id in the body" : "client authentication required")
        }
        if let secret = parameters["client_secret"] {
            return .success(.post(clientID: clientID, secret: secret))
        }
        return .success(.none(clientID: clientID))
    }
}

/// A refused client authentication: the method the request tried and the `invalid_client`
/// answer.
struct ClientAuthenticationFailure: Error, Sendable {
    let method: ClientAuthenticationMethod
    var rejection: OAuthRejection
}
