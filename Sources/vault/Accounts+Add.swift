import ArgumentParser
import Foundation
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultStore

extension VaultCommand.Accounts {
    struct Add: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Import a sign-in done elsewhere: a token response on standard input becomes an account.",
            discussion: """
                Reads an OAuth 2.0 token response (RFC 6749 §5.1 JSON, as the token endpoint \
                returned it) from standard input and stores it as an account whose tokens the vault \
                refreshes at --token-endpoint from then on. The account becomes the active one. \
                Importing again for the same issuer and subject replaces its tokens and starts a \
                new session.

                The subject is --subject, else the `sub` claim of the response's ID token, whose \
                signature and claims are checked against the issuer's published keys when they can \
                be reached (a token that fails a check is refused; one that cannot be checked is \
                stored with its subject marked unverified). When neither names the user, the import never replaces an account: \
                it is added as a distinct account (subject `unnamed-…`), and the command says so. \
                Replacing an account's tokens (the same issuer and subject) revokes the grant they \
                replace at --revocation-endpoint. The issuer is --issuer, else the ID token's \
                `iss`, else the token endpoint's origin.

                Plain http is accepted only to this machine, named by a loopback IP literal \
                (127.0.0.0/8, [::1]) or exactly `localhost`; a URL with user information is refused.

                --pin sha256/BASE64 (repeatable) pins the identity service's TLS key (RFC 7469: \
                the SHA-256 of a certificate's SubjectPublicKeyInfo). A request is then sent only \
                when the server's validated certificate chain holds one of the pins; otherwise \
                nothing is sent and the command exits 83. Give the current key's pin and the next \
                one to allow a key rollover. Pinned endpoints must use https.

                Example:
                  get-tokens | vault accounts add \\
                    --token-endpoint https://id.example.com/oauth/token \\
                    --revocation-endpoint https://id.example.com/oauth/revoke \\
                    --client-id my-cli --label "Work" \\
                    --pin sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions

        @Option(help: ArgumentHelp("Where the vault refreshes the tokens (https, or http to this machine).", valueName: "url"))
        var tokenEndpoint: String
        @Option(name: .customLong("client-id"), help: ArgumentHelp("The OAuth client id the tokens were issued to.", valueName: "id"))
        var clientID: String
        @Option(help: ArgumentHelp("Where the refresh token is revoked when the account is removed (RFC 7009).", valueName: "url"))
        var revocationEndpoint: String?
        @Option(help: ArgumentHelp("A file holding the client secret of a confidential client (sent with HTTP Basic).", valueName: "file"))
        var clientSecretFile: String?
        @Option(help: ArgumentHelp("The identity service's issuer identifier.", valueName: "url"))
        var issuer: String?
        @Option(help: ArgumentHelp("The user's identifier at the issuer.", valueName: "subject"))
        var subject: String?
        @Option(help: ArgumentHelp("A name to show for the account (sealed in the vault).", valueName: "text"))
        var label: String?
        @Option(help: ArgumentHelp("Lock the session after this much inactivity, or `none`. Default 15m.", valueName: "duration"))
        var idleTimeout: TimeLimit?
        @Option(
            help: ArgumentHelp(
                "End the session this long after the import, whatever the activity, or `none` (the session then lasts as long as its grant). Default 12h.",
                valueName: "duration"))
        var lifetime: TimeLimit?
        @Option(
            name: .customLong("host"),
            help: ArgumentHelp(
                "Hand the account's token to git and docker for this host[:port][/path] (repeatable; see `accounts set-host`).", valueName: "host"))
        var credentialHosts: [String] = []
        @Option(
            name: .customLong("pin"),
            help: ArgumentHelp(
                "An SPKI pin of the identity service's TLS key, sha256/BASE64 (repeatable, for key rollover).",
                valueName: "sha256/base64"))
        var pins: [String] = []

        func validate() throws {
            let parsedPins: [SPKIPin]
            do {
                parsedPins = try SPKIPin.parse(pins)
            } catch {
                throw ValidationError("--pin: \(error)")
            }
            for (name, value) in [("--token-endpoint", tokenEndpoint), ("--revocation-endpoint", revocationEndpoint)] {
                guard let value else { continue }
                guard let url = URL(string: value) else { throw ValidationError("\(name) is not a URL") }
                if let reason = EndpointRule.violation(url) { throw ValidationError("\(name) is refused: \(reason)") }
                if let reason = EndpointRule.pinViolation(url, pins: parsedPins) { throw ValidationError("\(name) is refused: \(reason)") }
            }
            if clientID.isEmpty { throw ValidationError("--client-id must not be empty") }
            for host in credentialHosts where CredentialHosts.normalise(host) == nil { throw ValidationError("--host \(host) is not host[:port][/path]") }
        }

        func run() async throws {
            let input = try Self.readStandardInput()
            let response: TokenResponse
            do {
                response = try TokenResponse.parse(input)
            } catch {
                // Not tokens: the server's RFC 6749 §5.2 refusal, said as such, or malformed input.
                throw Self.errorResponse(input) ?? error
            }
            guard let endpoint = URL(string: tokenEndpoint) else { throw ValidationError("--token-endpoint is not a URL") }
            let clientSecret = try clientSecretFile.map(CredentialOptions.readClientSecret)
            var policy = SessionPolicy()
            if let idleTimeout { policy.idleTimeout = idleTimeout.duration }
            if let lifetime { policy.absoluteLifetime = lifetime.duration }
            if let idle = policy.idleTimeout, policy.warningBefore >= idle { policy.warningBefore = idle / 2 }
            let request = TokenImport(
                tokens: response,
                client: OAuthClientSettings(
                    tokenEndpoint: endpoint, revocationEndpoint: revocationEndpoint.flatMap(URL.init(string:)),
                    clientID: clientID, authentication: clientSecret == nil ? .none : .clientSecretBasic, pins: pins,
                    caFile: global.caFilePath),
                clientSecret: clientSecret, issuer: issuer, subject: subject, label: label, policy: policy,
                credentialHosts: credentialHosts)
            let view = try await OpenedVault.with(global, credentials) { opened in
                let added: Account
                do {
                    added = try await opened.session.importTokens(request)
                } catch SignInError.wrongAccount(let given, let verified) {
                    throw CommandFailure(
                        .usage,
                        "--subject \(Terminal.printable(given)) is not the user the verified ID token names (\(Terminal.printable(verified))); nothing was stored"
                    )
                }
                return try await AccountView.load(added.id, in: opened)
            }
            if output.json {
                print(view.json.rendered, terminator: "")
            } else {
                print("Added \(AccountReference.name(of: view.account.id, account: view.account)) at \(Terminal.printable(view.account.issuer)), now active.")
                if view.account.subjectSource == .generated {
                    print(
                        "  The token response names no user (no ID token) and no --subject was given, so this is a new account; "
                            + "to replace an account's tokens instead, import with --subject.")
                }
                print("  \(view.tokenText)")
            }
        }

        static func readStandardInput() throws -> Data {
            if Terminal.standardInputIsTerminal {
                Terminal.printError("Paste the token response JSON, then press Ctrl-D:")
            }
            // Refused as soon as the bound is crossed: `yes | vault accounts add` ends at once.
            let data = try BoundedInput.read(limit: 1024 * 1024, what: "a token response")
            guard !data.isEmpty else {
                throw CommandFailure(.usage, "standard input is empty: pipe the token response JSON into `vault accounts add`")
            }
            return data
        }

        /// An RFC 6749 §5.2 error response (`{"error": …}` without an access token), reported as
        /// the server's refusal rather than as malformed input.
        static func errorResponse(_ data: Data) -> CommandFailure? {
            guard let refusal = OAuthErrorResponse.parse(data) else { return nil }
            return CommandFailure(
                .clientRefused,
                "standard input is the identity service's error response, not tokens "
                    + "(\(Terminal.printable(refusal.description))); sign in again and pipe the token response")
        }
    }
}

/// A length of time on the command line: `90s`, `15m`, `12h`, `30d`, or `none`.
enum TimeLimit: ExpressibleByArgument {
    case unlimited
    case after(Duration)

    init?(argument: String) {
        let text = argument.lowercased()
        if text == "none" {
            self = .unlimited
            return
        }
        guard let unit = text.last, let value = Int64(text.dropLast()), value > 0 else { return nil }
        switch unit {
        case "s": self = .after(.seconds(value))
        case "m": self = .after(.seconds(value * 60))
        case "h": self = .after(.seconds(value * 3600))
        case "d": self = .after(.seconds(value * 86_400))
        default: return nil
        }
    }

    var duration: Duration? {
        if case .after(let duration) = self { return duration }
        return nil
    }

    static var defaultCompletionKind: CompletionKind { .default }
}
