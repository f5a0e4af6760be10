import Foundation
import GRDB
import VaultCrypto

/// A failure of the vault, with enough context to act on and never a secret.
///
/// Match on ``code``; show ``description`` to a person. Bound SQL arguments, key
/// material, tokens and passphrases never appear in either.
///
/// ```swift
/// do {
///     let vault = try Vault.open(at: url, credential: .passphrase(pass))
/// } catch let error as VaultError where error.code == .wrongCredential {
///     print("Wrong passphrase for \(url.path)")
/// }
/// ```
public struct VaultError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The passphrase or key file does not unlock this vault.
        public static let wrongCredential = Code("wrongCredential")
        /// A key file or passphrase that cannot be used at all (wrong size, empty, unreadable, too permissive).
        public static let invalidCredential = Code("invalidCredential")
        /// The file is not a CredentialVault vault (empty, random bytes, another SQLite database).
        public static let notAVault = Code("notAVault")
        /// The file is a vault but is damaged (truncated, failed integrity, a sealed value that does not open).
        public static let damaged = Code("damaged")
        /// The vault's schema is newer than this build understands.
        public static let schemaTooNew = Code("schemaTooNew")
        /// A migration recorded in the vault no longer matches the build's migration of the same version.
        public static let migrationChecksumMismatch = Code("migrationChecksumMismatch")
        /// A migration failed; the vault stays at its previous version.
        public static let migrationFailed = Code("migrationFailed")
        /// The vault's location is unsafe (a directory other users can write, a file others can read).
        public static let unsafeLocation = Code("unsafeLocation")
        /// A vault already exists at the path given to `create`.
        public static let alreadyExists = Code("alreadyExists")
        /// No vault at the path given to `open`.
        public static let notFound = Code("notFound")
        /// The record asked for does not exist (an account id, a notification uuid…).
        public static let recordNotFound = Code("recordNotFound")
        /// A write was computed from an older generation of the record and was refused.
        public static let staleGeneration = Code("staleGeneration")
        /// The arguments are invalid (for example a key derivation cost below the floor).
        public static let invalidArgument = Code("invalidArgument")
        /// The vault was closed; its keys are gone.
        public static let closed = Code("closed")
        /// The vault's keys were replaced by another process (`rotate-key`, `passwd`): the keys
        /// this one holds no longer open it. Unlock (open) it again.
        public static let keyChanged = Code("keyChanged")
        /// The file system or SQLite failed (disk full, I/O error, permission denied).
        public static let storage = Code("storage")
        /// Another connection held the vault's lock past the busy timeout: try again.
        public static let busy = Code("busy")
        /// A key rotation was started and not finished: finish it before changing the credential.
        public static let keyRotationUnfinished = Code("keyRotationUnfinished")
    }

    public var code: Code
    /// A sentence for a person: what happened and, where there is one, what to do next.
    public var message: String
    /// The vault file concerned, when there is one.
    public var path: String?

    public init(_ code: Code, _ message: String, path: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
    }

    public var description: String { message }

    /// The keys this process holds were replaced by another process (``Code/keyChanged``).
    static func keyChanged(path: String?) -> VaultError {
        VaultError(.keyChanged, "the vault key was changed by another process (a key rotation or a new credential); unlock the vault again", path: path)
    }
}

extension VaultError {
    /// Wraps an error from GRDB or the file system without exposing bound arguments.
    static func storage(_ error: any Error, while action: String, path: String?) -> VaultError {
        if let vaultError = error as? VaultError { return vaultError }
        // Corruption met after opening (a damaged table page) is damage to the vault, not an
        // I/O failure: the remedy is a backup, not a retry.
        if let databaseError = error as? DatabaseError, databaseError.resultCode == .SQLITE_CORRUPT {
            return VaultError(
                .damaged, "\(action) failed: \(path ?? "the vault") is damaged (SQLite reports corruption); restore it from a backup",
                path: path)
        }
        if let databaseError = error as? DatabaseError,
            databaseError.resultCode == .SQLITE_BUSY || databaseError.resultCode == .SQLITE_LOCKED
        {
            return VaultError(
                .busy, "\(action) failed: \(path ?? "the vault") is busy (another process held its lock too long); try again",
                path: path)
        }
        // GRDB's DatabaseError description hides statement arguments unless
        // `publicStatementArguments` is set, which this module never does.
        return VaultError(.storage, "\(action) failed: \(error)", path: path)
    }

    static func sealed(_ error: CryptoError, table: String, column: String, row: String, path: String?) -> VaultError {
        VaultError(.damaged, "sealed value \(table).\(column) of row \(row) does not open (\(error.code)): the vault is damaged or was edited", path: path)
    }
}
