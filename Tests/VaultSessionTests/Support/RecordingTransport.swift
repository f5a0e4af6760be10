import Foundation
import VaultOAuth
import VaultSync
import VaultTestSupport
import VaultURLSession

/// Passes requests to a real `URLSessionTransport` and keeps every token exchange, so a
/// test knows every token value that went over the wire and which grant each belongs to.
final class RecordingTransport: HTTPTransport {
    struct Exchange: Sendable {
        /// The `refresh_token` form parameter (nil for revocation requests).
        var presentedRefreshToken: String?
        /// The `token` form parameter of a revocation request.
        var revokedToken: String?
        /// The parsed token response, when one arrived and parsed.
        var response: TokenResponse?
    }

    private struct Hold {
        var armed = false
        var release: CheckedContinuation<Void, Never>?
    }

    private let base: URLSessionTransport
    private let recorded = Locked<[Exchange]>([])
    private let hold = Watched(Hold())

    init(timeout: Duration) {
        base = URLSessionTransport(timeout: timeout)
    }

    var exchanges: [Exchange] { recorded.withLock { $0 } }

    /// Holds the next response once it has arrived, until ``releaseHeldResponse()``, whatever
    /// happens to the calling task meanwhile: an answer the network layer already received
    /// when the caller was cancelled.
    func holdNextResponse() {
        hold.update { $0.armed = true }
    }

    /// Waits until a response is being held.
    func waitUntilHolding() async -> Bool {
        await hold.wait { $0.release != nil }
    }

    func releaseHeldResponse() {
        var release: CheckedContinuation<Void, Never>?
        hold.update { hold in
            release = hold.release
            hold.release = nil
        }
        release?.resume()
    }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let form = request.formParameters
        var exchange = Exchange(presentedRefreshToken: form["refresh_token"], revokedToken: form["token"])
        do {
            let response = try await base.send(request)
            if response.isSuccess { exchange.response = try? TokenResponse.parse(response.body) }
            recorded.withLock { $0.append(exchange) }
            var held = false
            hold.update { hold in
                held = hold.armed
                hold.armed = false
            }
            if held {
                await withCheckedContinuation { continuation in hold.update { $0.release = continuation } }
            }
            return response
        } catch {
            recorded.withLock { $0.append(exchange) }
            throw error
        }
    }
}

extension HTTPRequest {
    /// The form body as name/value pairs, decoded the way a server would.
    var formParameters: [String: String] {
        var result: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                $0.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            result[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return result
    }
}
