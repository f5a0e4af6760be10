import ArgumentParser
import Foundation
import VaultAgent
import VaultCrypto
import VaultSession
import VaultStore

extension VaultCommand.Accounts {
    struct SetHost: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "set-host",
            abstract: "Hand an account's token to git and docker for these hosts.",
            discussion: """
                Each HOST is host[:port][/path-prefix] (no scheme). `vault git-credential` and \
                `vault docker-credential` answer a request for that host (and, with a path, for \
                paths under it; the longest prefix wins) with this account's token. Several \
                accounts may share a host when their user names differ: a request naming a user \
                (git's `https://bob@host/...`) gets that account; one naming none gets the host's \
                default, the first account bound to it unless --default made another one it. \
                The HOSTs given replace the account's; no HOST with --clear removes them. With \
                --resource (and --scope), the helpers hand a token for that API instead of the \
                account's own (RFC 8707), kept until --own-token.

                Example:
                  vault accounts set-host alice git.example.com/team --username alice
                  vault accounts set-host bob git.example.com/team --username bob
                  git config --global credential.https://git.example.com.helper vault
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Argument(help: ArgumentHelp(AccountReference.help, valueName: "account")) var account: String
        @Argument(help: ArgumentHelp("host[:port][/path] entries.", valueName: "host")) var hosts: [String] = []
        @Option(help: ArgumentHelp("The user name the helpers answer with. Default oauth2.", valueName: "name")) var username: String?
        @Flag(help: "Remove every host of the account.") var clear = false
        @Flag(help: "Make the account the default of these hosts (it answers requests naming no user).") var `default` = false
        @OptionGroup var target: TargetOptions
        @Flag(help: "Hand the account's own token again (no --resource or --scope).") var ownToken = false

        func validate() throws {
            if hosts.isEmpty && !clear { throw ValidationError("give at least one host, or --clear") }
            if clear && self.default { throw ValidationError("--default makes the account the default of hosts it keeps: not with --clear") }
            for host in hosts where CredentialHosts.normalise(host) == nil {
                throw ValidationError("\(host) is not host[:port][/path]")
            }
            if ownToken, !target.resources.isEmpty || !target.scopes.isEmpty {
                throw ValidationError("--own-token hands the account's own token: not with --resource or --scope")
            }
            if let username, username.isEmpty || username.contains(where: { $0.isNewline || $0 == "=" }) {
                throw ValidationError("--username must be one line without =")
            }
        }

        func run() async throws {
            let entries = clear ? [] : hosts.compactMap(CredentialHosts.normalise)
            try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                if !entries.isEmpty, try opened.vault.accounts.find(id)?.hasDPoPKey == true {
                    throw CommandFailure(
                        .usage,
                        "\(opened.name(of: id))'s tokens are bound to a DPoP key: git and docker send a token as a password and cannot send the proof each request needs, so the server would refuse it; nothing was changed"
                    )
                }
                let asked = try target.target
                try opened.vault.accounts.setCredentialHosts(
                    entries, username: username, makeDefault: self.default, target: ownToken ? .account : asked.isAccount ? nil : asked, for: id)
                let who = opened.name(of: id)
                guard !entries.isEmpty else {
                    print("\(who) is handed to no host.")
                    return
                }
                let defaults = Set((try? opened.vault.accounts.find(id))?.credentialDefaultHosts ?? [])
                let listed = entries.map { defaults.contains($0) ? $0 : "\($0) (not its default)" }
                let handed = (try? opened.vault.accounts.find(id))?.credentialTarget ?? .account
                let what = handed.isAccount ? "" : " (a token for \(Terminal.printable(handed.description)))"
                print("\(who) is handed to \(listed.joined(separator: ", ")) as \(Terminal.printable(username ?? "oauth2"))\(what).")
            }
        }
    }
}

extension VaultCommand {
    /// The git credential protocol (git-credential(1)) on standard input and output.
    struct GitCredential: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "git-credential",
            abstract: "A git credential helper: answers with the token of the account set for the host.",
            discussion: """
                Configure: `make install` puts git-credential-vault on $PATH; then \
                git config --global credential.https://HOST.helper vault (and \
                `credential.useHttpPath true` for path prefixes). `get` answers username, password \
                (the access token, valid at least a minute) and password_expiry_utc for a host set \
                with `vault accounts set-host`: the account bound with the request's username, or \
                without one the host's default. For any other request it answers nothing, decided \
                without the vault's key (no passphrase asked), and git asks its next helper. \
                `erase` of the token it gave counts as a refused token: the next `get` has a \
                refreshed one. `store` is ignored: the vault keeps its own tokens. Only https, or \
                http to this machine.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Flag(help: "Open the vault directly even when an agent serves it.") var noAgent = false
        @Argument(help: ArgumentHelp("get, store or erase.", valueName: "operation")) var operation: String

        func run() async throws {
            let attributes = try Self.readAttributes()
            let client = AgentOrVault(global: global, credentials: credentials, noAgent: noAgent)
            guard let scheme = attributes["protocol"], let host = attributes["host"] else { return }
            let username = attributes["username"].flatMap { $0.isEmpty ? nil : $0 }
            switch operation {
            case "get":
                guard let token = try await client.credential(scheme: scheme, host: host, path: attributes["path"], username: username) else {
                    return
                }
                var lines = ["username=\(token.username ?? "oauth2")", "password=\(token.value)"]
                if let expiry = token.expiresAt { lines.append("password_expiry_utc=\(Int(expiry))") }
                print(lines.joined(separator: "\n"))
            case "erase":
                guard let presented = attributes["password"] else { return }
                try await client.unauthorized(scheme: scheme, host: host, path: attributes["path"], username: username, presented: presented)
            case "store":
                return
            default:
                return  // git may add operations; unknown ones are ignored, as gitcredentials(7) asks
            }
        }

        /// `key=value` lines until a blank line or end of input (at most 64 KiB).
        static func readAttributes() throws -> [String: String] {
            var attributes: [String: String] = [:]
            var total = 0
            while let line = readLine(strippingNewline: true) {
                total += line.utf8.count + 1
                guard total <= 64 * 1024 else { throw CommandFailure(.usage, "the credential request is larger than 64 KiB") }
                if line.isEmpty { break }
                guard let equals = line.firstIndex(of: "=") else { continue }
                attributes[String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
            return attributes
        }
    }

    /// The docker credential helper protocol (docker-credential-helpers) on standard input and output.
    struct DockerCredential: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "docker-credential",
            abstract: "A docker credential helper (also as `docker-credential-vault`).",
            discussion: """
                Configure: `make install` puts docker-credential-vault on $PATH; set \
                {"credsStore": "vault"} (every registry) or {"credHelpers": {"registry.example.com": \
                "vault"}} in ~/.docker/config.json. `get` reads a server URL and answers {"ServerURL", \
                "Username", "Secret"} for a host set with `vault accounts set-host` (the host's \
                default account); for any other server "credentials not found in native keychain", \
                decided without the vault's key (no passphrase asked). `list` answers every host \
                with its user name and reads nothing. `store` accepts only what `get` answers (the \
                vault keeps the tokens it issues; sign in with `vault login --host HOST`). `erase` \
                (docker logout) has the host's token refreshed. Every failure is one line on \
                standard output and exit status 1, as docker expects.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Flag(help: "Open the vault directly even when an agent serves it.") var noAgent = false
        @Argument(help: ArgumentHelp("get, store, erase or list.", valueName: "operation")) var operation: String

        static let notFound = "credentials not found in native keychain"

        func run() async throws {
            do {
                try await answer()
            } catch let exit as ExitCode {
                throw exit
            } catch {
                // docker-credential-helpers: the message on standard output and exit status 1;
                // docker and its SDK show standard output, never standard error.
                print(CommandFailure(error)?.message ?? "\(error)")
                throw ExitCode(1)
            }
        }

        private func answer() async throws {
            let client = AgentOrVault(global: global, credentials: credentials, noAgent: noAgent)
            switch operation {
            case "get":
                let server = try Server(Self.input())
                guard let token = try await client.credential(scheme: server.scheme, host: server.authority, path: server.path, username: nil)
                else { throw CommandFailure(.noRecord, Self.notFound) }
                let answer: JSONValue = [
                    "ServerURL": .string(server.text), "Username": .string(token.username ?? "oauth2"), "Secret": .string(token.value),
                ]
                print(answer.compact)
            case "list":
                // Reads nothing: docker's SDK runs `list` with standard input left open.
                let hosts = try await client.hosts()
                print(JSONValue.object(hosts.sorted { $0.key < $1.key }.map { ("https://\($0.key)", .string($0.value)) }).compact)
            case "store":
                try await store(client)
            case "erase":
                let server = try Server(Self.input())
                // docker logout: the token is not to be used again; the vault keeps the sign-in
                // and has the next `get` answer a refreshed one (one request, one vault opening).
                do {
                    guard try await client.unauthorized(scheme: server.scheme, host: server.authority, path: server.path, username: nil, presented: nil)
                    else { throw CommandFailure(.noRecord, Self.notFound) }
                } catch  where CommandFailure(error)?.code == .noRecord {
                    throw CommandFailure(.noRecord, Self.notFound)  // docker's words for it, from either check
                }
            default:
                throw CommandFailure(.usage, "unknown operation \(Terminal.printable(operation)): get, store, erase or list")
            }
        }

        /// `docker login` stores what it was given: accepted when it is what `get` answers (a
        /// login with the vault's own token); anything else the vault cannot keep.
        private func store(_ client: AgentOrVault) async throws {
            let input = Self.input()
            guard let object = try? JSONSerialization.jsonObject(with: input) as? [String: Any], let url = object["ServerURL"] as? String,
                let secret = object["Secret"] as? String
            else {
                throw CommandFailure(.usage, "store reads {\"ServerURL\", \"Username\", \"Secret\"} as JSON on standard input")
            }
            let server = try Server(Data(url.utf8))
            let howTokensGetIn =
                "the vault keeps only tokens it issues: sign in with `vault login --host \(server.binding)` (or bind an account with `vault accounts set-host ACCOUNT \(server.binding)`), then docker asks it"
            guard let token = try await client.credential(scheme: server.scheme, host: server.authority, path: server.path, username: nil) else {
                throw CommandFailure(.noRecord, "\(server.binding) is handed to no account; \(howTokensGetIn)")
            }
            let username = object["Username"] as? String
            guard ConstantTime.equals(token.value, secret), username == nil || username == token.username else {
                throw CommandFailure(.usage, "these credentials for \(server.binding) are not the vault's; \(howTokensGetIn)")
            }
        }

        /// Standard input, at most 64 KiB: what `get`, `store` and `erase` read.
        static func input() -> Data {
            FileHandle.standardInput.readData(ofLength: 64 * 1024)
        }

        /// A registry as docker names it: `registry.example.com`, `https://host:5000/v1/`.
        struct Server {
            let text: String
            let scheme: String
            let authority: String
            let path: String

            init(_ input: Data) throws {
                text = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                let url = URL(string: text.contains("://") ? text : "https://\(text)")
                guard let url, let host = url.host, !host.isEmpty else { throw CommandFailure(.noRecord, DockerCredential.notFound) }
                scheme = url.scheme ?? "https"
                authority = url.port.map { "\(host):\($0)" } ?? host
                path = url.path
            }

            /// How `set-host` and `login --host` name it.
            var binding: String { CredentialHosts.normalise(authority + path) ?? authority }
        }
    }
}
