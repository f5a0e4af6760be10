import Foundation

/// The clients registered for the client credentials grant (RFC 6749 §4.4): how each one
/// authenticates, the scopes it may ask for and its access tokens' lifetime; and the client
/// assertions already used, so none is accepted twice (RFC 7523 §3 `jti`). Pure value logic:
/// the ``DevGateway`` actor owns the only instance.
///
/// A client id registered here authenticates with its registered method at the token and
/// revocation endpoints, whatever else registered the same id (``DevGateway/registerClient(id:secret:)``).
struct ServiceClientRegistry: Sendable {
    /// How a registered client proves who it is; secrets and public keys only.
    enum Credential: Sendable {
        case clientSecretBasic(String)
        case clientSecretPost(String)
        case privateKeyJWT([ClientAssertionKey])

        var method: ClientAuthenticationMethod {
            switch self {
            case .clientSecretBasic: .clientSecretBasic
            case .clientSecretPost: .clientSecretPost
            case .privateKeyJWT: .privateKeyJWT
            }
        }
    }

    struct Client: Sendable {
        var credential: Credential
        /// The scopes the client may ask for; a request without `scope` gets them all.
        var scopes: [String]
        var accessTokenLifetime: Duration
    }

    /// A used assertion: the client that sent it and its `jti`.
    private struct AssertionID: Hashable, Sendable {
        let clientID: String
        let jti: String
    }

    private(set) var clients: [String: Client] = [:]
    /// Used assertions and when each may be forgotten (its `exp` plus the allowed skew: after
    /// that it is refused as expired anyway).
    private var usedAssertions: [AssertionID: Date] = [:]

    /// Registers (or replaces) the client `id`.
    mutating func register(id: String, client: Client) {
        clients[id] = client
    }

    /// Replaces the public keys of a `private_key_jwt` client; false if `id` is not one.
    mutating func replaceKeys(of id: String, with keys: [ClientAssertionKey]) -> Bool {
        guard case .privateKeyJWT = clients[id]?.credential else { return false }
        clients[id]?.credential = .privateKeyJWT(keys)
        return true
    }

    /// Whether `key` is (still) one of the keys registered for `clientID`.
    func isRegistered(_ key: ClientAssertionKey, for clientID: String) -> Bool {
        guard case .privateKeyJWT(let keys) = clients[clientID]?.credential else { return false }
        return keys.contains { $0.isSameKey(as: key) }
    }

    /// Records the assertion `jti` of `clientID`, usable until `forgetAfter`; false, recording
    /// nothing, if the same client already used it and it has not been forgotten. Forgets the
    /// assertions that can no longer be accepted.
    mutating func recordAssertion(clientID: String, jti: String, forgetAfter: Date, now: Date) -> Bool {
        usedAssertions = usedAssertions.filter { $0.value >= now }
        let id = AssertionID(clientID: clientID, jti: jti)
        guard usedAssertions[id] == nil else { return false }
        usedAssertions[id] = forgetAfter
        return true
    }
}
