import AgentWire
internal import CProcessControl
import Foundation
import VaultProcess
import VaultSync

#if canImport(Glibc)
    import Glibc
#endif

/// A pinentry program (`pinentry-curses`, `pinentry-tty`, `pinentry-gnome3`…) and how long a
/// prompt may stay unanswered: what a locked agent asks the passphrase through.
///
/// ```swift
/// let pinentry = Pinentry.find(named: nil, environment: ProcessInfo.processInfo.environment)
/// let conversation = try pinentry.get().start(on: terminal, environment: environment)
/// try await conversation.open()
/// try await conversation.describe(title: "CredentialVault", description: "Unlock /home/me/vault.db", prompt: "Passphrase:")
/// var passphrase = try await conversation.passphrase(error: nil)   // the bytes; zero them
/// await conversation.finish()
/// ```
///
/// The program is spoken to over the Assuan protocol on two pipes, as gpg-agent does: the
/// passphrase comes back on a pipe between the two processes, never through a socket, an
/// argument or an environment variable. Its environment is built here, not inherited: the
/// requester's terminal type, display, desktop bus and locale, and the agent's `PATH`, `HOME`
/// and runtime directory; nothing else of the agent's.
public struct Pinentry: Sendable {
    /// The program's absolute path.
    public var program: URL
    /// How long one prompt may stay unanswered (pinentry's own `SETTIMEOUT`, and a bound the
    /// agent enforces by ending the program a few seconds later).
    public var timeout: Duration

    public init(program: URL, timeout: Duration = Self.defaultTimeout) {
        self.program = program
        self.timeout = timeout
    }

    public static let defaultTimeout = Duration.seconds(120)

    /// What to install when none is found.
    public static let installHint =
        "install one (`apt install pinentry-curses` or `pinentry-tty` for a terminal, `pinentry-gnome3` for a desktop) or name one with $VAULT_PINENTRY"

    /// The program to use: `name` (`--pinentry`), else `$VAULT_PINENTRY`, else `pinentry` on
    /// `$PATH`; a name without a slash is searched on `$PATH`. Nil when prompting is turned off
    /// (`none`) or no program is installed (`missing` says what was looked for).
    public static func find(
        named name: String?, timeout: Duration = defaultTimeout, environment: [String: String]
    ) -> Result<Pinentry, Unavailable> {
        let given = name ?? environment["VAULT_PINENTRY"].flatMap { $0.isEmpty ? nil : $0 }
        if given == "none" { return .failure(.turnedOff) }
        let wanted = given ?? "pinentry"
        if wanted.contains("/") {
            let url = URL(fileURLWithPath: wanted).standardizedFileURL
            guard access(url.path, X_OK) == 0 else { return .failure(.missing(wanted)) }
            return .success(Pinentry(program: url, timeout: timeout))
        }
        for directory in (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where directory.hasPrefix("/") {
            let candidate = URL(fileURLWithPath: String(directory)).appending(path: wanted)
            if access(candidate.path, X_OK) == 0 { return .success(Pinentry(program: candidate, timeout: timeout)) }
        }
        return .failure(.missing(wanted))
    }

    /// Why there is no pinentry to ask through.
    public enum Unavailable: Error, Sendable, Equatable, CustomStringConvertible {
        /// `--pinentry none`: the agent never prompts.
        case turnedOff
        /// No such program.
        case missing(String)

        public var description: String {
            switch self {
            case .turnedOff: "the agent was started with `--pinentry none`"
            case .missing(let name): "no pinentry program (\(name)) is installed: \(Pinentry.installHint)"
            }
        }
    }

    /// Starts the program for a prompt on `terminal` (nothing read yet: ``PinentryConversation/open()``
    /// reads its greeting, under whatever bound the caller keeps). `environment` is the agent's
    /// (only `PATH`, `HOME`, `USER`, `LOGNAME` and `XDG_RUNTIME_DIR` are taken).
    public func start(on terminal: RequesterTerminal, environment: [String: String]) throws(PinentryFailure) -> PinentryConversation {
        try PinentryConversation(program: program, terminal: terminal, environment: environment, timeout: timeout)
    }

    /// `work` on a thread of its own: a prompt waits for a person, so it holds no thread of the
    /// cooperative pool nor of the vault's blocking-I/O pool.
    static func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }
}

