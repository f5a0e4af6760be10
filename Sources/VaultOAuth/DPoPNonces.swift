import Foundation
import VaultSync

/// The nonces servers handed out for DPoP proofs (RFC 9449 §8, §9), by origin: the latest one
/// each server sent in a `DPoP-Nonce` header, put in the next proof for it. Shared by every copy
/// of the ``OAuthClient`` that made it.
public final class DPoPNonces: Sendable {
    private let nonces = Locked<[String: String]>([:])

    public init() {}

    /// The nonce to send to `url`'s server, if it gave one.
    public func nonce(for url: URL) -> String? {
        let origin = Self.origin(of: url)
        return nonces.withLock { $0[origin] }
    }

    /// Remembers the `DPoP-Nonce` `response` carries for `url`'s server; true when it is one
    /// this client did not hold (a retry with it can succeed).
    @discardableResult
    public func remember(_ response: HTTPResponse, from url: URL) -> Bool {
        // RFC 9449 §8.1: nonce = 1*NQCHAR (visible ASCII but the quote and backslash).
        guard let nonce = response.headers["DPoP-Nonce"], !nonce.isEmpty, nonce.count <= 1024,
            nonce.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) && $0 != "\"" && $0 != "\\" })
        else { return false }
        let origin = Self.origin(of: url)
        return nonces.withLock { held in
            defer { held[origin] = nonce }
            return held[origin] != nonce
        }
    }

    static func origin(of url: URL) -> String {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let scheme = components?.scheme?.lowercased() ?? ""
        let host = components?.host?.lowercased() ?? ""
        return components?.port.map { "\(scheme)://\(host):\($0)" } ?? "\(scheme)://\(host)"
    }
}

extension HTTPResponse {
    /// The server asks for a DPoP proof with its nonce (RFC 9449 §8: `use_dpop_nonce` as the
    /// token endpoint's error, §9: in a resource server's `WWW-Authenticate`).
    public var asksForDPoPNonce: Bool {
        switch status {
        case 400: OAuthErrorResponse.parse(body, redaction: Redaction(secrets: []))?.error == "use_dpop_nonce"
        case 401: headers["WWW-Authenticate"]?.contains("use_dpop_nonce") ?? false
        default: false
        }
    }
}
