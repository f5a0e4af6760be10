import ArgumentParser
import Foundation
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
                the key never leaves the vault. The proof's ath binds it to the account's current \
                token (--no-token: none), so take both from one --json call. Each proof is for one \
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
        @Option(help: ArgumentHelp("The nonce the API sent last (its DPoP-Nonce header).", valueName: "nonce")) var nonce: String?
        @Flag(help: "A proof for no token (no ath): a request that presents none.") var noToken = false
        @Flag(help: "Print {proof, token, type, expires_at, account} as JSON (the token the proof's ath names).") var json = false

        func validate() throws {
            guard method.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }), !method.isEmpty else {
                throw ValidationError("METHOD is an HTTP method such as GET or POST")
            }
            guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), ["https", "http"].contains(scheme), parsed.host != nil else {
                throw ValidationError("URL must be an absolute http(s) URL")
            }
            if noToken && json { throw ValidationError("--json prints the token the proof names; --no-token names none") }
        }

        func run() async throws {
            guard let target = URL(string: url) else { throw CommandFailure(.usage, "URL must be an absolute http(s) URL") }
            let command = self
            let (proof, token) = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(command.account)
                let token = command.noToken ? nil : try await opened.session.validAccessToken(for: id)
                let proof = try await opened.session.dpopProof(
                    for: id, method: command.method.uppercased(), url: target, accessToken: token, nonce: command.nonce)
                return (proof, token)
            }
            if json, let token {
                let object: JSONValue = [
                    "proof": .string(proof), "token": .string(token.value), "type": .string(token.tokenType),
                    "expires_at": .date(token.expiresAt), "account": .string(token.account.rawValue),
                ]
                print(object.rendered, terminator: "")
            } else {
                print(proof)
            }
        }
    }
}