/// Why a prompt gave no passphrase.
public enum PinentryFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The person chose Cancel (or closed the dialog).
    case cancelled
    /// Nothing was typed within the prompt's time.
    case timedOut
    /// The program could not be started, crashed, went away, or did not speak Assuan. The text
    /// never holds what the program sent beyond its error's description.
    case failed(String)

    public var description: String {
        switch self {
        case .cancelled: "the passphrase prompt was cancelled"
        case .timedOut: "no passphrase was typed in time"
        case .failed(let reason): "pinentry failed: \(reason)"
        }
    }
}

/// One running pinentry and its Assuan conversation: the options set at start, then a
/// description and any number of `GETPIN`s (each wrong passphrase answered with an error text
/// and asked again), then `BYE`.
///
/// Blocking reads happen on a thread of their own (``Pinentry/onOwnThread(_:)``); calls are
/// made one after another by one task. ``terminate()`` may be called from anywhere at any time
/// (a bound ran out): the program is killed and the read in progress sees the pipe's end.
public final class PinentryConversation: Sendable {
    /// The program's process id.
    public let pid: pid_t
    /// The agent's end of the socket pair (the program's standard input and output).
    private let channel: Int32
    private let terminal: RequesterTerminal
    private let programName: String
    private let timeout: Duration
    private let state = Locked(State())

    private struct State {
        /// Bytes read past the last line: room reserved once (a line longer than that is
        /// refused), so no copy of a passphrase is left behind by a reallocation.
        var pending: [UInt8] = {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(PinentryConversation.maximumLine + 1024)
            return bytes
        }()
        var terminated = false
        var ended = false
    }

    /// The longest line a pinentry may send (Assuan's limit is 1000 bytes).
    static let maximumLine = 4096
    /// The longest passphrase taken.
    static let maximumPassphrase = 4096

