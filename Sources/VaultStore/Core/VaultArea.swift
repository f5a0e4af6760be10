import Foundation
import GRDB
import Logging
import VaultCrypto

/// One area of the vault (accounts, tokens, sessions…): a store that reads and writes through
/// the shared ``VaultCore``.
///
/// The members below only name the core's: a store's queries read `read(…)`, `integrity`,
/// `seal(…)` as if they were its own, and every one of them still runs through the core's one
/// read path and one write path.
protocol VaultArea: Sendable {
    var core: VaultCore { get }
}

extension VaultArea {
    var path: String { core.path }
    var pool: DatabasePool { core.pool }
    var keyring: Keyring { core.keyring }
    var logger: Logger { core.logger }
    var clock: WallClock { core.clock }
    var integrity: RowIntegrity { core.integrity }
    /// Whether the sealing keys are out of memory (the vault is locked or closed).
    var isLocked: Bool { keyring.isWiped }

    func withOpenPool<T>(_ body: (DatabasePool) throws -> T) throws -> T { try core.withOpenPool(body) }
    func read<T>(_ action: String, _ body: (Database) throws -> T) throws -> T { try core.read(action, body) }
    func write<T>(_ action: String, _ body: (Database) throws -> T) throws -> T { try core.write(action, body) }
}
