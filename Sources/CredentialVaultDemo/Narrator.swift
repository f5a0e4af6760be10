import Foundation

/// Prints the demo's story in plain words; draws a live countdown line on a terminal and
/// plain lines when piped.
struct Narrator: Sendable {
    let isTerminal = isatty(STDOUT_FILENO) == 1

    func chapter(_ title: String) {
        print("\n== \(title)")
    }

    func say(_ line: String) {
        print("   \(line)")
    }

    /// Rewrites one line in place on a terminal; prints each update on its own line when piped.
    func countdown(_ line: String) {
        if isTerminal {
            FileHandle.standardOutput.write(Data("\r\u{1B}[2K   \(line)".utf8))
        } else {
            print("   \(line)")
        }
    }

    func endCountdown() {
        if isTerminal { print("") }
    }

    /// A short, non-reversible fingerprint to show which token is which without printing it.
    static func fingerprint(_ secret: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in secret.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16).suffix(8).uppercased()
    }
}
