import Foundation
import Testing
import VaultProcess
import VaultTestSupport

/// The test suite's own way of starting child processes (`Spawn`, used by every command-line
/// test instead of Foundation's `Process`): a child sees only its three standard descriptors,
/// and its end is reported as `Process` reported it.
@Suite struct SpawnTests {
    @Test("a child inherits no descriptor but standard input, output and error")
    func onlyStandardDescriptors() async throws {
        let directory = try TemporaryDirectory()
        // A descriptor this process holds open while the child starts, without close-on-exec
        // (`dup` never sets it): it must not reach the child all the same.
        let file = try FileHandle(forWritingTo: directory.file("held").creating())
        defer { try? file.close() }
        let held = dup(file.fileDescriptor)
        defer { close(held) }
        #expect(held > 2 && fcntl(held, F_GETFD) & FD_CLOEXEC == 0)
        let output = directory.file("fds")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        let pid = try Spawn.start(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "ls /proc/$$/fd"], environment: [:], input: STDIN_FILENO,
            output: handle.fileDescriptor, error: STDERR_FILENO)
        #expect(await Spawn.wait(pid) == Spawn.Termination(status: 0, signaled: false))
        try handle.close()
        let listed = String(decoding: FileProbe.bytes(output), as: UTF8.self).split(whereSeparator: \.isWhitespace).map(String.init)
        #expect(Set(listed) == ["0", "1", "2"], "the shell's own descriptors, nothing of the parent's (it held \(held))")
    }

    @Test("an exit code and a signal are reported as Process reported them")
    func termination() async throws {
        let exited = try Spawn.start(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "exit 3"], environment: [:], input: STDIN_FILENO, output: STDOUT_FILENO,
            error: STDERR_FILENO)
        #expect(await Spawn.wait(exited) == Spawn.Termination(status: 3, signaled: false))
        let killed = try Spawn.start(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "kill -9 $$"], environment: [:], input: STDIN_FILENO, output: STDOUT_FILENO,
            error: STDERR_FILENO)
        let termination = await Spawn.wait(killed)
        #expect(termination == Spawn.Termination(status: 9, signaled: true))
        #expect(termination.shellStatus == 137)
    }

    @Test("a missing executable is an error, not a child")
    func missingExecutable() throws {
        #expect(throws: Spawn.Failure.self) {
            try Spawn.start(
                URL(fileURLWithPath: "/nonexistent/program"), [], environment: [:], input: STDIN_FILENO, output: STDOUT_FILENO,
                error: STDERR_FILENO)
        }
    }
}

extension URL {
    fileprivate func creating() -> URL {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return self
    }
}
