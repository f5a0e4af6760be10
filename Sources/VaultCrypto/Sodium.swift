internal import CSodium

/// The one place libsodium is initialised. `sodium_init` is thread-safe and idempotent;
/// a negative result means the library could not set itself up (no entropy source) and
/// nothing in this module may run.
enum Sodium {
    private static let initialised: Bool = sodium_init() >= 0

    static func ensureInitialised() throws(CryptoError) {
        guard initialised else {
            throw CryptoError(.unavailable, "libsodium failed to initialise (sodium_init)")
        }
    }
}
