import ArgumentParser
import Foundation
import VaultAgent
import VaultStore

extension VaultCommand.Accounts {
    struct SetHost: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "set-host",
            abstract: "Hand an account's token to git and docker for these hosts.",
            discussion: """
                Each HOST is host[:port][/path-prefix] (no scheme). `vault git-credential` and \
                `vault docker-credential` answer a request for that host (and, with a path, for \
                paths under it; the longest prefix wins) with this account's token. One host \
                belongs to one account. No HOST with --clear removes them.

                Example:
                  vault accounts set-host alice git.example.com/team --username alice
                  git config --global credential.https://git.example.com.helper '!vault git-credential'
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Argument(help: ArgumentHelp(AccountReference.help, valueName: "account")) var account: String
        @Argument(help: ArgumentHelp("host[:port][/path] entries.", valueName: "host")) var hosts: [String] = []
        @Option(help: ArgumentHelp("The user name the helpers answer with. Default oauth2.", valueName: "name")) var username: String?
        @Flag(help: "Remove every host of the account.") var clear = false

        func validate() throws {
            if hosts.isEmpty && !clear { throw ValidationError("give at least one host, or --clear") }
            for host in hosts where CredentialHosts.normalise(host) == nil {
                throw ValidationError("\(host) is not host[:port][/path]")
            }
            if let username, username.isEmpty || username.contains(where: { $0.isNewline || $0 == "=" }) {
                throw ValidationError("--username must be one line without =")
            }
        }

        func run() async throws {
            let entries = clear ? [] : hosts.compactMap(CredentialHosts.normalise)
            try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                try opened.vault.setCredentialHosts(entries, username: username, for: id)
                let who = opened.name(of: id)
                print(
                    entries.isEmpty
                        ? "\(who) is handed to no host."
                        : "\(who) is handed to \(entries.joined(separator: ", ")) as \(Terminal.printable(username ?? "oauth2")).")
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
                Configure: git config --global credential.https://HOST.helper '!vault git-credential'
                (and `credential.useHttpPath true` for path prefixes). `get` answers username, \
                password (the access token, valid at least a minute) and password_expiry_utc for a \
                host set with `vault accounts set-host`, and nothing for other hosts (git asks its \
                next helper). `erase` of the token it gave counts as a refused token: the next \
                `get` has a refreshed one. `store` is ignored: the vault keeps its own tokens. \
                Only https, or http to this machine.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Flag(help: "Open the vault directly even when an agent serves it.") var noAgent = false
        @Argument(help: ArgumentHelp("get, store or erase.", valueName: "operation")) var operation: String

        func run() async throws {
            let attributes = try Self.readAttributes()
            let client = AgentOrVault(global: global, credentials: credentials, noAgent: noAgent)
            guard let scheme = attributes["protocol"], let host = attributes["host"] else { return }
            switch operation {
            case "get":
                guard let token = try await client.credential(scheme: scheme, host: host, path: attributes["path"]) else { return }
                var lines = ["username=\(token.username ?? "oauth2")", "password=\(token.value)"]
                if let expiry = token.expiresAt { lines.append("password_expiry_utc=\(Int(expiry))") }
                print(lines.joined(separator: "\n"))
            case "erase":
                guard let presented = attributes["password"] else { return }
                try await client.unauthorized(scheme: scheme, host: host, path: attributes["path"], presented: presented)
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
                Configure: link the binary as docker-credential-vault on $PATH and set \
                {"credHelpers": {"registry.example.com": "vault"}} in ~/.docker/config.json. `get` \
                reads a server URL and answers {"ServerURL", "Username", "Secret"} for a host set \
                with `vault accounts set-host`, else "credentials not found in native keychain" \
                (exit 1, as docker expects); `list` answers every host; `store` and `erase` are \
                ignored: the vault keeps its own tokens.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Flag(help: "Open the vault directly even when an agent serves it.") var noAgent = false
        @Argument(help: ArgumentHelp("get, store, erase or list.", valueName: "operation")) var operation: String

        static let notFound = "credentials not found in native keychain"

        func run() async throws {
            let client = AgentOrVault(global: global, credentials: credentials, noAgent: noAgent)
            let input = FileHandle.standardInput.readData(ofLength: 64 * 1024)
            switch operation {
            case "get":
                let server = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                let url = URL(string: server.contains("://") ? server : "https://\(server)")
                guard let url, let host = url.host else { throw CommandFailure(.failure, Self.notFound) }
                let authority = url.port.map { "\(host):\($0)" } ?? host
                guard let token = try await client.credential(scheme: url.scheme ?? "https", host: authority, path: url.path) else {
                    print(Self.notFound)
                    // Thrown, not exit(1) here: the frame unwinds first, so nothing it holds is
                    // still allocated at exit (LeakSanitizer reported the input, exited before
                    // stdout was flushed, and docker saw no answer).
                    throw ExitCode(1)
                }
                let answer: JSONValue = ["ServerURL": .string(server), "Username": .string(token.username ?? "oauth2"), "Secret": .string(token.value)]
                print(answer.compact)
            case "list":
                let hosts = try await client.hosts()
                print(JSONValue.object(hosts.sorted { $0.key < $1.key }.map { ("https://\($0.key)", .string($0.value)) }).compact)
            case "store", "erase":
                return
            default:
                throw CommandFailure(.usage, "unknown operation \(Terminal.printable(operation)): get, store, erase or list")
            }
        }
    }
}
