import Foundation
import VaultCrypto
import VaultTestSupport

struct ProbeError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A running `SessionProbe` child (see Tests/SessionProbe/main.swift) in the session tests'
/// protocol: it opens the vault, prints `ready`, waits for ``go()``, runs its operation and
/// prints one line per result.
///
/// ```swift
/// let probe = try h.probe("tokens", "50")
/// _ = await probe.waitUntilReady()
/// probe.go()
/// let lines = try await probe.results()
/// ```
extension ChildProgram {
    /// Starts SessionProbe on `vault` at wall-clock time `now`.
    static func sessionProbe(vault: URL, keyFile: URL, operation: String, argument: String, now: Date) throws -> ChildProgram {
        try ChildProgram(
            BuiltProgram.url(named: "SessionProbe"),
            [
                vault.path, keyFile.path, operation, argument,
                "--now", "\(Int64((now.timeIntervalSince1970 * 1000).rounded()))",
            ])
    }

    /// Waits for the child's `ready` line; false if it exited or did not get there in time.
    func waitUntilReady(timeout: Duration = TestTimeScale.scaled(.seconds(60))) async -> Bool {
        await waitForLine(timeout: timeout) { $0 == "ready" }
    }

    /// Lets the child run its operation.
    func go() {
        write("go\n")
        closeInput()
    }

    /// The result lines once the child exited (without `ready`).
    func results(timeout: Duration = TestTimeScale.scaled(.seconds(60))) async throws -> [String] {
        try await finish(timeout: timeout).filter { $0 != "ready" }
    }
}

/// Lowercase hex SHA-256 of a token, as the probe prints it.
func digest(_ token: String) -> String {
    Digest.hex(Digest.sha256(Array(token.utf8)))
}