    init(program: URL, terminal: RequesterTerminal, environment: [String: String], timeout: Duration) throws(PinentryFailure) {
        self.timeout = timeout
        // One socket pair, the child's end as its standard input and output: writes to it use
        // MSG_NOSIGNAL, so a program that exits early cannot end the agent with SIGPIPE.
        var ends: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw .failed("cannot make a socket pair: \(String(cString: strerror(errno)))")
        }
        let null = Glibc.open("/dev/null", O_RDWR | O_CLOEXEC)
        defer {
            close(ends[1])
            if null >= 0 { close(null) }
        }
        var arguments: [String] = []
        if let tty = terminal.tty { arguments += ["--ttyname", tty] }
        if let type = terminal.termType { arguments += ["--ttytype", type] }
        if let display = terminal.display { arguments += ["--display", display] }
        do {
            pid = try Spawn.start(
                program, arguments, environment: Self.environment(for: terminal, agent: environment), input: ends[1], output: ends[1],
                error: null >= 0 ? null : ends[1])
        } catch {
            close(ends[0])
            throw .failed("cannot start \(program.path): \(error)")
        }
        channel = ends[0]
        self.terminal = terminal
        self.programName = program.lastPathComponent
    }

    /// Reads the greeting and sets the terminal options. Ends the program when it fails.
    public func open() async throws(PinentryFailure) {
        let result: Result<Void, PinentryFailure> = await Pinentry.onOwnThread { [self] in
            Result { () throws(PinentryFailure) in
                do throws(PinentryFailure) {
                    let greeting = try readLine()
                    guard greeting.starts(with: Array("OK".utf8)) else { throw PinentryFailure.failed("\(programName) does not speak Assuan") }
                    if let tty = terminal.tty { try command("OPTION ttyname=\(tty)") }
                    if let type = terminal.termType { try command("OPTION ttytype=\(type)") }
                    if let display = terminal.display { try command("OPTION display=\(display)") }
                    // Older pinentries refuse options they do not know: not a reason to fail.
                    if let locale = terminal.locale { try? command("OPTION lc-ctype=\(locale)") }
                } catch {
                    finishNow()
                    throw error
                }
            }
        }
        try result.get()
    }

    /// The child's environment: the requester's places, a few of the agent's variables.
    static func environment(for terminal: RequesterTerminal, agent: [String: String]) -> [String: String] {
        var environment: [String: String] = [:]
        for name in ["PATH", "HOME", "USER", "LOGNAME", "XDG_RUNTIME_DIR"] { environment[name] = agent[name] }
        environment["TERM"] = terminal.termType
        environment["DISPLAY"] = terminal.display
        environment["WAYLAND_DISPLAY"] = terminal.waylandDisplay
        environment["DBUS_SESSION_BUS_ADDRESS"] = terminal.dbusAddress
        environment["LANG"] = terminal.locale
        environment["GPG_TTY"] = terminal.tty
        return environment
    }

    /// Sets the window's title, the text above the field, the field's label and the time limit.
    public func describe(title: String, description: String, prompt: String) async throws(PinentryFailure) {
        let seconds = max(1, timeout.components.seconds)
        let result: Result<Void, PinentryFailure> = await Pinentry.onOwnThread { [self] in
            Result { () throws(PinentryFailure) in
                try command("SETTITLE \(Self.escaped(title))")
                try command("SETDESC \(Self.escaped(description))")
                try command("SETPROMPT \(Self.escaped(prompt))")
                try command("SETOK Unlock")
                try command("SETTIMEOUT \(seconds)")
            }
        }
        try result.get()
    }

    /// Asks for the passphrase (`GETPIN`), showing `error` first when given (the previous one was
    /// wrong). The caller zeroes the bytes it gets.
    public func passphrase(error: String?) async throws(PinentryFailure) -> [UInt8] {
        let result: Result<[UInt8], PinentryFailure> = await Pinentry.onOwnThread { [self] in
            Result { () throws(PinentryFailure) in
                if let error { try command("SETERROR \(Self.escaped(error))") }
                return try getPin()
            }
        }
        return try result.get()
    }

    /// Says goodbye and waits for the program to end (killed if it does not within a second).
    public func finish() async {
        await Pinentry.onOwnThread { [self] in finishNow() }
    }

    private func finishNow() {
        let first = state.withLock { state -> Bool in
            defer { state.ended = true }
            return !state.ended
        }
        guard first else { return }
        WireProtocol.writeAll(channel, Array("BYE\n".utf8))
        shutdown(channel, Int32(SHUT_WR))
        // It ends on BYE or on its input's end; a hung one is killed.
        if !Self.waitBriefly(pid) {
            kill(-pid, SIGKILL)
            _ = Spawn.waitBlocking(pid)
        }
        close(channel)
    }

    /// Ends the program now (a bound ran out), with anything it started (it leads a process
    /// group of its own): the read in progress ends as ``PinentryFailure/timedOut``.
    public func terminate() {
        // Under the lock: once ``finish()`` has marked the conversation ended (and may have
        // reaped the process, freeing its pid for another), nothing is killed.
        state.withLock { state in
            state.terminated = true
            if !state.ended { kill(-pid, SIGKILL) }
        }
    }

    // MARK: - Assuan

    private func getPin() throws(PinentryFailure) -> [UInt8] {
        try sendLine("GETPIN")
        var pin: [UInt8] = []
        // Room for the longest passphrase taken and one line's worth: never reallocated.
        pin.reserveCapacity(Self.maximumPassphrase + Self.maximumLine)
        do throws(PinentryFailure) {
            while true {
                var line = try readLine()
                defer { cv_wipe(&line, line.count) }
                if line.starts(with: Array("D ".utf8)) {
                    guard line.count - 2 <= Self.maximumPassphrase - pin.count, Self.appendDecoded(line[2...], to: &pin) else {
                        throw .failed("the passphrase it sent is not valid Assuan data or is too long")
                    }
                } else if line.starts(with: Array("OK".utf8)) {
                    return pin
                } else {
                    try answerOther(line)  // a status line or comment is read past; data kept
                }
            }
        } catch {
            cv_wipe(&pin, pin.count)
            throw error
        }
    }

    /// Sends `text` and reads up to its `OK`.
    private func command(_ text: String) throws(PinentryFailure) {
        try sendLine(text)
        while true {
            let line = try readLine()
            if line.starts(with: Array("OK".utf8)) { return }
            if line.starts(with: Array("D ".utf8)) { continue }
            try answerOther(line)
        }
    }

    /// Status and comment lines are read past, an inquiry is declined, an error thrown.
    private func answerOther(_ line: [UInt8]) throws(PinentryFailure) {
        if line.starts(with: Array("S ".utf8)) || line.first == UInt8(ascii: "#") || line == Array("S".utf8) { return }
        if line.starts(with: Array("INQUIRE".utf8)) {
            try sendLine("CAN")
            return
        }
        if line.starts(with: Array("ERR".utf8)) { throw Self.failure(line) }
        throw .failed("it answered something that is not Assuan")
    }

    /// An `ERR code description` line as a failure: libgpg-error's codes for cancel and timeout
    /// (the low 16 bits; the high bits name the source), else the description.
    static func failure(_ line: [UInt8]) -> PinentryFailure {
        let text = String(decoding: line, as: UTF8.self)
        let parts = text.split(separator: " ", maxSplits: 2)
        let code = parts.count > 1 ? UInt32(parts[1]).map { $0 & 0xFFFF } : nil
        switch code {
        case 99, 198: return .cancelled  // GPG_ERR_CANCELED, GPG_ERR_FULLY_CANCELED
        case 62: return .timedOut  // GPG_ERR_TIMEOUT
        default:
            let reason = parts.count > 2 ? String(parts[2].prefix(120)) : "error \(code.map(String.init) ?? "?")"
            return .failed(String(reason.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init)))
        }
    }

    private func sendLine(_ text: String) throws(PinentryFailure) {
        guard WireProtocol.writeAll(channel, Array((text + "\n").utf8)) else { throw ended() }
    }

    /// One line from the program, without its newline.
    private func readLine() throws(PinentryFailure) -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 1024)
        defer { cv_wipe(&chunk, chunk.count) }
        while true {
            let line = state.withLock { state -> [UInt8]? in
                guard let newline = state.pending.firstIndex(of: 0x0A) else { return nil }
                let line = Array(state.pending[..<newline])
                // Shifted down in place and the vacated bytes zeroed: the buffer never moves.
                let (start, count) = (newline + 1, state.pending.count)
                for index in 0..<(count - start) { state.pending[index] = state.pending[start + index] }
                for index in (count - start)..<count { state.pending[index] = 0 }
                state.pending.removeLast(start)
                return line
            }
            if let line { return line }
            let tooLong = state.withLock { $0.pending.count >= Self.maximumLine }
            guard !tooLong else { throw .failed("it sent a line longer than \(Self.maximumLine) bytes") }
            let count = chunk.withUnsafeMutableBytes { read(channel, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw ended() }
            state.withLock { $0.pending.append(contentsOf: chunk[0..<count]) }
        }
    }

    /// Why the program's pipe ended: killed by a bound, or it went away by itself.
    private func ended() -> PinentryFailure {
        if state.withLock({ $0.terminated }) { return .timedOut }
        return .failed("it ended without an answer (crashed, or its terminal went away)")
    }

    /// Assuan's escaping of a command's argument: `%`, CR and LF as `%XX`.
    static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "%": out += "%25"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Decodes Assuan data (`%XX` escapes) onto `out`; false when an escape is malformed.
    static func appendDecoded(_ data: ArraySlice<UInt8>, to out: inout [UInt8]) -> Bool {
        var index = data.startIndex
        while index < data.endIndex {
            let byte = data[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < data.endIndex, let high = hexValue(data[index + 1]), let low = hexValue(data[index + 2]) else { return false }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(byte)
                index += 1
            }
        }
        return true
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Waits up to a second for `pid` to end; false if it still runs.
    private static func waitBriefly(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        for _ in 0..<100 {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid || (result < 0 && errno == ECHILD) { return true }
            usleep(10_000)
        }
        return false
    }
}
