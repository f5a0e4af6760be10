import FlyingFox
import Foundation
import Logging

// MARK: - Guest accounts: register without credentials, convert into a registered account

extension DevGateway {
    nonisolated static var guestRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "POST /guest/register") { gateway, request in
                await gateway.handleGuestRegistration(request, body: body(of: request))
            },
            GatewayRoute(route: "POST /guest/convert") { gateway, request in
                await gateway.handleGuestConversion(request, body: body(of: request))
            },
        ]
    }

    /// `POST` here (form: `client_id`, `scope`) for a new guest account's tokens.
    public nonisolated var guestRegistrationEndpoint: URL { baseURL.appendingPathComponent("guest/register") }

    /// `POST` here with a registered user's bearer token and `guest_refresh_token` to convert a guest.
    public nonisolated var guestConversionEndpoint: URL { baseURL.appendingPathComponent("guest/convert") }

    /// Turns `/guest/convert` on or off; off, the route answers 404 and discovery leaves out
    /// `guest_conversion_endpoint` (so a client links the guest locally instead).
    ///
    /// ```swift
    /// await gateway.setGuestConversion(enabled: false)
    /// ```
    public func setGuestConversion(enabled: Bool) {
        state.signIn.guestConversionEnabled = enabled
    }

    /// The registered subject `guestSubject` was converted into, if it was.
    public func guestConversion(of guestSubject: String) -> String? {
        state.guests.conversions[guestSubject]
    }

    /// `POST /guest/register`: a token response (RFC 6749 §5.1) for a new `guest-…` subject.
    func handleGuestRegistration(_ request: HTTPRequest, body: Data) async -> HTTPResponse {
        var metadata: Logger.Metadata = ["gateway.endpoint": "/guest/register"]
        let outcome: Result<IssuedTokens, OAuthRejection> = {
            let parameters: FormBody
            let clientID: String
            switch authenticatedForm(request, body: body) {
            case .success(let form): (parameters, clientID) = form
            case .failure(let rejection): return .failure(rejection)
            }
            metadata["gateway.client_id"] = "\(clientID)"
            let subject = GuestLedger.newSubject()
            let now = signInNow()
            state.authorization.authenticate(subject, at: now)
            state.stats.guestRegistrations += 1
            statsDidChange()
            return .success(
                state.tokens.openGrant(
                    subject: subject, clientID: clientID, scope: parameters["scope"] ?? "openid profile",
                    authTime: now, isGuest: true))
        }()
        switch outcome {
        case .success(let tokens):
            metadata["gateway.outcome"] = "guest_registered"
            metadata["gateway.grant_id"] = "\(tokens.grantID)"
            logger.debug("guest request", metadata: metadata)
            return .json(GatewayJSON.Tokens(await attachingIDToken(to: tokens), includeGrantID: false))
        case .failure(let rejection):
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("guest request", metadata: metadata)
            return .oauthError(rejection)
        }
    }

    /// `POST /guest/convert`: the caller (a registered user's access token, as a protected
    /// resource takes it: ``presentedAccessToken(_:)``) takes over the guest of
    /// `guest_refresh_token`; the guest's grants are revoked.
    func handleGuestConversion(_ request: HTTPRequest, body: Data) async -> HTTPResponse {
        var metadata: Logger.Metadata = ["gateway.endpoint": "/guest/convert"]
        guard state.signIn.guestConversionEnabled else {
            return .json(GatewayJSON.Failure(error: "not_found", errorDescription: "guest conversion is turned off"), status: 404)
        }
        func refused(_ rejection: OAuthRejection) -> HTTPResponse {
            metadata["gateway.outcome"] = "\(rejection.error)"
            logger.debug("guest request", metadata: metadata)
            if rejection.status == 401 {
                return .json(
                    GatewayJSON.Failure(error: rejection.error, errorDescription: rejection.description), status: 401,
                    headers: [(HTTPHeader("WWW-Authenticate"), #"Bearer realm="DevGateway", error="invalid_token""#)])
            }
            return .oauthError(rejection)
        }

        let user: TokenLedger.Grant
        switch await presentedAccessToken(request) {
        case .success(let presented): user = presented.grant
        case .failure(let refusal):
            let (response, error, _) = refusalResponse(refusal)
            metadata["gateway.outcome"] = "\(error)"
            logger.debug("guest request", metadata: metadata)
            return response
        }
        metadata["gateway.client_id"] = "\(user.clientID)"
        guard Self.isForm(request) else {
            return refused(.invalidRequest("the body must be application/x-www-form-urlencoded"))
        }
        let parameters: FormBody
        switch FormBody.parse(body) {
        case .success(let value): parameters = value
        case .failure(let rejection): return refused(rejection)
        }
        if let clientID = parameters["client_id"], clientID != user.clientID {
            return refused(.invalidRequest("client_id is not the client of the access token"))
        }
        guard !user.isGuest else {
            return refused(.invalidRequest("the access token belongs to a guest; sign in as a registered user first"))
        }
        guard let token = parameters["guest_refresh_token"], !token.isEmpty else {
            return refused(.invalidRequest("guest_refresh_token is required"))
        }
        guard let guest = state.tokens.liveGrant(forRefreshToken: token), guest.isGuest, guest.clientID == user.clientID else {
            return refused(.invalidGrant("unknown, revoked or used guest refresh token"))
        }
        let revoked = state.tokens.revokeGrants(subject: guest.subject)
        state.guests.recordConversion(of: guest.subject, into: user.subject)
        state.stats.guestConversions += 1
        statsDidChange()
        metadata["gateway.outcome"] = "guest_converted"
        metadata["gateway.revoked_grants"] = "\(revoked)"
        logger.debug("guest request", metadata: metadata)
        return .json(GatewayJSON.GuestConversion(converted: true, guestSubject: guest.subject, subject: user.subject))
    }
}

extension GatewayJSON {
    struct GuestConversion: Encodable {
        let converted: Bool
        let guestSubject: String
        let subject: String

        enum CodingKeys: String, CodingKey {
            case converted
            case guestSubject = "guest_subject"
            case subject
        }
    }
}
