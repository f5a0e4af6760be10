/// A failure inside VaultCrypto. Never carries key material, plaintext or passphrases:
/// only what went wrong and where.
public struct CryptoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// libsodium could not initialise or a primitive reported an internal failure.
        public static let unavailable = Code("unavailable")
        /// The sealed blob is not in a format this build understands (too short, unknown version).
        public static let malformedBlob = Code("malformedBlob")
        /// The blob names a key id other than the key it was opened with.
        public static let keyMismatch = Code("keyMismatch")
        /// Authentication failed: the blob was altered, moved to another place, or the key is wrong.
        public static let authenticationFailed = Code("authenticationFailed")
        /// Key derivation parameters are below the accepted floor, or out of libsodium's range.
        public static let weakParameters = Code("weakParameters")
        /// Key derivation failed (usually: not enough memory for the requested cost).
        public static let derivationFailed = Code("derivationFailed")
        /// Key material has the wrong length.
        public static let invalidKey = Code("invalidKey")
        /// The key was wiped (vault closed or locked) and can no longer be used.
        public static let keyWiped = Code("keyWiped")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
