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

    /// Runs `vault ARGUMENTS` with `VAULT_PATH` set to this vault and `stdin` as standard input.
    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:]) async throws -> CommandResult {
        let id = UUID().uuidString
        let outURL = directory.file(".out-\(id)"), errURL = directory.file(".err-\(id)"), inURL = directory.file(".in-\(id)")
        defer { for url in [outURL, errURL, inURL] { try? FileManager.default.removeItem(at: url) } }
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: inURL.path, contents: Data((stdin ?? "").utf8))

        let process = Process()
        process.executableURL = try Self.binary()
        process.arguments = arguments
        var environment = [
            "PATH": "/usr/bin:/bin",
            "HOME": directory.url.path,
            "VAULT_PATH": vault.path,
        ]
        environment.merge(self.environment) { $1 }
        environment.merge(extra) { $1 }
        process.environment = environment
        let out = try FileHandle(forWritingTo: outURL), err = try FileHandle(forWritingTo: errURL)
        let input = try FileHandle(forReadingFrom: inURL)
        defer { try? out.close(); try? err.close(); try? input.close() }
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input

        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            process.terminationHandler = { _ in continuation.resume() }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        return CommandResult(
            arguments: arguments, status: process.terminationStatus,
            stdout: String(decoding: FileProbe.bytes(outURL), as: UTF8.self),
            stderr: String(decoding: FileProbe.bytes(errURL), as: UTF8.self))
    }

    /// The `vault` executable: $VAULT_BINARY, else next to the running test bundle.
    static func binary() throws -> URL {
        if let override = ProcessInfo.processInfo.environment["VAULT_BINARY"] { return URL(fileURLWithPath: override) }
        var candidates = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let executable = Bundle.main.executableURL { candidates.append(executable.deletingLastPathComponent()) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        for directory in candidates {
            let url = directory.appending(path: "vault")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw BinaryNotFound(searched: candidates.map(\.path))
    }

    struct BinaryNotFound: Error, CustomStringConvertible {
        var searched: [String]
        var description: String {
            "the vault binary was not found in \(searched); build with `swift build --build-tests` or set VAULT_BINARY"
        }
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
}
