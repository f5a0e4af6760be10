import Foundation
import VaultTestSupport

struct StressChildError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A `SessionProbe` child running one of the reliability operations
/// (Tests/SessionProbe/ReliabilityOperations.swift), which a test may kill with SIGKILL at any moment.
///
/// ```swift
/// let child = try StressChild(vault: url, keyFile: key, "rotate-loop", "1000", account.rawValue)
/// try await Task.sleep(for: .milliseconds(40))
/// await child.kill()
/// let lines = child.output.value.lines
/// ```
final class StressChild: Sendable {
    struct Output: Sendable {
        var lines: [String] = []
        var standardError = ""
        var exitStatus: Int32?
        var killed = false
    }

    let output = Watched(Output())
    private let pid: Int32

    init(vault: URL, keyFile: URL, _ operation: String, _ arguments: String...) throws {
        let process = Process()
        process.executableURL = try Self.executableURL()
        process.arguments = [vault.path, keyFile.path, operation] + arguments
        let standardOutput = Pipe()
        let standardError = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = standardOutput
        process.standardError = standardError
        try process.run()
        pid = process.processIdentifier
        let output = self.output
        let errorsRead = DispatchSemaphore(value: 0)
        // Blocking reads on threads of their own, never on the cooperative pool.
        Thread.detachNewThread {
            let handle = standardOutput.fileHandleForReading
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                var lines: [String] = []
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
                if !lines.isEmpty { output.update { $0.lines += lines } }
            }
            process.waitUntilExit()
            let status = process.terminationStatus
            errorsRead.wait()
            output.update { $0.exitStatus = status }
        }
        // Standard error on its own thread, so a child that writes much there never blocks.
        Thread.detachNewThread {
            let text = String(decoding: standardError.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            output.update { $0.standardError = text }
            errorsRead.signal()
        }
    }

    deinit {
        if output.value.exitStatus == nil { Foundation.kill(pid, SIGKILL) }
    }

    /// Kills the child with SIGKILL (a no-op if it already ended) and waits until it is gone.
    func kill() async {
        if output.value.exitStatus == nil {
            output.update { $0.killed = true }
            Foundation.kill(pid, SIGKILL)
        }
        await output.wait(upTo: .seconds(30)) { $0.exitStatus != nil }
    }

    /// Waits until a printed line satisfies `condition` or the child ended; whether a line did.
    @discardableResult
    func waitForLine(timeout: Duration = .seconds(60), _ condition: @escaping @Sendable (String) -> Bool) async -> Bool {
        await output.wait(upTo: timeout) { $0.lines.contains(where: condition) || $0.exitStatus != nil }
        return output.value.lines.contains(where: condition)
    }

    /// Waits for the child to end by itself; its lines. Throws if it failed or did not end in time.
    func finish(timeout: Duration = .seconds(120)) async throws -> [String] {
        guard await output.wait(upTo: timeout, until: { $0.exitStatus != nil }) else {
            await kill()
            throw StressChildError(message: "SessionProbe did not finish in \(timeout); printed \(output.value.lines.suffix(5))")
        }
        let result = output.value
        guard result.exitStatus == 0 else {
            throw StressChildError(message: "SessionProbe exited with \(result.exitStatus ?? -1): \(result.lines.suffix(5)) \(result.standardError)")
        }
        return result.lines
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
        throw StressChildError(message: "SessionProbe is not next to the test binary (looked in \(directories.map(\.path))): build it with `swift build --build-tests`")
    }
}

/// A random number of milliseconds in `range`, as a Duration.
func randomDelay(_ range: ClosedRange<Int>) -> Duration {
    .milliseconds(Int.random(in: range))
}
