import Foundation
import Testing
import VaultTestSupport

/// What one run of the `vault` binary did.
struct CommandResult: CustomStringConvertible {
    var arguments: [String]
    var status: Int32
    var stdout: String
    var stderr: String

    /// Both streams, for "does this secret appear anywhere" checks.
    var allOutput: String { stdout + "\n" + stderr }

    /// Standard output parsed as JSON.
    func json() throws -> Any {
        try JSONSerialization.jsonObject(with: Data(stdout.utf8), options: [.fragmentsAllowed])
    }

    func jsonObject() throws -> [String: Any] {
        try #require(try json() as? [String: Any], "stdout is not a JSON object: \(stdout)")
    }

    func jsonArray() throws -> [[String: Any]] {
        try #require(try json() as? [[String: Any]], "stdout is not a JSON array: \(stdout)")
    }

    var description: String { "vault \(arguments.joined(separator: " ")) → \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

/// Runs the built `vault` binary (built next to the test bundle by `swift build --build-tests`)
/// against a vault in a private temporary directory, with a controlled environment: nothing
/// from the developer's own VAULT_* variables leaks in.
struct VaultCLI: Sendable {
    let directory: TemporaryDirectory
    let vault: URL
    /// Extra environment for every run (VAULT_PASSPHRASE, say).
    var environment: [String: String]

    init(environment: [String: String] = [:]) throws {
        directory = try TemporaryDirectory("vault-cli")
        vault = directory.file("vault.db")
        self.environment = environment
    }

    func file(_ name: String) -> URL { directory.file(name) }

    /// A new key-file vault (no Argon2id in every call), `VAULT_KEY_FILE` set for every run.
    static func keyFileVault() async throws -> VaultCLI {
        var cli = try VaultCLI()
        cli.environment["VAULT_KEY_FILE"] = cli.file("vault.key").path
        let created = try await cli.run(["init", "--key-file", cli.file("vault.key").path])
        try #require(created.status == 0, "\(created)")
        return cli
    }

    /// Runs `vault ARGUMENTS` with `VAULT_PATH` set to this vault and `stdin` as standard input.
    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:]) async throws -> CommandResult {
        var environment = [
            "PATH": "/usr/bin:/bin",
            "HOME": directory.url.path,
            "VAULT_PATH": vault.path,
            // A locked agent never prompts on the terminal of a developer running the tests
            // (CI has none); the tests of prompting set their own terminal.
            "VAULT_NO_PROMPT": "1",
        ]
        environment.merge(self.environment) { $1 }
        environment.merge(extra) { $1 }
        let output = try await BuiltProgram.run(
            try BuiltProgram.url(named: "vault"), arguments,
            environment: environment, stdin: stdin ?? "", in: directory)
        return CommandResult(arguments: arguments, status: output.status, stdout: output.stdout, stderr: output.stderr)
    }

    /// Starts `vault ARGUMENTS` as a child that keeps running (its standard input open), with
    /// the same environment as ``run(_:stdin:environment:)``.
    func start(_ arguments: [String]) throws -> ChildProgram {
        var environment = ["PATH": "/usr/bin:/bin", "HOME": directory.url.path, "VAULT_PATH": vault.path, "VAULT_NO_PROMPT": "1"]
        environment.merge(self.environment) { $1 }
        return try ChildProgram(try BuiltProgram.url(named: "vault"), arguments, environment: environment)
    }
}
/// Exit codes as the README documents them.
enum Exit {
    static let usage: Int32 = 64
    static let damaged: Int32 = 65
    static let noVault: Int32 = 66
    static let noRecord: Int32 = 67
    static let alreadyExists: Int32 = 73
    static let wrongCredential: Int32 = 77
    static let schemaTooNew: Int32 = 78
    static let sessionLocked: Int32 = 79
    static let sessionEnded: Int32 = 80
    static let migrationNeeded: Int32 = 81
    static let pinningFailed: Int32 = 83
}
