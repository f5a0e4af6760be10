import Foundation
import Logging

// MARK: - Guest protocol (the iOS guide's loginAsGuest / convertGuestToRegistered)
//
// POST {guest_endpoint}               form: scope?, client authentication as at the token endpoint
//   200 an RFC 6749 §5.1 token response for a new guest subject
// POST {guest_conversion_endpoint}    Authorization: Bearer <the registered user's access token>
//                                     (DPoP <token> and a proof naming it, for a DPoP-bound user)
//                                     form: guest_refresh_token, client authentication
//   200 {"converted": true, ...}: the provider moved the guest's data to the user and revoked the guest's grant
//   400 invalid_grant (the guest token is unknown or revoked), 401 invalid_token (bad bearer)

extension OAuthClient {
    /// Registers a new guest with the provider's guest endpoint and returns its first tokens.
    public func registerGuest(endpoint: URL, client: ClientCredentials, scopes: [String], pins: [SPKIPin] = []) async throws(SignInError) -> TokenResponse {
        var form: [(String, String)] = []
        if !scopes.isEmpty { form.append(("scope", scopes.joined(separator: " "))) }
        return try await tokenResponse(from: endpoint, field: "guest_endpoint", step: .guestRegistration, form: form, client: client, pins: pins)
    }

    /// Asks the provider to convert a guest into the signed-in user: the provider moves the
    /// guest's data and revokes the guest's grant.
    public func convertGuest(
        endpoint: URL, userAccessToken: String, guestRefreshToken: String,
        client: ClientCredentials, pins: [SPKIPin] = []
    ) async throws(SignInError) {
        if let reason = EndpointRule.violation(endpoint) { throw .insecureEndpoint(field: "guest_conversion_endpoint", reason: reason) }
        let logger = logger(for: endpoint, operation: "guest_conversion")
        var (request, sent) = await formRequest(to: endpoint, form: [("guest_refresh_token", guestRefreshToken)], client: client, pins: pins)
        if let key = client.dpopKey {
            // The user's token is bound to the key (RFC 9449 §7.1): the DPoP scheme, and a proof
            // that names it (`ath`) in place of the token endpoint's.
            request.headers["Authorization"] = "DPoP " + userAccessToken
            request.headers["DPoP"] = try? key.proof(
                method: "POST", url: endpoint, accessToken: userAccessToken, nonce: dpopNonces.nonce(for: endpoint), now: now())
        } else {
            request.headers["Authorization"] = "Bearer " + userAccessToken
        }
        let secrets = [userAccessToken, guestRefreshToken] + client.secrets + sent
        let response = try await sendSignInRequest(request, step: .guestConversion, secrets: secrets, logger: logger)
        guard response.isSuccess else {
            logger.debug("guest conversion refused", metadata: ["http.status": "\(response.status)"])
            throw Self.authorizationFailure(
                response, endpoint: "guest conversion endpoint", step: .guestConversion, secrets: secrets, now: now())
        }
        logger.debug("guest converted", metadata: ["oauth.outcome": "success"])
    }
}
