import FlyingFox
import Foundation
import Logging

// MARK: - ID tokens: signing keys, the JWKS, injected defects

extension DevGateway {
    nonisolated static var idTokenRoutes: [GatewayRoute] {
        [
            GatewayRoute(route: "GET /oauth/jwks") { gateway, _ in
                .json(GatewayJSON.KeySet(keys: await gateway.publishedJWKs()))
            },
            GatewayRoute(route: "POST /admin/keys/rotate") { gateway, request in
                let data = await body(of: request)
                guard
                    let rotation = data.isEmpty
                        ? AdminJSON.KeyRotation(algorithm: nil, retirePrevious: nil)
                        : AdminJSON.decode(AdminJSON.KeyRotation.self, from: data)
                else {
                    return AdminJSON.badRequest
                }
                let kid = await gateway.rotateSigningKey(
                    algorithm: rotation.algorithm ?? .es256,
                    retirePrevious: rotation.retirePrevious ?? false)
                return .json(["kid": kid])
            },
            GatewayRoute(route: "POST /admin/faults/id-token") { gateway, request in
                guard let plan = AdminJSON.decode(AdminJSON.IDTokenFaults.self, from: await body(of: request)),
                    (plan.count ?? 1) >= 0
                else {
                    return AdminJSON.badRequest
                }
                await gateway.corruptNextIDTokens(plan.count ?? 1, with: plan.fault)
                return .empty(status: 204)
            },
        ]
    }

    /// Publishes the JWKS at this address (`GET`).
    public nonisolated var jwksURL: URL { baseURL.appendingPathComponent("oauth/jwks") }

    /// The `iss` of every ID token: ``baseURL`` as a string, without a trailing slash.
    public nonisolated var issuer: String { baseURL.absoluteString }

    /// Makes a new key (with a new `kid`) the ID-token signing key and returns its `kid`.
    /// Earlier keys stay in the JWKS, so tokens they signed still verify, unless `retirePrevious`.
    ///
    /// ```swift
    /// let kid = await gateway.rotateSigningKey(algorithm: .eddsa, retirePrevious: true)
    /// ```
    @discardableResult
    public func rotateSigningKey(algorithm: SigningAlgorithm = .es256, retirePrevious: Bool = false) -> String {
        let key: SigningKey
        do {
            key = try SigningKey.generate(algorithm)
        } catch {
            // Only RSA key generation can fail, and only if BoringSSL does; ES256 always works.
            logger.error(
                "signing key generation failed; using ES256 instead",
                metadata: ["gateway.algorithm": "\(algorithm.rawValue)", "error": "\(error)"])
            key = SigningKey.p256()
        }
        state.signingKeys.rotate(to: key, retirePrevious: retirePrevious)
        logger.debug(
            "signing key rotated",
            metadata: [
                "gateway.kid": "\(key.kid)", "gateway.algorithm": "\(key.algorithm.rawValue)", "gateway.retired_previous": "\(retirePrevious)",
            ])
        return key.kid
    }

    /// The `kid` of every published key, oldest first; the last one signs.
    public func publishedKeyIDs() -> [String] { state.signingKeys.published.map(\.kid) }

    /// Builds `fault` into each of the next `count` ID tokens issued, by any grant.
    ///
    /// ```swift
    /// await gateway.corruptNextIDTokens(with: .badSignature)
    /// ```
    public func corruptNextIDTokens(_ count: Int = 1, with fault: IDTokenFault) {
        state.faults.pendingIDTokenFaults += Array(repeating: fault, count: max(0, count))
    }

    func publishedJWKs() -> [PublicJWK] { state.signingKeys.jwks }

    /// The time the sign-in endpoints read (see ``setClock(_:)``).
    func signInNow() -> Date { state.signIn.now() }

    /// `tokens` with an ID token when their scope has `openid` (OpenID Connect Core §3.1.3.3,
    /// §12.2): for `grant`'s subject and client, with `nonce` if the request had one. A queued
    /// ``IDTokenFault`` is applied.
    func attachingIDToken(to tokens: IssuedTokens, nonce: String? = nil) async -> IssuedTokens {
        guard tokens.scope.split(separator: " ").contains("openid"),
            let grant = state.tokens.grants[tokens.grantID]
        else {
            return tokens.with(idToken: nil)
        }
        let claims = IDTokenClaims(
            issuer: issuer, subject: grant.subject, clientID: grant.clientID, now: signInNow(),
            authTime: grant.authTime, nonce: nonce, isGuest: grant.isGuest)
        let key = state.signingKeys.current
        let fault = state.faults.takeIDTokenFault()
        do {
            // Everything is read before this suspension; nothing of the state is touched after it.
            let idToken = try await IDTokenSigner.sign(claims, with: key, fault: fault)
            if let fault {
                logger.debug("id token corrupted", metadata: ["gateway.fault": "\(fault.rawValue)", "gateway.grant_id": "\(grant.id)"])
            }
            return tokens.with(idToken: idToken)
        } catch {
            logger.error("id token signing failed", metadata: ["gateway.kid": "\(key.kid)", "error": "\(error)"])
            return tokens.with(idToken: nil)
        }
    }
}

extension GatewayJSON {
    /// A JWK Set (RFC 7517 §5).
    struct KeySet: Encodable {
        let keys: [PublicJWK]
    }
}

extension AdminJSON {
    struct KeyRotation: Decodable {
        let algorithm: SigningAlgorithm?
        let retirePrevious: Bool?

        enum CodingKeys: String, CodingKey {
            case algorithm
            case retirePrevious = "retire_previous"
        }
    }

    struct IDTokenFaults: Decodable {
        let fault: IDTokenFault
        let count: Int?
    }
}
