import ArgumentParser
import Foundation
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

extension VaultCommand {
    struct Login: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "login",
            abstract: "Sign in to an identity provider: device code, browser, guest, or a bare token.",
            discussion: """
                Finds the provider's endpoints from --issuer (OpenID Connect discovery, then RFC \
                8414; --token-endpoint and the other endpoint options override what it publishes), \
                signs the user in, verifies the ID token against the provider's keys when the scope \
                has openid (the default), and stores the account, its session and the metadata it \
                used. The account becomes the active one.

                --device: the device authorization grant (RFC 8628): shows a code and where to \
                enter it, on any machine. --browser: authorization code with PKCE and a loopback \
                redirect (RFC 7636, RFC 8252); opens the browser with xdg-open when there is a \
                display, else (and with --no-open) prints the URL on a line of its own on standard \
                error. The redirect URI is http://127.0.0.1/callback at a port chosen at run time: \
                register that with the provider (RFC 8252 §7.3 lets the port vary). A provider that \
                registered another loopback URI (or insists on a port) gets it with --redirect-uri; \
                the account keeps it for the next sign-in. The default is --browser with a display, --device without. --guest: a guest \
                account from the provider's guest endpoint. --with-token: a bare access token on \
                standard input (no refresh; expiry from --expires-in or the token's JWT exp).

                --account A signs an existing account in again (expired, revoked or locked out): \
                same id, history kept; signing in as another user is refused and stores nothing. \
                --max-age 0 makes the provider authenticate the user again now (step-up, OpenID \
                Connect max_age and prompt=login). Signing in while a guest account of the same \
                provider is active (or with --upgrade-guest) upgrades the guest: the account takes \
                over its devices, notifications and history, and the guest's grant ends.

                Ctrl-C stops at any step; nothing is stored.

                Examples:
                  vault login --issuer https://id.example.com --client-id my-cli --device
                  vault login --account alice --max-age 0
                  gh-token | vault login --issuer https://id.example.com --client-id my-cli --with-token
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions

        @Option(help: ArgumentHelp("The provider's issuer identifier; its metadata is discovered.", valueName: "url"))
        var issuer: String?
        @Option(name: .customLong("client-id"), help: ArgumentHelp("The OAuth client id (default with --account: the account's).", valueName: "id"))
        var clientID: String?
        @Option(help: ArgumentHelp("A file holding the client secret of a confidential client.", valueName: "file"))
        var clientSecretFile: String?
        /// Never used: a secret on the command line is refused (see ``validate()``).
        @Option(name: .customLong("client-secret"), help: .hidden) var clientSecretArgument: String?
        @Option(
            name: .customLong("client-auth"),
            help: ArgumentHelp(
                "How the client authenticates: client_secret_basic (default with a secret), client_secret_post, or private_key_jwt (with --client-credentials).",
                valueName: "method"))
        var clientAuth: ClientAuthMethod?

        @Flag(help: "Bind the account's tokens to a key the vault makes and keeps (RFC 9449, DPoP): a copied token is useless without it.")
        var dpop = false
        @Flag(help: "Sign a client in as an account of its own: the client credentials grant (RFC 6749 §4.4), no user.")
        var clientCredentials = false
        @Option(
            help: ArgumentHelp(
                "With --client-credentials: import this P-256 private key (PEM, PKCS#8 or SEC1; mode 0600 or stricter) for private_key_jwt.",
                valueName: "file"))
        var clientKeyFile: String?
        @Flag(help: "With --client-credentials: generate the private_key_jwt key in the vault and print its public JWK for registration.")
        var generateClientKey = false
        @Option(help: ArgumentHelp("With --generate-client-key: write the public JWK to this file instead of standard output.", valueName: "file"))
        var jwkOut: String?
        @Option(
            help: ArgumentHelp(
                "With --generate-client-key: how long to wait for the provider to accept the new key. Default 10m.", valueName: "duration"))
        var registrationTimeout: TimeLimit?
        @Option(
            name: .customLong("scope"),
            help: ArgumentHelp(
                "A scope to ask for (repeatable). Default: openid, and profile, email and offline_access when the provider lists them.", valueName: "scope"
            ))
        var scopes: [String] = []

        @Flag(help: "Sign in with a code entered on another device (RFC 8628).") var device = false
        @Flag(help: "Sign in in a browser (authorization code with PKCE).") var browser = false
        @Flag(help: "Create a guest account with the provider's guest endpoint.") var guest = false
        @Flag(help: "Read a bare access token from standard input.") var withToken = false
        @Flag(help: "With --browser: print the URL instead of opening a browser.") var noOpen = false
        @Option(help: ArgumentHelp("With --browser: how long to wait for the browser to come back. Default 5m.", valueName: "duration"))
        var timeout: TimeLimit?
        @Option(
            name: .customLong("redirect-uri"),
            help: ArgumentHelp(
                "With --browser: the loopback redirect URI the provider registered: http://127.0.0.1, http://[::1] or http://localhost, a path, a port or none (any). Default http://127.0.0.1/callback (or the account's).",
                valueName: "uri"))
        var redirectURI: String?

        @Option(help: ArgumentHelp("Sign this account in again. " + AccountReference.help, valueName: "account"))
        var account: String?
        @Option(help: ArgumentHelp("Ask the provider to authenticate the user again if the last authentication is older (0: now).", valueName: "duration"))
        var maxAge: AgeLimit?
        @Flag(help: "Upgrade the active guest account into the account signed in (an error when it is not a guest).")
        var upgradeGuest = false
        @Option(help: ArgumentHelp("With --with-token: the token's lifetime in seconds.", valueName: "seconds"))
        var expiresIn: Int?

        @Option(help: ArgumentHelp("Override the token endpoint.", valueName: "url")) var tokenEndpoint: String?
        @Option(help: ArgumentHelp("Override the authorization endpoint.", valueName: "url")) var authorizationEndpoint: String?
        @Option(help: ArgumentHelp("Override the device authorization endpoint.", valueName: "url")) var deviceAuthorizationEndpoint: String?
        @Option(help: ArgumentHelp("Override the revocation endpoint (RFC 7009).", valueName: "url")) var revocationEndpoint: String?
        @Option(name: .customLong("jwks-uri"), help: ArgumentHelp("Override where the provider's keys are.", valueName: "url")) var jwksURI: String?
        @Option(help: ArgumentHelp("Override the guest endpoint.", valueName: "url")) var guestEndpoint: String?

        @Option(
            name: .customLong("host"),
            help: ArgumentHelp(
                "Hand the account's token to git and docker for this host[:port][/path] (repeatable; see `accounts set-host`).", valueName: "host"))
        var credentialHosts: [String] = []
        @Option(help: ArgumentHelp("A name to show for the account (default: the name in the ID token).", valueName: "text"))
        var label: String?
        @Option(help: ArgumentHelp("Lock the session after this much inactivity, or `none`. Default 15m (or the account's).", valueName: "duration"))
        var idleTimeout: TimeLimit?
        @Option(help: ArgumentHelp("End the session this long after sign-in, or `none`. Default 12h (or the account's).", valueName: "duration"))
        var lifetime: TimeLimit?
        @Option(name: .customLong("pin"), help: ArgumentHelp("An SPKI pin of the provider's TLS key, sha256/BASE64 (repeatable).", valueName: "sha256/base64"))
        var pins: [String] = []

        func validate() throws {
            if clientSecretArgument != nil {
                // The value is not repeated: it is already in this process's argv, readable by every user.
                throw ValidationError(
                    "a client secret on the command line is readable by every user of this machine (ps, /proc/PID/cmdline) and lands in shell history: nothing was sent; put it in a file only you can read and pass --client-secret-file FILE, or leave it out to be asked for it"
                )
            }
            if [device, browser, guest, withToken, clientCredentials].filter({ $0 }).count > 1 {
                throw ValidationError("choose one of --device, --browser, --guest, --with-token and --client-credentials")
            }
            try validateClientCredentials()
            if dpop && withToken { throw ValidationError("--dpop binds tokens the vault obtains; a bare token is whatever it already is") }
            if dpop && !credentialHosts.isEmpty {
                throw ValidationError("--host cannot go with --dpop: git and docker cannot send the proof a DPoP-bound token needs")
            }
            if issuer == nil && account == nil && tokenEndpoint == nil {
                throw ValidationError("give --issuer (or --account to sign an account in again)")
            }
            if account == nil && clientID == nil { throw ValidationError("give --client-id") }
            for (name, value) in [
                ("--issuer", issuer), ("--token-endpoint", tokenEndpoint), ("--authorization-endpoint", authorizationEndpoint),
                ("--device-authorization-endpoint", deviceAuthorizationEndpoint), ("--revocation-endpoint", revocationEndpoint),
                ("--jwks-uri", jwksURI), ("--guest-endpoint", guestEndpoint),
            ] {
                guard let value else { continue }
                guard let url = URL(string: value), url.host != nil else { throw ValidationError("\(name) is not a URL") }
                if let reason = EndpointRule.violation(url) { throw ValidationError("\(name) is refused: \(reason)") }
            }
            do { _ = try SPKIPin.parse(pins) } catch { throw ValidationError("--pin: \(error)") }
            if let redirectURI {
                do { _ = try LoopbackRedirect(parsing: redirectURI) } catch { throw ValidationError("--redirect-uri \(redirectURI): \(error)") }
                if device || guest || withToken { throw ValidationError("--redirect-uri is for --browser") }
            }
            if let expiresIn, expiresIn <= 0 { throw ValidationError("--expires-in must be a positive number of seconds") }
            for host in credentialHosts where CredentialHosts.normalise(host) == nil { throw ValidationError("--host \(host) is not host[:port][/path]") }
        }

        func run() async throws {
            if clientCredentials { return try await runClientCredentials() }
            let secret = try clientSecretFile.map(CredentialOptions.readClientSecret)
            // Read before the vault is opened: the token, not the passphrase prompt, is on standard input.
            let bareToken = withToken ? try Self.readToken() : nil
            let command = self
            let result = try await Interruptible.run {
                try await OpenedVault.with(command.global, command.credentials) { opened in
                    try await command.signIn(opened, secret: secret, bareToken: bareToken)
                }
            }
            if let warning = result.result?.revocation.warning { Terminal.printError(warning) }
            if output.json {
                print(result.json.rendered, terminator: "")
            } else {
                for line in result.lines { print(line) }
            }
        }

        private func signIn(_ opened: OpenedVault, secret: String?, bareToken: String?) async throws -> LoginOutcome {
            let existing = try account.map { try opened.account($0) }.flatMap { try opened.vault.accounts.find($0) }
            var provider = try await self.provider(opened, existing: existing)
            provider = try overriding(provider)
            let clientID = self.clientID ?? existing?.client.clientID ?? ""
            let scopes =
                self.scopes.isEmpty
                ? (existing?.client.scopes.isEmpty == false ? existing?.client.scopes ?? [] : Self.defaultScopes(provider))
                : self.scopes
            let policy = self.policy()

            if let bareToken {
                return try await storeBareToken(
                    bareToken, opened: opened, provider: provider, clientID: clientID, scopes: scopes,
                    secret: secret, existing: existing, policy: policy)
            }
            var upgrading: AccountID?
            if upgradeGuest {
                guard let active = try opened.vault.accounts.activeID(), let guest = try opened.vault.accounts.find(active),
                    guest.kind == .guest, guest.upgradedTo == nil
                else {
                    throw CommandFailure(.noRecord, "--upgrade-guest: the active account is not a guest account")
                }
                upgrading = active
            }
            var storedSecret: String?
            if secret == nil, let existing, existing.hasClientSecret {
                storedSecret = try opened.vault.accounts.clientSecret(for: existing.id)
            }
            let request = SignInRequest(
                provider: provider, clientID: clientID, clientSecret: secret ?? storedSecret,
                scopes: scopes, pins: pins.isEmpty ? existing?.client.pins ?? [] : pins, method: method(),
                account: existing?.id, maxAge: maxAge?.duration, policy: policy, label: label, upgrading: upgrading,
                redirect: try redirectURI.map { try LoopbackRedirect(parsing: $0) }, caFile: global.caFilePath,
                secretInBody: clientAuth.map { $0 == .clientSecretPost }, dpop: dpop)
            let result = try await opened.session.signIn(using: request)
            try setHosts(result.account.id, opened)
            return LoginOutcome(result: result, view: try await AccountView.load(result.account.id, in: opened))
        }

        /// The provider: discovered from --issuer, else the account's stored metadata, else
        /// built from the endpoint options.
        func provider(_ opened: OpenedVault, existing: Account?) async throws -> ProviderMetadata {
            let caFile = global.caFilePath ?? existing?.client.caFile
            if let issuer, let url = URL(string: issuer) {
                if let tokenEndpoint, let endpoint = URL(string: tokenEndpoint) {
                    // Every endpoint given: discovery is a bonus, not a requirement.
                    let found = try? await opened.session.discoverProvider(issuer: url, pins: pins, caFile: caFile)
                    if found == nil { return ProviderMetadata(issuer: issuer, tokenEndpoint: endpoint) }
                }
                return try await opened.session.discoverProvider(issuer: url, pins: pins.isEmpty ? existing?.client.pins ?? [] : pins, caFile: caFile)
            }
            if let existing {
                if let stored = existing.providerMetadata.flatMap(ProviderMetadata.decoded) { return stored }
                if let url = URL(string: existing.issuer), url.scheme != nil,
                    let found = try? await opened.session.discoverProvider(issuer: url, pins: existing.client.pins, caFile: caFile)
                {
                    return found
                }
                return ProviderMetadata(
                    issuer: existing.issuer, tokenEndpoint: existing.client.tokenEndpoint,
                    revocationEndpoint: existing.client.revocationEndpoint)
            }
            guard let tokenEndpoint, let url = URL(string: tokenEndpoint) else {
                throw CommandFailure(.usage, "give --issuer")
            }
            return ProviderMetadata(issuer: TokenImport.origin(of: url), tokenEndpoint: url)
        }

        func overriding(_ metadata: ProviderMetadata) throws -> ProviderMetadata {
            var metadata = metadata
            func url(_ text: String?) -> URL? { text.flatMap(URL.init(string:)) }
            if let value = url(tokenEndpoint) { metadata.tokenEndpoint = value }
            if let value = url(authorizationEndpoint) { metadata.authorizationEndpoint = value }
            if let value = url(deviceAuthorizationEndpoint) { metadata.deviceAuthorizationEndpoint = value }
            if let value = url(revocationEndpoint) { metadata.revocationEndpoint = value }
            if let value = url(jwksURI) { metadata.jwksURI = value }
            if let value = url(guestEndpoint) { metadata.guestEndpoint = value }
            return metadata
        }

        /// `openid`, plus `profile` and `email` (a name to show for the account, OpenID Connect
        /// Core §5.4) and `offline_access` (a refresh token) where the provider lists them: some
        /// refuse scopes they do not know.
        static func defaultScopes(_ provider: ProviderMetadata) -> [String] {
            ["openid"] + ["profile", "email", "offline_access"].filter(provider.scopesSupported.contains)
        }

        private func method() -> SignInMethod {
            if guest { return .guest }
            let useBrowser = browser || (!device && Terminal.hasDisplay)
            guard useBrowser else {
                return .device { authorization in
                    Terminal.printError("To sign in, open \(Terminal.printable(authorization.verificationURI.absoluteString))")
                    Terminal.printError("and enter the code: \(Terminal.printable(authorization.userCode))")
                    if let complete = authorization.verificationURIComplete {
                        Terminal.printError("(or open \(Terminal.printable(complete.absoluteString)))")
                    }
                    Terminal.printError(
                        "Waiting for the sign-in to be approved (the code expires in \(Format.span(.seconds(authorization.expiresIn)))); Ctrl-C to stop.")
                }
            }
            let open = !noOpen && Terminal.hasDisplay
            let wait = timeout?.duration ?? .seconds(300)
            return .browser(
                open: { links in
                    // The launcher gets the one-time loopback link (answered only for this
                    // user), never the authorization URL: another process's argv is readable by
                    // every user. The full URL goes to this user's terminal only.
                    if open, Terminal.launchBrowser(links.opener) {
                        Terminal.printError("Opening the browser to sign in. If it does not open, visit:")
                    } else {
                        Terminal.printError("Open this URL in a browser to sign in:")
                    }
                    Terminal.printError(links.authorization.absoluteString)
                    Terminal.printError("Waiting up to \(Format.span(wait)) for the browser to come back; Ctrl-C to stop.")
                }, timeout: wait)
        }

        func policy() -> SessionPolicy? {
            guard idleTimeout != nil || lifetime != nil else { return nil }
            var policy = SessionPolicy()
            if let idleTimeout { policy.idleTimeout = idleTimeout.duration }
            if let lifetime { policy.absoluteLifetime = lifetime.duration }
            if let idle = policy.idleTimeout, policy.warningBefore >= idle { policy.warningBefore = idle / 2 }
            return policy
        }

        /// `--with-token`: the token becomes the account's only credential, no refresh token.
        private func storeBareToken(
            _ token: String, opened: OpenedVault, provider: ProviderMetadata, clientID: String, scopes: [String],
            secret: String?, existing: Account?, policy: SessionPolicy?
        ) async throws -> LoginOutcome {
            let response = TokenResponse(accessToken: token, tokenType: "Bearer", expiresIn: expiresIn, scope: scopes.joined(separator: " "))
            let claimed = response.unverifiedAccessTokenSubject
            let subject = existing?.subject ?? claimed ?? NewAccount.unnamedSubject()
            if let existing, let named = claimed, named != existing.subject {
                throw CommandFailure(
                    .wrongAccount,
                    "the token is \(Terminal.printable(named))'s, this account is \(Terminal.printable(existing.label ?? existing.subject))'s; nothing was stored"
                )
            }
            let account = NewAccount(
                issuer: provider.issuer, subject: subject, label: label ?? existing?.label,
                client: OAuthClientSettings(
                    tokenEndpoint: provider.tokenEndpoint, revocationEndpoint: provider.revocationEndpoint,
                    clientID: clientID,
                    authentication: secret == nil ? .none : clientAuth == .clientSecretPost ? .clientSecretPost : .clientSecretBasic,
                    scopes: scopes, pins: pins, caFile: global.caFilePath ?? existing?.client.caFile),
                clientSecret: secret, providerMetadata: provider.encoded(),
                subjectSource: existing?.subjectSource ?? (claimed != nil ? .unverified : .generated))
            let added = try await opened.session.signIn(account, tokens: response, policy: policy)
            try setHosts(added.id, opened)
            return LoginOutcome(result: nil, view: try await AccountView.load(added.id, in: opened))
        }

        func setHosts(_ id: AccountID, _ opened: OpenedVault) throws {
            guard !credentialHosts.isEmpty else { return }
            // A sign-in again keeps the username `accounts set-host --username` gave the account.
            do {
                try opened.vault.accounts.setCredentialHosts(credentialHosts.compactMap(CredentialHosts.normalise), keepingUsernameFor: id)
            } catch let error as VaultError where error.code == .alreadyExists {
                throw CommandFailure(.alreadyExists, "signed in and stored, but \(error.message): `vault accounts set-host` on the other account first")
            }
        }

        /// A bare access token: one line of visible ASCII on standard input (at most 16 KiB).
        static func readToken() throws -> String {
            if Terminal.standardInputIsTerminal { Terminal.printError("Paste the access token, then press Enter and Ctrl-D:") }
            let data = FileHandle.standardInput.readData(ofLength: 16 * 1024 + 1)
            guard data.count <= 16 * 1024 else { throw CommandFailure(.usage, "standard input is longer than an access token (16 KiB at most)") }
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty, text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw CommandFailure(.usage, "standard input is not a bare access token (one line of visible ASCII)")
            }
            return text
        }
    }
}

/// `--max-age`: `0`, or a duration like `5m`.
enum AgeLimit: ExpressibleByArgument {
    case age(Duration)

    init?(argument: String) {
        if argument == "0" || argument == "0s" {
            self = .age(.zero)
            return
        }
        guard case .after(let duration)? = TimeLimit(argument: argument) else { return nil }
        self = .age(duration)
    }

    var duration: Duration {
        switch self {
        case .age(let duration): duration
        }
    }
}

/// What `vault login` reports.
struct LoginOutcome {
    var result: SignInResult?
    var view: AccountView

    var lines: [String] {
        let account = view.account
        var lines: [String] = []
        let who = Terminal.printable(account.label ?? account.email ?? account.subject)
        if account.grant == .clientCredentials {
            let method = account.client.authentication.rawValue
            return [
                result?.replacedExisting == true
                    ? "Signed client \(Terminal.printable(account.client.clientID)) in again (\(method)): account \(account.id), same history, now active."
                    : "Signed client \(Terminal.printable(account.client.clientID)) in (\(method)): new client account \(account.id) at \(Terminal.printable(account.issuer)), now active.",
                "  \(view.tokenText)",
            ]
        }
        let kind = account.kind == .guest ? "guest " : ""
        if result?.replacedExisting == true {
            lines.append("Signed in again as \(who): \(kind)account \(account.id), same history, now active.")
        } else {
            lines.append("Signed in as \(who): new \(kind)account \(account.id) at \(Terminal.printable(account.issuer)), now active.")
        }
        switch account.subjectSource {
        case .verified?: lines.append("  Identity verified (ID token signature and claims checked).")
        case .unverified? where result?.subjectFromUserinfo == true:
            lines.append("  Identity not verified: the provider sent no ID token; the subject is what its userinfo endpoint said.")
        case .unverified?: lines.append("  Identity not verified: the subject was read from the token without checking a signature.")
        case .generated?: lines.append("  The provider named no user: the account's subject is \(account.subject).")
        default: break
        }
        if let upgrade = result?.upgradedGuest {
            lines.append(
                "  Took over guest account \(upgrade.guest): \(upgrade.devicesMoved) device(s), \(upgrade.notificationsMoved) notification(s), \(upgrade.eventsMoved) event(s); the guest's grant "
                    + (result?.convertedAtProvider == true ? "was converted by the provider." : "was revoked."))
        }
        lines.append("  \(view.tokenText)")
        return lines
    }

    var json: JSONValue {
        let upgrade: JSONValue =
            result?.upgradedGuest.map { upgrade in
                [
                    "guest": .string(upgrade.guest.rawValue), "devices": .number(upgrade.devicesMoved),
                    "notifications": .number(upgrade.notificationsMoved), "events": .number(upgrade.eventsMoved),
                    "converted_at_provider": .bool(result?.convertedAtProvider ?? false),
                ]
            } ?? .null
        return [
            "account": view.json,
            "replaced_existing": .bool(result?.replacedExisting ?? false),
            "subject_verified": .bool(view.account.subjectSource == .verified),
            "upgraded_guest": upgrade,
            "revocation": result?.revocation.json ?? .null,
        ]
    }
}

/// Runs an operation that Ctrl-C cancels: SIGINT cancels the task (so every step stops and
/// nothing is stored) instead of killing the process mid-write; the command then exits 130.
enum Interruptible {
    static func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task { try await operation() }
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { task.cancel() }
        source.resume()
        defer {
            source.cancel()
            signal(SIGINT, SIG_DFL)
        }
        do {
            return try await task.value
        } catch {
            if task.isCancelled { throw CommandFailure(.interrupted, "interrupted; nothing was stored") }
            throw error
        }
    }
}
