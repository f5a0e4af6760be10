import FlyingFox
import Foundation

/// One endpoint: a FlyingFox route and the gateway method that answers it.
struct GatewayRoute: Sendable {
    let route: HTTPRoute
    let handle: @Sendable (DevGateway, HTTPRequest) async -> HTTPResponse
}

extension DevGateway {
    /// Every area's endpoints. A new area (devices, notifications) adds its list here.
    nonisolated static var routes: [GatewayRoute] {
        tokenRoutes + introspectionRoutes + adminRoutes + deviceRoutes + notificationRoutes + deviceAdminRoutes + extensionRoutes
            + discoveryRoutes + idTokenRoutes + authorizationRoutes + deviceGrantRoutes + guestRoutes + resourceRoutes
            + resourceIndicatorRoutes + clientCredentialsRoutes + dpopRoutes + userinfoRoutes
    }

    /// Registers every route on `server`. Handlers hold the gateway weakly, so the server does
    /// not keep a stopped gateway alive.
    func registerRoutes(on server: HTTPServer) async {
        for entry in Self.routes {
            await server.appendRoute(entry.route) { [weak self] request in
                guard let self else { return .empty(status: 503) }
                return await entry.handle(self, request)
            }
        }
    }

    /// The request body, or empty if the connection broke while reading it.
    nonisolated static func body(of request: HTTPRequest) async -> Data {
        (try? await request.bodyData) ?? Data()
    }

    /// Whether the request declares a form body.
    nonisolated static func isForm(_ request: HTTPRequest) -> Bool {
        request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") ?? false
    }
}
