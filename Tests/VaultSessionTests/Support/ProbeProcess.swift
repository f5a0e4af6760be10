import VaultTestSupport
import Foundation
import VaultCrypto

struct ProbeError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A running `SessionProbe` child (see Tests/SessionProbe/main.swift): it opens the vault,
/// prints `ready`, waits for ``go()``, runs its operation and prints one line per result.
///
/// ```swift
/// let probe = try ProbeProcess(vault: url, keyFile: key, operation: "tokens", argument: "50", now: time.now())
/// _ = await probe.waitUntilReady()
/// probe.go()
/// let lines = try await probe.results()
/// ```
// @unchecked Sendable: every stored property is a `let`. `output` is Sendable (a Mutex
// inside); `process` and `input` are set up in `init` before the value is shared, and after
// that only used through calls Foundation makes safe from any thread (`terminate()`,
// `isRunning`, `waitUntilExit()` and `terminationStatus` on the reader thread, and
// writing to the pipe's file handle), never mutated.
final class ProbeProcess: @unchecked Sendable {
    struct Output: Sendable {
        var lines: [String] = []
        var standardError = ""
        var exitStatus: Int32?
    }

    /// What the child printed so far, and its exit status once it ended.
    let output = Watched(Output())
    private let process = Process()
    private let input = Pipe()

    init(vault: URL, keyFile: URL, operation: String, argument: String, now: Date) throws {
        process.executableURL = try Self.executableURL()
        process.arguments = [vault.path, keyFile.path, operation, argument,
                             "--now", "\(Int64((now.timeIntervalSince1970 * 1000).rounded()))"]
        let standardOutput = Pipe()
        let standardError = Pipe()
        process.standardInput = input
        process.standardOutput = standardOutput
        process.standardError = standardError
        try process.run()
        let output = self.output
        let process = self.process
        // Blocking reads on threads of their own, never on the cooperative pool.
        Thread.detachNewThread {
            let handle = standardOutput.fileHandleForReading
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    output.update { $0.lines.append(line) }
                }
            }
            process.waitUntilExit()
            let status = process.terminationStatus
            output.update { $0.exitStatus = status }
        }
        Thread.detachNewThread {
            let text = String(decoding: standardError.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            output.update { $0.standardError = text }
        }
    }

    deinit {
        if process.isRunning { process.terminate() }
    }

    /// Waits for the child's `ready` line; false if it exited or did not get there in time.
    func waitUntilReady(timeout: Duration = .seconds(60)) async -> Bool {
        await output.wait(upTo: timeout) { $0.lines.contains("ready") || $0.exitStatus != nil }
        return output.value.lines.contains("ready")
    }

    /// Lets the child run its operation.
    func go() {
        input.fileHandleForWriting.write(Data("go\n".utf8))
        try? input.fileHandleForWriting.close()
    }

    /// The result lines once the child exited (without `ready`).
    func results(timeout: Duration = .seconds(60)) async throws -> [String] {
        guard await output.wait(upTo: timeout, until: { $0.exitStatus != nil }) else {
            process.terminate()
            throw ProbeError(message: "SessionProbe did not finish in \(timeout); printed \(output.value.lines)")
        }
        let result = output.value
        guard result.exitStatus == 0 else {
            throw ProbeError(message: "SessionProbe exited with \(result.exitStatus ?? -1): \(result.lines) \(result.standardError)")
        }
        return result.lines.filter { $0 != "ready" }
    }

    /// `SessionProbe`, built by `swift build --build-tests` next to the test binary.
    static func executableURL() throws -> URL {
        var directories: [URL] = []
        if let running = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: running).deletingLastPathComponent())
        }
        directories.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        if let bundle = Bundle.main.executableURL { directories.append(bundle.deletingLastPathComponent()) }
        for directory in directories {
            let candidate = directory.appendingPathComponent("SessionProbe")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw ProbeError(message: "SessionProbe is not next to the test binary (looked in \(directories.map(\.path))): build it with `swift build --build-tests`")
    }
}

/// Lowercase hex SHA-256 of a token, as the probe prints it.
func digest(_ token: String) -> String {
    Digest.hex(Digest.sha256(Array(token.utf8)))
}
