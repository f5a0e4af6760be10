import Foundation
import VaultCrypto

/// A JWT in compact serialisation (RFC 7519 §3: three base64url parts) whose payload is read
/// **without** checking its signature: the one reader of unverified claims.
///
/// Only for what believing a claim can do no harm with: how long to keep a token the token
/// endpoint just sent, or a name to show before anything is verified. Who the user is comes
/// from ``IDTokenVerifier``, never from here.
struct UnverifiedJWT {
    /// The payload's top-level members.
    let claims: JSONFields

    /// Nil for an opaque token, an encrypted JWT (five parts), a payload that is not a JSON
    /// object, or anything longer than a token response may be.
    init?(_ token: String) {
        guard token.utf8.count <= TokenResponse.maximumBodySize else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[1].isEmpty, parts.allSatisfy(Base64URL.isAlphabet) else { return nil }
        guard let payload = Base64URL.decode(parts[1]), let claims = JSONFields.parse(Data(payload)) else { return nil }
        self.claims = claims
    }

    /// A string claim that is not empty; nil otherwise.
    func text(_ name: String) -> String? {
        guard case .string(let value)? = claims[name], !value.isEmpty else { return nil }
        return value
    }
}
