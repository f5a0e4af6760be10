import AgentWire
import ArgumentParser
import Foundation
import VaultAgent
import VaultSession
import VaultStore

extension VaultCommand {
    struct Token: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "Print a valid access token, for shell scripts. The only command that prints a secret.",
            discussion: """
                Prints the access token of the active account (or --account) on standard output, \
                followed by a newline, refreshing it first when it expires within a minute. Every \
                process using the vault shares one refresh.

                Example:
                  curl -H "Authorization: Bearer $(vault token)" https://api.example.com/me

                With --resource and --scope, a token for another API of the same identity \
                service, or with fewer scopes (RFC 8707, RFC 6749 §6), obtained with the account's \
                refresh token and kept beside its own:
                  vault token --resource https://files.example.com/ --scope files.read

                Exit codes: 79 the session is locked (`vault sessions unlock`); 80 it expired, was \
                revoked or there is no account (import a new sign-in); 69 the identity service \
                cannot be reached and no valid token is left; 76 it refused the client settings; 83 the \
                account has pins and the service's TLS key matches none of them (nothing was sent); \
                84 with --max-auth-age: the last sign-in is older (step-up: `vault login --account A \
                --max-age 0`), and no token is printed.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @OptionGroup var target: TargetOptions
        @Option(
            name: .customLong("max-auth-age"),
            help: ArgumentHelp(
                "Refuse (exit 84) unless the user signed in within this long, e.g. 5m (step-up before a sensitive action).", valueName: "duration"))
        var maxAuthAge: AgeLimit?
        @Option(name: .customLong("min-ttl"), help: ArgumentHelp("Refresh first unless the token stays valid this long, e.g. 10m.", valueName: "duration"))
        var minTTL: TimeLimit?
        @Flag(help: "Print {token, type, expires_at, account, scopes, resources} as JSON instead of the bare token.")
        var json = false
        @Flag(
            help:
                "Record a sensitive action first (before a deploy, a payment): activity, and under a policy with --sensitive-cap the session's lifetime starts again."
        )
        var sensitive = false
        @Flag(help: "Open the vault directly even when an agent serves it.")
        var noAgent = false
        @OptionGroup var prompt: PromptOptions

        func run() async throws {
            let token = try await Self.fetch(
                global: global, credentials: credentials, account: account, target: try target.target,
                minimumValidity: minTTL?.duration, maxAuthAge: maxAuthAge?.duration, noAgent: noAgent, terminal: prompt.terminal,
                sensitive: sensitive)
            if json {
                let object: JSONValue = [
                    "token": .string(token.value), "type": .string(token.type),
                    "expires_at": .date(token.expiry), "account": .string(token.account), "scopes": .strings(token.scopes),
                    "resources": .strings(token.resources),
                ]
                print(object.rendered, terminator: "")
            } else {
                print(token.value)
            }
        }

        /// A token from the vault's agent when one serves it (no passphrase, no key derivation),
        /// else from the vault opened here. `--max-auth-age` always opens the vault: the step-up
        /// check reads the session's authentication time, which the agent protocol does not carry.
        static func fetch(
            global: GlobalOptions, credentials: CredentialOptions, account: String?, target: TokenTarget = .account,
            minimumValidity: Duration?, maxAuthAge: Duration?, noAgent: Bool, terminal: RequesterTerminal?, sensitive: Bool = false
        ) async throws -> AgentToken {
            var request = AgentRequest(.token, account: account, minTTL: minimumValidity.map { Int($0.components.seconds) })
            (request.resources, request.scopes) = (target.resources, target.scopes)
            request.sensitive = sensitive
            let response = try await AgentOrVault(global: global, credentials: credentials, noAgent: noAgent || maxAuthAge != nil, terminal: terminal)
                .send(request) { opened in
                    let id = try account.map { try opened.account($0) }
                    var token: AccessToken
                    if let maxAuthAge {
                        token = try await opened.session.validAccessToken(for: id, maxAuthenticationAge: maxAuthAge)
                        // Both asked for: the step-up check, then a token valid that long (for the target).
                        if let minimumValidity {
                            token = try await opened.session.validAccessToken(for: id, target: target, minimumValidity: minimumValidity)
                        } else if !target.isAccount {
                            token = try await opened.session.validAccessToken(for: id, target: target)
                        }
                    } else if let minimumValidity {
                        token = try await opened.session.validAccessToken(for: id, target: target, minimumValidity: minimumValidity)
                    } else {
                        token = try await opened.session.validAccessToken(for: id, target: target)
                    }
                    // Recorded once the token is obtained: a refused request (step-up, revoked)
                    // moves no deadline.
                    if sensitive { try await opened.session.recordSensitiveAction(for: id) }
                    var response = AgentResponse(token: AgentToken(token))
                    response.sensitiveRecorded = sensitive
                    return response
                }
            guard let token = response.token else { throw CommandFailure(.failure, "the agent answered without a token") }
            if sensitive, !response.sensitiveRecorded {
                throw CommandFailure(
                    .failure,
                    "the agent serving this vault predates sensitive actions and did not record one; nothing was handed on: restart it (`vault agent stop`, then `vault agent start`) or use --no-agent"
                )
            }
            try checkTarget(of: token, resources: target.resources, scopes: target.scopes)
            return token
        }

        /// An agent that predates targets ignores them and serves the account's own token: never
        /// handed on as the token for another API.
        static func checkTarget(of token: AgentToken, resources: [String], scopes: [String]) throws {
            guard token.resources == resources, token.requestedScopes == scopes else {
                throw CommandFailure(
                    .failure,
                    "the agent serving this vault did not serve a token for the resources and scopes asked (it predates tokens for resources); nothing was handed on: restart it (`vault agent stop`, then `vault agent start`) or use --no-agent"
                )
            }
        }
    }
}
