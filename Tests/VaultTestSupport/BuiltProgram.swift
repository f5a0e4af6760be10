import Foundation
import Subprocess
import SystemPackage

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
    /// sanitizer run) and `stdin` as standard input, and waits for it to exit without blocking
    /// a thread. `status` is the exit code, or 128 + the signal's number when a signal ended it.
    public static func run(_ executable: URL, _ arguments: [String], environment: [String: String],
                           stdin: String = "") async throws -> Output {
        // A sanitizer's settings reach the child too (where its reports go, its suppressions).
        let sanitizerSettings = ProcessInfo.processInfo.environment.filter { $0.key.hasSuffix("SAN_OPTIONS") }
        var childEnvironment: [Environment.Key: String] = [:]
        for (key, value) in environment.merging(sanitizerSettings, uniquingKeysWith: { given, _ in given }) {
            if let key = Environment.Key(rawValue: key) { childEnvironment[key] = value }
        }
        let result = try await Subprocess.run(
            .path(FilePath(executable.path)), arguments: Arguments(arguments),
            environment: .custom(childEnvironment),
            input: .string(stdin), output: .bytes(limit: .max), error: .bytes(limit: .max))
        let status: Int32 = switch result.terminationStatus {
        case .exited(let code): code
        case .signaled(let signal): 128 + signal
        }
        return Output(status: status,
                      stdout: String(decoding: result.standardOutput, as: UTF8.self),
                      stderr: String(decoding: result.standardError, as: UTF8.self))
    }
}
