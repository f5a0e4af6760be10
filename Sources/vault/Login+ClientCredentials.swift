import ArgumentParser
import Foundation
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

/// `--client-auth`: the client authentication methods of RFC 8414's registry the vault speaks.
enum ClientAuthMethod: String, ExpressibleByArgument, CaseIterable {
    case clientSecretBasic = "client_secret_basic"
    case clientSecretPost = "client_secret_post"
    case privateKeyJWT = "private_key_jwt"
}

extension VaultCommand.Login {
    /// The options of `--client-credentials`, checked before anything is read or opened.
    func validateClientCredentials() throws {
        let keyOptions = clientKeyFile != nil || generateClientKey || jwkOut != nil || registrationTimeout != nil
        guard clientCredentials else {
            if keyOptions {
                throw ValidationError("--client-key-file, --generate-client-key, --jwk-out and --registration-timeout go with --client-credentials")
            }
            if clientAuth == .privateKeyJWT { throw ValidationError("--client-auth private_key_jwt goes with --client-credentials") }
            if clientAuth != nil && clientSecretFile == nil && account == nil {
                throw ValidationError("--client-auth \(clientAuth?.rawValue ?? "") needs --client-secret-file")
            }
            return
        }
        if clientKeyFile != nil && generateClientKey { throw ValidationError("give either --client-key-file or --generate-client-key, not both") }
        if (jwkOut != nil || registrationTimeout != nil) && !generateClientKey {
            throw ValidationError("--jwk-out and --registration-timeout go with --generate-client-key")
        }
        if keyOptions && clientSecretFile != nil { throw ValidationError("a client authenticates with a secret or a key, not both") }
        if let clientAuth, clientAuth != .privateKeyJWT, clientKeyFile != nil || generateClientKey {
            throw ValidationError("--client-key-file and --generate-client-key are for --client-auth private_key_jwt, not \(clientAuth.rawValue)")
        }
        if clientAuth == .privateKeyJWT, clientSecretFile != nil { throw ValidationError("private_key_jwt authenticates with a key, not a secret") }
        if generateClientKey && output.json && jwkOut == nil {
            throw ValidationError("--json with --generate-client-key needs --jwk-out FILE (standard output carries the JSON)")
        }
        if case .unlimited? = registrationTimeout { throw ValidationError("--registration-timeout must be a duration") }
        if !redirectURIOptionsAbsent { throw ValidationError("--redirect-uri, --max-age, --upgrade-guest and --expires-in are for a user's sign-in") }
    }

    private var redirectURIOptionsAbsent: Bool { redirectURI == nil && maxAge == nil && !upgradeGuest && expiresIn == nil }

    /// `vault login --client-credentials`: the client's credentials are read (a secret from a
    /// file or the terminal, a key from a file or made here) before the vault is opened, then
    /// the first token is obtained; only then is anything stored.
    func runClientCredentials() async throws {
        let method: ClientAuthMethod? =
            clientAuth ?? (clientKeyFile != nil || generateClientKey ? .privateKeyJWT : clientSecretFile != nil ? .clientSecretBasic : nil)
        var authentication: ClientCredentialsAuthentication?
        var generated: ClientSigningKey?
        switch method {
        case .privateKeyJWT?:
            if let clientKeyFile {
                authentication = .privateKeyJWT(try CredentialOptions.readClientKey(clientKeyFile))
            } else if generateClientKey {
                let key = ClientSigningKey.generate()
                generated = key
                authentication = .privateKeyJWT(key)
            } else if account == nil {
                throw CommandFailure(.usage, "private_key_jwt needs a key: --client-key-file FILE or --generate-client-key")
            }
        case .clientSecretBasic?, .clientSecretPost?:
            if let secret = try clientSecret() {
                authentication = method == .clientSecretPost ? .clientSecretPost(ClientSecret(secret)) : .clientSecretBasic(ClientSecret(secret))
            }
        case nil:
            // Signing an account in again keeps its credentials; a new one is asked for its secret.
            if account == nil, let secret = try clientSecret() { authentication = .clientSecretBasic(ClientSecret(secret)) }
        }
        if let generated { try KeyRegistration.publish(generated, to: jwkOut, registering: "with the provider for this client") }
        let command = self
        let given = authentication
        let waits = generated != nil
        let outcome = try await Interruptible.run {
            try await OpenedVault.with(command.global, command.credentials) { opened in
                try await command.signInClient(opened, authentication: given, method: method, waitForRegistration: waits)
            }
        }
        if output.json {
            var json = outcome.json
            if let generated, case .object(let members) = json {
                json = .object(members + [("client_key", ["kid": .string(generated.keyID), "jwk_file": .text(jwkOut)])])
            }
            print(json.rendered, terminator: "")
        } else {
            for line in outcome.lines { print(line) }
        }
    }

