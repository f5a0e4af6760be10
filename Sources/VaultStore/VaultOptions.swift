import Foundation
import Logging
import VaultCrypto

/// How a vault is opened or created.
///
/// ```swift
/// var options = VaultOptions()
/// options.logger = Logger(label: "mytool.vault")
/// options.kdf = .moderate
/// ```
public struct VaultOptions: Sendable {
    /// Where the vault logs. Nothing secret is ever logged.
    public var logger: Logger
    /// The source of times written to disk.
    public var clock: WallClock
    /// How long a write waits for another process's write lock before failing.
    public var busyTimeout: Duration
    /// The Argon2id cost for a new passphrase (``Vault/create(at:credential:options:)`` and
    /// ``MaintenanceStore/changeCredential(to:cost:slotKeys:)``). Refused below OWASP's floor.
    public var kdf: KDFParameters
    /// Whether to copy an older vault next to itself before migrating it (on by default).
    /// A vault without accounts holds nothing to lose and is migrated without a copy.
    public var backupBeforeMigrating: Bool

    /// The schema steps to apply; tests replace them to exercise migration failures.
    var migrations: [Migration] = Migration.embedded

    public init(
        logger: Logger = Logger(label: "credentialvault.store"),
        clock: WallClock = .system,
        busyTimeout: Duration = .seconds(10),
        kdf: KDFParameters = .interactive,
        backupBeforeMigrating: Bool = true
    ) {
        self.logger = logger
        self.clock = clock
        self.busyTimeout = busyTimeout
        self.kdf = kdf
        self.backupBeforeMigrating = backupBeforeMigrating
    }
}
