internal import CProcessControl
import Foundation
import VaultCrypto
import VaultSync

/// What the `vault` process does before anything else: it stops the kernel from dumping its
/// memory, and takes the passphrases it may be given in its environment out of it.
///
/// - `prctl(PR_SET_DUMPABLE, 0)` and a core size limit of 0: a crash writes no core file
///   holding keys or tokens, no other process of the user can ptrace it, and its
///   `/proc/PID/mem` and `/proc/PID/environ` are root's.
/// - `VAULT_PASSPHRASE`, `VAULT_NEW_PASSPHRASE`, `VAULT_SLOT_PASSPHRASE`, `VAULT_TPM2_PIN` and
///   `VAULT_NEW_TPM2_PIN` are copied into guarded memory, their
///   values overwritten where the kernel put them (what `/proc/PID/environ` shows), and
///   the variables removed (`unsetenv`), so no program this process starts inherits them.
///
/// ```swift
/// ProcessHardening.apply()            // first line of main
/// let passphrase = ProcessHardening.passphrase(from: "VAULT_PASSPHRASE")
/// ```
enum ProcessHardening {
    /// The variables that hold a passphrase.
    static let passphraseVariables = ["VAULT_PASSPHRASE", "VAULT_NEW_PASSPHRASE", "VAULT_SLOT_PASSPHRASE", "VAULT_TPM2_PIN", "VAULT_NEW_TPM2_PIN"]

    /// The passphrases taken from the environment, by variable name (non-empty values only).
    private static let taken = Locked<[String: SecureBytes]>([:])

    /// Disables core dumps, then takes the passphrase variables. Returns what went wrong, for
    /// a warning (the command still runs).
    @discardableResult
    static func apply() -> [String] {
        var problems: [String] = []
        // tpm2-tss (loaded when a TPM slot is used) logs to standard error unless told otherwise;
        // its failures reach the user as messages instead. Set here, before any thread exists
        // (setenv is not safe beside readers of the environment); a TSS2_LOG given is kept.
        setenv("TSS2_LOG", "all+NONE", 0)
        if cv_disable_core_dumps() != 0 {
            problems.append("could not disable core dumps: \(String(cString: strerror(errno)))")
        }
        for name in passphraseVariables {
            do {
                try take(name)
            } catch {
                problems.append("could not move $\(name) into guarded memory: \(error)")
            }
        }
        return problems
    }

    /// A copy, in guarded memory, of the passphrase that was in `$name` when the process
    /// started; nil when the variable was unset or empty.
    static func passphrase(from name: String) throws -> SecureBytes? {
        guard let stored = taken.withLock({ $0[name] }) else { return nil }
        return try SecureBytes(count: stored.count) { copy in
            try stored.withUnsafeBytes { original in copy.copyMemory(from: original) }
        }
    }

    /// Moves `$name` into ``taken``: copied, overwritten in place, unset. The variable is
    /// removed even when the copy fails.
    private static func take(_ name: String) throws {
        guard let value = getenv(name) else { return }
        defer {
            cv_wipe(value, strlen(value))
            unsetenv(name)
        }
        let count = strlen(value)
        guard count > 0 else { return }
        let bytes = try SecureBytes(count: count) { buffer in
            buffer.copyMemory(from: UnsafeRawBufferPointer(start: value, count: count))
        }
        taken.withLock { $0[name] = bytes }
    }
}
