// client-tool: a small command-line client of an OAuth identity service that keeps its user's
// sign-in in a CredentialVault instead of a plaintext file.
//
//     client-tool login --issuer https://id.example.com --client-id my-tool
//     client-tool profile --api https://api.example.com/api/profile
//
// The vault is one file (default ~/.local/share/client-tool/vault.db) opened with a key file
// (default ~/.config/client-tool/vault.key, made on first use, mode 0600). Every API call takes
// its token from `validAccessToken()` (refreshed ahead of expiry, one refresh however many
// callers), and a 401 is answered with `reportUnauthorized(_:)`, which refreshes once and gives
// the new token, or throws when the sign-in was revoked. Session events are printed as they come.
import ArgumentParser
import Foundation
import Logging
import VaultOAuth
import VaultSession
import VaultStore

@main
struct ClientTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client-tool",
        abstract: "An example client tool whose sign-in lives in a CredentialVault.",
        subcommands: [Login.self, Profile.self])
}

/// Where the vault and its key file are.
struct Storage: ParsableArguments {
    @Option(help: "The vault file.")
    var vault = Storage.home(".local/share/client-tool/vault.db")
    @Option(help: "The key file that opens it (made on first use).")
    var keyFile = Storage.home(".config/client-tool/vault.key")

    static func home(_ path: String) -> String {
        (ProcessInfo.processInfo.environment["HOME"] ?? NSTemporaryDirectory()) + "/" + path
    }

    /// Opens the vault, creating it (and its key file) the first time.
    func open() throws -> Vault {
        let vaultURL = URL(fileURLWithPath: vault)
        let keyURL = URL(fileURLWithPath: keyFile)
        for directory in [vaultURL.deletingLastPathComponent(), keyURL.deletingLastPathComponent()] {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        if !FileManager.default.fileExists(atPath: keyURL.path) { try VaultCredential.createKeyFile(at: keyURL) }
        let options = VaultOptions(logger: Storage.logger("client-tool.vault"))
        if FileManager.default.fileExists(atPath: vaultURL.path) {
            return try Vault.open(at: vaultURL, credential: .keyFile(keyURL), options: options)
        }
        return try Vault.create(at: vaultURL, credential: .keyFile(keyURL), options: options)
    }

    /// The library logs through swift-log; this tool shows warnings and worse on standard error.
    static func logger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .warning
        return logger
    }

    /// The session service over the vault, its events printed to standard error while `body` runs.
    func withSession<T: Sendable>(_ body: (SessionService) async throws -> T) async throws -> T {
        let vault = try open()
        let session = SessionService(
            vault: vault, oauth: OAuthClient(logger: Storage.logger("client-tool.oauth")),
            logger: Storage.logger("client-tool.session"))
        let events = session.events()
        let printer = Task { for await event in events { FileHandle.standardError.write(Data("event: \(event)\n".utf8)) } }
        do {
            let result = try await body(session)
            await session.stop()
            printer.cancel()
            vault.close()
            return result
        } catch {
            await session.stop()
            printer.cancel()
            vault.close()
            throw error
        }
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sign in with a device code (RFC 8628).")

    @OptionGroup var storage: Storage
    @Option(help: "The identity service's issuer URL (its metadata is discovered).")
    var issuer: String
    @Option(help: "This tool's client id at the identity service.")
    var clientID = "client-tool"

    func run() async throws {
        guard let issuerURL = URL(string: issuer) else { throw ValidationError("--issuer is not a URL") }
        let account = try await storage.withSession { session in
            let provider = try await session.discoverProvider(issuer: issuerURL)
            let result = try await session.signIn(
                using: SignInRequest(
                    provider: provider, clientID: clientID, scopes: ["openid", "profile", "offline_access"],
                    method: .device { authorization in
                        // Written at once (print buffers when standard output is a pipe).
                        FileHandle.standardOutput.write(
                            Data(
                                "To sign in, open \(authorization.verificationURI) and enter the code \(authorization.userCode)\n".utf8))
                    }))
            return result.account
        }
        print("Signed in as \(account.label ?? account.subject).")
    }
}

struct Profile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Call the protected API with the signed-in account's token.")

    @OptionGroup var storage: Storage
    @Option(help: "The protected API's URL.")
    var api: String

    func run() async throws {
        guard let url = URL(string: api) else { throw ValidationError("--api is not a URL") }
        let body = try await storage.withSession { session in
            let transport = NIOTransport()
            var token = try await session.validAccessToken()
            var response = try await transport.send(HTTPRequest(method: .get, url: url, headers: ["Authorization": token.authorizationHeader]))
            if response.status == 401 {
                // The server refused a token the vault thought valid: refresh once and retry.
                // Throws SessionError when the sign-in itself was revoked (sign in again).
                print("The API refused the access token; refreshing and retrying once.")
                token = try await session.reportUnauthorized(token)
                response = try await transport.send(HTTPRequest(method: .get, url: url, headers: ["Authorization": token.authorizationHeader]))
            }
            guard response.isSuccess else { throw ValidationError("the API answered \(response.status)") }
            return String(decoding: response.body, as: UTF8.self)
        }
        print("Profile: \(body)")
    }
}
