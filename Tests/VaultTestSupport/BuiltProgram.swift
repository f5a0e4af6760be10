import Foundation
import VaultProcess

/// Runs an executable that `swift build --build-tests` put next to the test bundle (the
/// `vault` command, say) as a child process, and collects what it printed.
public enum BuiltProgram {
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// The executable `name`: `$<NAME>_BINARY` when set, else next to the running test bundle.
    public static func url(named name: String) throws -> URL {
        if let override = ProcessInfo.processInfo.environment["\(name.uppercased())_BINARY"] {
            return URL(fileURLWithPath: override)
        }
        var candidates = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let executable = Bundle.main.executableURL { candidates.append(executable.deletingLastPathComponent()) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        for directory in candidates {
            let url = directory.appending(path: name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw NotFound(name: name, searched: candidates.map(\.path))
    }

    public struct NotFound: Error, CustomStringConvertible {
        public var name: String
        public var searched: [String]
        public var description: String {
            "\(name) was not found in \(searched); build with `swift build --build-tests` or set \(name.uppercased())_BINARY"
        }
    }

    /// Runs `executable ARGUMENTS` with exactly `environment` (plus the `*SAN_OPTIONS` of a
    /// sanitizer run and `VAULT_HTTP_TIMEOUT` scaled by `TestTimeScale`, unless given), `stdin`
    /// as standard input, and
    /// waits for it to exit without blocking a thread. Output goes through files in
    /// `directory`, so a large output never fills a pipe.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String],
        stdin: String = "", in directory: TemporaryDirectory
    ) async throws -> Output {
        let id = UUID().uuidString
        let outURL = directory.file(".out-\(id)")
        let errURL = directory.file(".err-\(id)")
        let inURL = directory.file(".in-\(id)")
        defer { for url in [outURL, errURL, inURL] { try? FileManager.default.removeItem(at: url) } }
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: inURL.path, contents: Data(stdin.utf8), attributes: [.posixPermissions: 0o600])
        // A sanitizer's settings reach the child too (where its reports go, its suppressions).
        var inherited = ProcessInfo.processInfo.environment.filter { $0.key.hasSuffix("SAN_OPTIONS") }
        // The child's own bound on a request scales with the tests' (TestTimeScale), like every wait.
        inherited["VAULT_HTTP_TIMEOUT"] = "\(Int(15 * TestTimeScale.factor))"
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        let input = try FileHandle(forReadingFrom: inURL)
        defer {
            try? out.close()
            try? err.close()
            try? input.close()
        }
        // posix_spawn, not Foundation's Process: see `Spawn`.
        let pid = try Spawn.start(
            executable, arguments, environment: environment.merging(inherited) { given, _ in given },
            input: input.fileDescriptor, output: out.fileDescriptor, error: err.fileDescriptor)
        let termination = await Spawn.wait(pid)
        return Output(
            status: termination.status,
            stdout: String(decoding: FileProbe.bytes(outURL), as: UTF8.self),
            stderr: String(decoding: FileProbe.bytes(errURL), as: UTF8.self))
    }
}