    /// The secret from --client-secret-file, else asked on the terminal (no echo); nil when
    /// there is neither (an existing account's stored secret may do).
    private func clientSecret() throws -> String? {
        if let clientSecretFile { return try CredentialOptions.readClientSecret(clientSecretFile) }
        if account != nil { return nil }
        guard let reader = PassphraseReader() else {
            throw CommandFailure(
                .usage, "no client secret: there is no terminal to ask on; pass --client-secret-file FILE (a file only you can read)")
        }
        var bytes = try reader.read(prompt: "Client secret for \(Terminal.printable(clientID ?? "the client")): ")
        defer { SecureBytes.zero(&bytes) }
        guard !bytes.isEmpty else { throw CommandFailure(.usage, "no client secret was typed; nothing was sent") }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func signInClient(
        _ opened: OpenedVault, authentication: ClientCredentialsAuthentication?, method: ClientAuthMethod?, waitForRegistration: Bool
    ) async throws -> LoginOutcome {
        let existing = try account.map { try opened.account($0) }.flatMap { try opened.vault.accounts.find($0) }
        if let existing, existing.grant != .clientCredentials {
            throw CommandFailure(
                .wrongAccount, "account \(existing.id) is a user's, not a client's: sign it in again without --client-credentials; nothing was stored")
        }
        let provider = try overriding(try await self.provider(opened, existing: existing))
        let clientID = self.clientID ?? existing?.client.clientID ?? ""
        let resolved = try authentication ?? storedAuthentication(of: existing, method: method, opened)
        let request = ClientSignInRequest(
            provider: provider, clientID: clientID, authentication: resolved,
            scopes: scopes.isEmpty ? existing?.client.scopes ?? [] : scopes,
            pins: pins.isEmpty ? existing?.client.pins ?? [] : pins, account: existing?.id, policy: policy(), label: label,
            caFile: global.caFilePath ?? existing?.client.caFile, dpop: dpop)
        let result: SignInResult
        if waitForRegistration {
            result = try await KeyRegistration.await(timeout: registrationTimeout?.duration ?? KeyRegistration.defaultTimeout) {
                try await opened.session.signIn(client: request)
            }
        } else {
            result = try await opened.session.signIn(client: request)
        }
        try setHosts(result.account.id, opened)
        return LoginOutcome(result: result, view: try await AccountView.load(result.account.id, in: opened))
    }

    /// An account signed in again with no credentials given keeps its stored ones (and may
    /// change between the two secret methods).
    private func storedAuthentication(of existing: Account?, method: ClientAuthMethod?, _ opened: OpenedVault) throws -> ClientCredentialsAuthentication {
        guard let existing else { throw CommandFailure(.usage, "give the client's credentials: --client-secret-file FILE or --client-key-file FILE") }
        switch method ?? ClientAuthMethod(rawValue: existing.client.authentication.rawValue) {
        case .privateKeyJWT?:
            guard let pem = try opened.vault.accounts.clientSigningKey(for: existing.id) else {
                throw CommandFailure(.usage, "account \(existing.id) holds no signing key: pass --client-key-file FILE or --generate-client-key")
            }
            return .privateKeyJWT(try ClientSigningKey(pem: pem))
        case let secretMethod?:
            guard let secret = try opened.vault.accounts.clientSecret(for: existing.id) else {
                throw CommandFailure(.usage, "account \(existing.id) holds no client secret: pass --client-secret-file FILE")
            }
            return secretMethod == .clientSecretPost ? .clientSecretPost(ClientSecret(secret)) : .clientSecretBasic(ClientSecret(secret))
        case nil:
            throw CommandFailure(.usage, "account \(existing.id) holds no client credentials: pass --client-secret-file FILE or --client-key-file FILE")
        }
    }
}

/// Waiting for a provider to accept a key it has not been given yet: a generated key's first
/// sign-in, or a rollover's new key.
enum KeyRegistration {
    /// Ten minutes: long enough for a person to register a key at a provider's console.
    static let defaultTimeout = Duration.seconds(600)
    /// Between two attempts.
    static let interval = Duration.seconds(2)

    /// Writes a new key's public JWK where the user registers it from: `path`, else standard
    /// output (flushed at once: the command waits for the registration next). `registering`
    /// ends the sentence telling where to register it.
    static func publish(_ key: ClientSigningKey, to path: String?, registering: String) throws {
        guard let path else {
            print(key.publicJWK)
            fflush(nil)
            Terminal.printError("Register the public key above (kid \(key.keyID)) \(registering).")
            return
        }
        do {
            try Data((key.publicJWK + "\n").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CommandFailure(.storage, "cannot write the public key to \(path): \(error.localizedDescription)")
        }
        Terminal.printError("Wrote the public key (kid \(key.keyID)) to \(path): register it \(registering).")
    }

    /// Runs `attempt` until it succeeds, asking again every ``interval`` while the provider
    /// answers that it does not know the client's key (`invalid_client`, `unauthorized_client`),
    /// until `timeout`. Any other failure ends the wait at once.
    static func await<T: Sendable>(timeout: Duration, _ attempt: () async throws -> T) async throws -> T {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        Terminal.printError("Waiting up to \(Format.span(timeout)) for the provider to accept the key; Ctrl-C to stop (nothing is stored).")
        while true {
            do {
                return try await attempt()
            } catch let error as SignInError {
                guard case .tokenRequestFailed(.clientMisconfigured(let code, _), _) = error,
                    code == "invalid_client" || code == "unauthorized_client", clock.now + interval < deadline
                else {
                    if case .tokenRequestFailed(.clientMisconfigured("invalid_client", _), _) = error {
                        throw CommandFailure(
                            .clientRefused, "the provider did not accept the key within \(Format.span(timeout)) (invalid_client); nothing was stored")
                    }
                    throw error
                }
                try await clock.sleep(for: interval)
            }
        }
    }
}
