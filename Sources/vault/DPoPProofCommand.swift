import ArgumentParser
import Foundation
import VaultAgent
import VaultOAuth
import VaultSession
import VaultStore

extension VaultCommand {
    /// `vault dpop-proof METHOD URL`: a DPoP proof for a script's own request (RFC 9449).
    struct DPoPProof: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "dpop-proof",
            abstract: "Print a DPoP proof (RFC 9449) for one request to an API with a DPoP-bound account's token.",
            discussion: """
                Signs a proof with the key the account's tokens are bound to (`vault login --dpop`); \
                the key never leaves the vault, or the agent when one serves it (the agent signs). The \
                proof's ath binds it to the account's current token (--no-token: none; --resource and \
                --scope: the token for that target), so take both from one --json call. Each proof is for one \
                request: METHOD and URL (its query and fragment are left out, as RFC 9449 says) must be \
                the request's. --nonce: the API's last DPoP-Nonce. Exit 76 for an account with \
                bearer tokens.

                Example:
                  out=$(vault dpop-proof GET https://api.example.com/v1/files --json)
                  curl -H "Authorization: DPoP $(jq -r .token <<<"$out")" -H "DPoP: $(jq -r .proof <<<"$out")" \\
                       https://api.example.com/v1/files
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Argument(help: "The request's HTTP method, e.g. GET.") var method: String
        @Argument(help: "The request's URL.") var url: String
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @OptionGroup var target: TargetOptions
        @Option(help: ArgumentHelp("The nonce the API sent last (its DPoP-Nonce header).", valueName: "nonce")) var nonce: String?
        @Option(name: .customLong("min-ttl"), help: ArgumentHelp("Refresh first unless the token stays valid this long, e.g. 10m.", valueName: "duration"))
        var minTTL: TimeLimit?
        @Flag(help: "A proof for no token (no ath): a request that presents none.") var noToken = false
        @Flag(help: "Print {proof, token, type, expires_at, account} as JSON (the token the proof's ath names).") var json = false
        @Flag(help: "Sign here with the vault opened directly even when an agent serves it.") var noAgent = false
        @OptionGroup var prompt: PromptOptions

        func validate() throws {
            guard let parsed = URL(string: url) else { throw ValidationError("URL must be an absolute http(s) URL") }
            do {
                try DPoPRequestError.check(method: method, url: parsed)
            } catch {
                switch error {
                case .notAMethod: throw ValidationError("METHOD is an HTTP method such as GET or POST")
                case .notAnHTTPURL: throw ValidationError("URL must be an absolute http(s) URL")
                case .credentialsInURL: throw ValidationError("URL must not carry a user name or password")
                }
            }
            if noToken && json { throw ValidationError("--json prints the token the proof names; --no-token names none") }
            if noToken && (!target.resources.isEmpty || !target.scopes.isEmpty || minTTL != nil) {
                throw ValidationError("--resource, --scope and --min-ttl choose the token the proof names; --no-token names none")
            }
        }

        func run() async throws {
            guard let target = URL(string: url) else { throw CommandFailure(.usage, "URL must be an absolute http(s) URL") }
            let asked = try self.target.target
            var request = AgentRequest(.dpopProof, account: account, minTTL: minTTL?.duration.map { Int($0.components.seconds) })
            (request.resources, request.scopes) = (asked.resources, asked.scopes)
            (request.method, request.url, request.nonce, request.withoutToken) = (method.uppercased(), target.absoluteString, nonce, noToken)
            // The agent signs when one serves the vault (its key never leaves it); else the vault
            // is opened here and signs.
            let command = self
            let response = try await AgentOrVault(global: global, credentials: credentials, noAgent: noAgent, terminal: prompt.terminal)
                .send(request) { opened in
                    let id = try command.account.map { try opened.account($0) }
                    var response: AgentResponse
                    if command.noToken {
                        response = AgentResponse()
                        response.proof = try await opened.session.dpopProof(
                            for: id, method: command.method.uppercased(), url: target, nonce: command.nonce)
                    } else {
                        let (token, proof) = try await opened.session.dpopRequest(
                            for: id, target: asked, minimumValidity: command.minTTL?.duration, method: command.method.uppercased(), url: target,
                            nonce: command.nonce)
                        response = AgentResponse(token: AgentToken(token))
                        response.proof = proof
                    }
                    return response
                }
            guard let proof = response.proof, noToken || response.token != nil else {
                throw CommandFailure(.failure, "the agent answered without a proof and its token")
            }
            if let token = response.token {
                // Never a proof for another target's token than the one asked for.
                guard token.resources == asked.resources, token.requestedScopes == asked.scopes else {
                    throw CommandFailure(.failure, "the agent served a token for another target than \(asked); nothing was printed")
                }
            }
            if json, let token = response.token {
                let object: JSONValue = [
                    "proof": .string(proof), "token": .string(token.value), "type": .string(token.type),
                    "expires_at": .date(token.expiry), "account": .string(token.account),
                ]
                print(object.rendered, terminator: "")
            } else {
                print(proof)
            }
        }
    }
}
