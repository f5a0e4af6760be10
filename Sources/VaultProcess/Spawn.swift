import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Starts child processes with `posix_spawn` instead of Foundation's `Process`.
///
/// `Process.run()` on Linux crashes the calling process now and then (SIGSEGV in a `memcpy`):
/// before spawning it lists `/proc/self/fd` and copies each directory entry's whole 256-byte
/// `d_name`, reading past glibc's buffer when an entry ends near an unmapped page
/// (swift-corelibs-foundation#5472, fixed upstream after Swift 6.3.1). The test suite starts
/// hundreds of `vault` processes from a process with many descriptors open, and crashed there
/// once in a full run. swift-subprocess does not go through `Process` either, but a running
/// child lives inside its closure, where `ChildProgram` must be an object a test holds; so
/// this is `posix_spawn` directly, with what `Process` did: the given descriptors as 0, 1 and 2,
/// every other descriptor closed in the child, a process group of its own, every signal
/// unblocked and at its default action.
///
/// `vault exec` starts its command the same way, staying in the terminal's process group (so
/// Ctrl-C and job control reach the command) and leaving ignored signals ignored (`nohup`).
public enum Spawn {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// How a child ended, as `Process` reports it: an exit code, or the signal that ended it.
    public struct Termination: Sendable, Equatable {
        public var status: Int32
        public var signaled: Bool

        public init(status: Int32, signaled: Bool) {
            self.status = status
            self.signaled = signaled
        }

        /// The exit code, or 128 + the signal (as a shell reports it).
        public var shellStatus: Int32 { signaled ? 128 + status : status }
    }

    /// Starts `executable ARGUMENTS` with `environment` (this process's when nil) and
    /// `input`, `output`, `error` as its standard descriptors; its pid.
    ///
    /// `ownProcessGroup`: the child leads a process group of its own (a test's child, killed
    /// with its group); false keeps it in this one (a command run for the user at a terminal).
    /// `defaultSignals`: every signal at its default action in the child; false keeps the
    /// ignored ones ignored, as a shell does (handlers are reset by exec either way), except
    /// `resetting`: signals this process ignores for its own reasons (SwiftNIO ignores SIGPIPE
    /// process-wide) that the child gets at their default action.
    public static func start(
        _ executable: URL, _ arguments: [String], environment: [String: String]?, input: Int32, output: Int32, error: Int32,
        ownProcessGroup: Bool = true, defaultSignals: Bool = true, resetting: [Int32] = []
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (source, target) in [(input, STDIN_FILENO), (output, STDOUT_FILENO), (error, STDERR_FILENO)] {
            guard posix_spawn_file_actions_adddup2(&actions, source, target) == 0 else {
                throw Failure(description: "posix_spawn_file_actions_adddup2 failed")
            }
        }
        guard closeFrom(3, &actions) == 0 else { throw Failure(description: "posix_spawn_file_actions_addclosefrom_np failed") }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // As `Process` does: every signal unblocked and at its default action in the child. A
        // test's task runs on a libdispatch worker thread, which blocks asynchronous signals, and
        // a spawned child inherits its spawner's mask: a child started there never saw SIGTERM
        // or SIGUSR2 (a shell's `trap` stayed silent).
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        var defaults = sigset_t()
        if defaultSignals {
            sigfillset(&defaults)
        } else {
            sigemptyset(&defaults)
            for signal in resetting { sigaddset(&defaults, signal) }
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = POSIX_SPAWN_SETSIGMASK
        if ownProcessGroup { flags |= POSIX_SPAWN_SETPGROUP }
        if defaultSignals || !resetting.isEmpty { flags |= POSIX_SPAWN_SETSIGDEF }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var argv: [UnsafeMutablePointer<CChar>?] = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let variables = environment ?? ProcessInfo.processInfo.environment
        var envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable.path, &actions, &attributes, &argv, &envp)
        guard status == 0 else {
            throw Failure(description: "cannot start \(executable.path): \(String(cString: strerror(status)))")
        }
        return pid
    }

    /// Waits for `pid` to end, on a thread of its own (never blocking the cooperative pool).
    public static func wait(_ pid: pid_t) async -> Termination {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: waitBlocking(pid)) }
        }
    }

    /// Waits for `pid` to end, blocking this thread.
    public static func waitBlocking(_ pid: pid_t) -> Termination {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno != EINTR { return Termination(status: -1, signaled: false) }
        }
        // WIFSIGNALED / WTERMSIG / WEXITSTATUS are macros Swift does not import.
        let signal = status & 0x7f
        if signal != 0 && signal != 0x7f { return Termination(status: signal, signaled: true) }
        return Termination(status: (status >> 8) & 0xff, signaled: false)
    }

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+), which Swift's Glibc module
    /// does not declare: looked up at run time.
    private static func closeFrom(_ descriptor: Int32, _ actions: inout posix_spawn_file_actions_t) -> Int32 {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return -1 }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, descriptor)
    }
}
