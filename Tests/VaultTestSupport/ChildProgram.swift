import Foundation
import VaultProcess

/// A child program a test drives while it runs — `SessionProbe`, say: every line it printed
/// so far, its standard error, and its exit once it ended. The test can write to its standard
/// input and kill it with SIGKILL at any moment. The child inherits this process's
/// environment (or is given one), a sanitizer's settings included.
///
/// ```swift
/// let child = try ChildProgram(BuiltProgram.url(named: "SessionProbe"), [vault.path, key.path, "rotate-loop", "1000"])
/// _ = await child.waitForLine { $0.hasPrefix("committed") }
/// await child.kill()
/// let lines = child.output.value.lines
/// ```
public final class ChildProgram: Sendable {
    public struct Output: Sendable {
        /// Every complete line printed on standard output so far, without its newline.
        public var lines: [String] = []
        public var standardError = ""
        /// The exit code, or 128 + the signal's number when a signal ended it (as a shell says).
        public var exitStatus: Int32?
        /// Whether ``ChildProgram/kill()`` sent SIGKILL while the child still ran.
        public var killed = false
    }

    /// What the child printed so far, and its exit status once it ended.
    public let output = Watched(Output())
    /// The child's process id (to read its `/proc/PID/…` while it runs).
    public let processIdentifier: Int32
    private let input: FileHandle

    /// Starts `executable ARGUMENTS`, with exactly `environment` when given (plus a sanitizer's
    /// settings), else this process's; throws if it could not be started.
    public init(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws {
        _ = Self.brokenPipesIgnored
        var variables = environment
        if let environment {
            var inherited = ProcessInfo.processInfo.environment.filter { $0.key.hasSuffix("SAN_OPTIONS") }
            // The child's own bound on a request scales with the tests' (TestTimeScale), like every wait.
            inherited["VAULT_HTTP_TIMEOUT"] = "\(Int(15 * TestTimeScale.factor))"
            variables = environment.merging(inherited) { given, _ in given }
        }
        let standardInput = Pipe()
        let standardOutput = Pipe()
        let standardError = Pipe()
        // posix_spawn, not Foundation's Process: see `Spawn`.
        let pid = try Spawn.start(
            executable, arguments, environment: variables, input: standardInput.fileHandleForReading.fileDescriptor,
            output: standardOutput.fileHandleForWriting.fileDescriptor, error: standardError.fileHandleForWriting.fileDescriptor)
        // The child's ends belong to the child now: closed here, its output reaches end-of-file when it exits.
        try? standardInput.fileHandleForReading.close()
        try? standardOutput.fileHandleForWriting.close()
        try? standardError.fileHandleForWriting.close()
        processIdentifier = pid
        input = standardInput.fileHandleForWriting
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
            let status = Spawn.waitBlocking(pid).shellStatus
            errorsRead.wait()
            output.update { $0.exitStatus = status }
        }
        // Standard error on its own thread, so a child that writes much there never blocks.
        // Read as it comes, so a test can wait for a prompt the child writes there.
        Thread.detachNewThread {
            let handle = standardError.fileHandleForReading
            var received = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                received += chunk
                let text = String(decoding: received, as: UTF8.self)
                output.update { $0.standardError = text }
            }
            errorsRead.signal()
        }
    }

    /// A write to a child that already ended fails (EPIPE) instead of killing the test process.
    private static let brokenPipesIgnored: Void = { signal(SIGPIPE, SIG_IGN) }()

    deinit {
        if output.value.exitStatus == nil { Foundation.kill(processIdentifier, SIGKILL) }
    }

    /// Writes `text` to the child's standard input.
    public func write(_ text: String) {
        try? input.write(contentsOf: Data(text.utf8))
    }

    /// Closes the child's standard input: it reads end-of-file.
    public func closeInput() {
        try? input.close()
    }

    /// Kills the child with SIGKILL (a no-op if it already ended) and waits until it is gone.
    public func kill() async {
        if output.value.exitStatus == nil {
            output.update { $0.killed = true }
            Foundation.kill(processIdentifier, SIGKILL)
        }
        await output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.exitStatus != nil }
    }

    /// Waits until a printed line satisfies `condition` or the child ended; whether a line did.
    @discardableResult
    public func waitForLine(timeout: Duration = TestTimeScale.scaled(.seconds(60)), _ condition: @escaping @Sendable (String) -> Bool) async -> Bool {
        await output.wait(upTo: timeout) { $0.lines.contains(where: condition) || $0.exitStatus != nil }
        return output.value.lines.contains(where: condition)
    }

    /// Waits for the child to end by itself; its lines. Throws if it failed or did not end in
    /// time (killing it then).
    public func finish(timeout: Duration = TestTimeScale.scaled(.seconds(120))) async throws -> [String] {
        guard await output.wait(upTo: timeout, until: { $0.exitStatus != nil }) else {
            await kill()
            throw ChildProgramError(message: "the child did not finish in \(timeout); its last lines: \(output.value.lines.suffix(5))")
        }
        let result = output.value
        guard result.exitStatus == 0 else {
            throw ChildProgramError(message: "the child exited with \(result.exitStatus ?? -1): \(result.lines.suffix(5)) \(result.standardError)")
        }
        return result.lines
    }
}

public struct ChildProgramError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
