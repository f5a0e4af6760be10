import Foundation
import VaultTestSupport

/// Starts a `SessionProbe` child running one of the reliability operations
/// (Tests/SessionProbe/ReliabilityOperations.swift), which a test may kill with SIGKILL at any moment.
///
/// ```swift
/// let child = try stressChild(vault: url, keyFile: key, "rotate-loop", "1000", account.rawValue)
/// _ = await child.waitForLine { $0.hasPrefix("committed") }
/// await child.kill()
/// let lines = child.output.value.lines
/// ```
func stressChild(vault: URL, keyFile: URL, _ operation: String, _ arguments: String...) throws -> ChildProgram {
    try ChildProgram(BuiltProgram.url(named: "SessionProbe"), [vault.path, keyFile.path, operation] + arguments)
}

/// A random number of milliseconds in `range`, as a Duration.
func randomDelay(_ range: ClosedRange<Int>) -> Duration {
    .milliseconds(Int.random(in: range))
}
