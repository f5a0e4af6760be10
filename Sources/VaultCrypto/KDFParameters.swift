internal import CSodium

/// The cost of deriving a key-encryption key from a passphrase with Argon2id
/// (`crypto_pwhash`, algorithm pinned to `crypto_pwhash_ALG_ARGON2ID13`).
///
/// ```swift
/// let cost = KDFParameters.interactive          // libsodium's INTERACTIVE level, the default
/// try KDFParameters(opsLimit: 3, memLimitBytes: 256 << 20).validate()
/// ```
public struct KDFParameters: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Argon2id passes (`opslimit`).
    public var opsLimit: UInt64
    /// Argon2id memory in bytes (`memlimit`).
    public var memLimitBytes: UInt64

    public init(opsLimit: UInt64, memLimitBytes: UInt64) {
        self.opsLimit = opsLimit
        self.memLimitBytes = memLimitBytes
    }

    /// libsodium's INTERACTIVE level (2 passes, 64 MiB). The default.
    public static var interactive: KDFParameters {
        KDFParameters(
            opsLimit: UInt64(crypto_pwhash_argon2id_opslimit_interactive()),
            memLimitBytes: UInt64(crypto_pwhash_argon2id_memlimit_interactive()))
    }

    /// libsodium's MODERATE level (3 passes, 256 MiB).
    public static var moderate: KDFParameters {
        KDFParameters(
            opsLimit: UInt64(crypto_pwhash_argon2id_opslimit_moderate()),
            memLimitBytes: UInt64(crypto_pwhash_argon2id_memlimit_moderate()))
    }

    /// libsodium's SENSITIVE level (4 passes, 1 GiB).
    public static var sensitive: KDFParameters {
        KDFParameters(
            opsLimit: UInt64(crypto_pwhash_argon2id_opslimit_sensitive()),
            memLimitBytes: UInt64(crypto_pwhash_argon2id_memlimit_sensitive()))
    }

    /// OWASP's minimum for Argon2id: 19 MiB of memory and 2 passes. New vaults below it are refused.
    public static let owaspFloor = KDFParameters(opsLimit: 2, memLimitBytes: 19 * 1024 * 1024)

    /// Throws ``CryptoError/Code/weakParameters`` when the cost is below ``owaspFloor``
    /// or outside what libsodium accepts.
    public func validate() throws(CryptoError) {
        let floor = Self.owaspFloor
        guard opsLimit >= floor.opsLimit, memLimitBytes >= floor.memLimitBytes else {
            throw CryptoError(.weakParameters, "key derivation cost \(self) is below the accepted floor \(floor)")
        }
        guard opsLimit <= UInt64(crypto_pwhash_argon2id_opslimit_max()),
            memLimitBytes <= UInt64(crypto_pwhash_argon2id_memlimit_max())
        else {
            throw CryptoError(.weakParameters, "key derivation cost \(self) is above libsodium's maximum")
        }
    }

    public var description: String {
        "Argon2id(ops: \(opsLimit), memory: \(memLimitBytes / (1024 * 1024)) MiB)"
    }
}
