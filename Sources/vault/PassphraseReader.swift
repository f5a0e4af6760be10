import Foundation
import VaultCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a passphrase from the controlling terminal with echo turned off, like
/// `readpassphrase(3)`: the prompt goes to `/dev/tty` (not standard output), and the
/// terminal's settings come back even when the read is interrupted by a signal.
///
/// ```swift
/// guard let reader = PassphraseReader() else { /* no terminal: use a file or $VAULT_PASSPHRASE */ }
/// var bytes = try reader.read(prompt: "Passphrase: ")
/// ```
final class PassphraseReader {
    /// The longest passphrase read from the terminal, in bytes.
    static let capacity = 4096
    private let fd: Int32

    /// Nil when the process has no controlling terminal (cron, CI, a pipe from another program).
    init?() {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
    }

    deinit { close(fd) }

    /// One line from the terminal, without its newline. The caller zeroes the bytes when done.
    func read(prompt: String) throws -> [UInt8] {
        write(prompt)
        var original = termios()
        guard tcgetattr(fd, &original) == 0 else {
            throw CommandFailure(.usage, "cannot turn off echo on the terminal; use --passphrase-file or $VAULT_PASSPHRASE")
        }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO | ECHONL)
        InterruptedRead.protect(fd: fd, original: original)
        tcsetattr(fd, TCSAFLUSH, &silent)
        defer {
            tcsetattr(fd, TCSAFLUSH, &original)
            InterruptedRead.release()
            write("\n")
        }
        // Room for any passphrase a person types, so the array never grows: growing would leave
        // the bytes read so far in freed storage no one zeroes.
        var line: [UInt8] = []
        line.reserveCapacity(Self.capacity)
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(fd, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == 0x0A { break }
            guard line.count < Self.capacity else {
                SecureBytes.zero(&line)
                byte = 0
                throw CommandFailure(.usage, "the passphrase is longer than \(Self.capacity) bytes; use --passphrase-file")
            }
            line.append(byte)
        }
        if line.last == 0x0D { line.removeLast() }
        byte = 0
        return line
    }

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }
}

/// Puts the terminal back if SIGINT, SIGTERM or SIGHUP arrives while echo is off, then lets
/// the signal do what it would have done.
private enum InterruptedRead {
    static let signals = [SIGINT, SIGTERM, SIGHUP]

    static func protect(fd: Int32, original: termios) {
        savedFD = fd
        savedState = original
        for signal in signals { Glibc.signal(signal, restoreAndReraise) }
    }

    static func release() {
        for signal in signals { Glibc.signal(signal, SIG_DFL) }
        savedFD = -1
    }
}

// Read only from the signal handler, written only while no handler is installed.
private nonisolated(unsafe) var savedFD: Int32 = -1
private nonisolated(unsafe) var savedState = termios()

private func restoreAndReraise(_ signal: Int32) {
    if savedFD >= 0 { tcsetattr(savedFD, TCSANOW, &savedState) }
    Glibc.signal(signal, SIG_DFL)
    raise(signal)
}
