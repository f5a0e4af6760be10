import Foundation
import Subprocess
import SystemPackage

/// A child program a test drives while it runs — `SessionProbe`, say: every line it printed
/// so far, its standard error, and its exit once it ended. The test can write to its standard
/// input and kill it with SIGKILL at any moment.
///
/// ```swift
/// let child = try await ChildProgram.start(BuiltProgram.url(named: "SessionProbe"), [vault.path, key.path, "rotate-loop", "1000"])
/// _ = await child.waitForLine { $0.hasPrefix("committed") }
/// await child.kill()
/// let lines = child.output.value.lines
/// ```
///
/// Started through swift-subprocess: no thread blocks on the child, and nothing outlives it
/// (Foundation's `Process` keeps itself alive through a run-loop source, which LeakSanitizer
/// reports as a leak). The child inherits this process's environment, sanitizer settings included.
public final class ChildProgram: Sendable {
    public struct Output: Sendable {
        /// Every complete line printed on standard output so far, without its newline.
        public var lines: [String] = []
        public var standardError = ""
        /// The exit code, or 128 + the signal's number when a signal ended it (as a shell says).
        public var exitStatus: Int32?
        /// Whether ``ChildProgram/kill()`` sent SIGKILL while the child still ran.
        public var killed = false
        fileprivate var started = false
        fileprivate var launchError: String?
    }

    /// What the child printed so far, and its exit status once it ended.
    public let output: Watched<Output>
    private let commands: AsyncStream<Command>.Continuation

    private enum Command: Sendable {
        case write([UInt8])
        case closeInput
        case kill
    }

    /// Starts `executable ARGUMENTS`; returns once it runs. Throws if it could not be started.
    public static func start(_ executable: URL, _ arguments: [String]) async throws -> ChildProgram {
        let child = ChildProgram(executable, arguments)
        await child.output.wait(upTo: .seconds(60)) { $0.started || $0.launchError != nil }
        let state = child.output.value
        if let launchError = state.launchError {
            throw ChildProgramError(message: "\(executable.lastPathComponent) did not start: \(launchError)")
        }
        guard state.started else {
            throw ChildProgramError(message: "\(executable.lastPathComponent) did not start within 60 s")
        }
        return child
    }

    private init(_ executable: URL, _ arguments: [String]) {
        let output = Watched(Output())
        let (stream, commands) = AsyncStream.makeStream(of: Command.self)
        self.output = output
        self.commands = commands
        Task {
            do {
                let result = try await Subprocess.run(
                    .path(FilePath(executable.path)), arguments: Arguments(arguments),
                    input: .inputWriter, output: .sequence, error: .sequence
                ) { execution in
                    output.update { $0.started = true }
                    // The commands act on the execution, which is valid only inside this closure:
                    // they stop once the child closed its output, before the closure returns.
                    let control = Task {
                        for await command in stream {
                            switch command {
                            case .write(let bytes): _ = try? await execution.standardInputWriter.write(bytes)
                            case .closeInput: try? await execution.standardInputWriter.finish()
                            case .kill: try? execution.send(signal: .kill)
                            }
                        }
                    }
                    async let printed: Void = Self.collectLines(execution.standardOutput, into: output)
                    async let errors = Self.collectText(execution.standardError)
                    await printed
                    let text = await errors
                    output.update { $0.standardError = text }
                    control.cancel()
                    await control.value
                }
                let status: Int32 = switch result.terminationStatus {
                case .exited(let code): code
                case .signaled(let signal): 128 + signal
                }
                output.update { $0.exitStatus = status }
            } catch {
                output.update { state in
                    if state.started {
                        state.standardError += "\n\(error)"
                        state.exitStatus = state.exitStatus ?? -1
                    } else {
                        state.launchError = "\(error)"
                    }
                }
            }
        }
    }

    deinit {
        if output.value.exitStatus == nil { commands.yield(.kill) }
        commands.finish()
    }

    private static func collectLines(_ sequence: SubprocessOutputSequence, into output: Watched<Output>) async {
        var pending: [UInt8] = []
        do {
            for try await buffer in sequence {
                buffer.withUnsafeBytes { pending.append(contentsOf: $0) }
                var lines: [String] = []
                var start = 0
                while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: pending[start..<newline], as: UTF8.self))
                    start = newline + 1
                }
                pending.removeFirst(start)
                if !lines.isEmpty { output.update { $0.lines += lines } }
            }
        } catch {
            output.update { $0.standardError += "reading its output failed: \(error)\n" }
        }
    }

    private static func collectText(_ sequence: SubprocessOutputSequence) async -> String {
        var bytes: [UInt8] = []
        do {
            for try await buffer in sequence { buffer.withUnsafeBytes { bytes.append(contentsOf: $0) } }
        } catch {
            return String(decoding: bytes, as: UTF8.self) + "\nreading its standard error failed: \(error)"
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes `text` to the child's standard input.
    public func write(_ text: String) { commands.yield(.write(Array(text.utf8))) }

    /// Closes the child's standard input: it reads end-of-file.
    public func closeInput() { commands.yield(.closeInput) }

    /// Kills the child with SIGKILL (a no-op if it already ended) and waits until it is gone.
    public func kill() async {
        if output.value.exitStatus == nil {
            output.update { $0.killed = true }
            commands.yield(.kill)
        }
        await output.wait(upTo: .seconds(30)) { $0.exitStatus != nil }
    }

    /// Waits until a printed line satisfies `condition` or the child ended; whether a line did.
    @discardableResult
    public func waitForLine(timeout: Duration = .seconds(60), _ condition: @escaping @Sendable (String) -> Bool) async -> Bool {
        await output.wait(upTo: timeout) { $0.lines.contains(where: condition) || $0.exitStatus != nil }
        return output.value.lines.contains(where: condition)
    }

    /// Waits for the child to end by itself; its lines. Throws if it failed or did not end in
    /// time (killing it then).
    public func finish(timeout: Duration = .seconds(120)) async throws -> [String] {
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
