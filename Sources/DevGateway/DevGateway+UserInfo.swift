import FlyingFox
import Foundation

// MARK: - OpenID Connect Core §5.3: who holds this access token

extension DevGateway {
    nonisolated static var userinfoRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "GET /userinfo") { gateway, request in
                await gateway.handleUserinfo(request)
            }
        ]
    }

    /// Turns `GET /userinfo` on or off (off by default): on, discovery publishes it as
    /// `userinfo_endpoint`, so a device sign-in whose token answer lacks an ID token names the
    /// user through it, as with django-oauth-toolkit.
    ///
    /// ```swift
    /// await gateway.setUserinfo(enabled: true)
    /// ```
    public func setUserinfo(enabled: Bool) {
        state.signIn.userinfoEnabled = enabled
    }

    /// `GET /userinfo` (OpenID Connect Core §5.3): `{"sub"}` of the access token's grant, the
    /// token taken as the protected resources take it (``presentedAccessToken(_:)``: a bound one
    /// only with the DPoP scheme and a proof); 404 while turned off.
    func handleUserinfo(_ request: HTTPRequest) async -> HTTPResponse {
        guard state.signIn.userinfoEnabled else {
            return .json(GatewayJSON.Failure(error: "not_found", errorDescription: "userinfo is turned off"), status: 404)
        }
        switch await presentedAccessToken(request) {
        case .failure(let refusal):
            return refused(refusal)
        case .success(let token):
            state.stats.userinfoAnswers += 1
            statsDidChange()
            return withDPoPNonce(.json(["sub": token.grant.subject]))
        }
    }
}
