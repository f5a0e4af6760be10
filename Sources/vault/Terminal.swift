import Foundation
import VaultProcess

#if canImport(Glibc)
    import Glibc
#endif

/// Standard output and error, and whether they are terminals.
enum Terminal {
    static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
    static var standardInputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// `text` with control characters (terminal escape sequences among them) shown as `\u{…}`,
    /// for values the vault did not choose: a server's words, a subject, a label.
    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Writes what `print` buffered (a follower's lines reach a pipe as they come).
    static func flushOutput() {
        fflush(nil)
    }

    /// Whether a graphical session is there to open a browser in.
    static var hasDisplay: Bool {
        let environment = ProcessInfo.processInfo.environment
        return !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
    }

    /// Starts `xdg-open URL` and returns at once: false when it could not be started. Its end
    /// is waited for on a thread of its own; a failure is told on standard error then. Never
    /// awaited by the sign-in: a launcher may run as long as the browser it starts (some do),
    /// and the browser's redirect must be answered meanwhile.
    static func launchBrowser(_ url: URL) -> Bool {
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { return false }
        defer { close(null) }
        let pid: pid_t
        do {
            pid = try Spawn.start(
                URL(fileURLWithPath: "/usr/bin/env"), ["xdg-open", url.absoluteString], environment: nil,
                input: null, output: null, error: null)
        } catch {
            return false
        }
        Task.detached {
            let ended = await Spawn.wait(pid)
            if ended.shellStatus != 0 {
                printError("vault: the browser could not be opened (xdg-open exited \(ended.shellStatus)); open the URL above")
            }
        }
        return true
    }

    static func printError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Asks a yes/no question on the terminal; false when there is none or the answer is not yes.
    static func confirm(_ question: String) -> Bool {
        guard isatty(STDIN_FILENO) == 1 else { return false }
        FileHandle.standardError.write(Data("\(question) [y/N] ".utf8))
        guard let answer = readLine() else { return false }
        return ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased())
    }
}

/// A progress bar on standard error, drawn only when standard error is a terminal and
/// redrawn in place with `\r`; silent when piped or redirected.
///
/// ```swift
/// let bar = ProgressBar("Verifying")
/// let report = try vault.verify { bar.update($0.completed, of: $0.total) }
/// bar.finish()
/// ```
final class ProgressBar {
    private let label: String
    private let enabled: Bool
    private var lastDrawn = -1
    private var drewAnything = false

    init(_ label: String, enabled: Bool = Terminal.standardErrorIsTerminal) {
        self.label = label
        self.enabled = enabled
    }

    func update(_ completed: Int, of total: Int) {
        guard enabled, total > 0 else { return }
        let percent = min(100, max(0, completed * 100 / total))
        guard percent != lastDrawn else { return }
        lastDrawn = percent
        drewAnything = true
        let width = 30
        let filled = width * percent / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(percent)%".utf8))
    }

    /// Clears the line so what follows starts at column 0.
    func finish() {
        guard enabled, drewAnything else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}
