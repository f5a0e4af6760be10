internal import CSodium
import VaultSync

/// A fixed-size buffer of secret bytes in libsodium-guarded memory.
///
/// The bytes live in a `sodium_malloc` allocation: guard pages on both sides, locked
/// into RAM (`mlock`) where the system allows, and overwritten with zeroes by
/// `sodium_free` when ``wipe()`` is called or the last reference goes away. Reading
/// after `wipe()` throws ``CryptoError/Code/keyWiped`` rather than returning zeroes.
///
/// ```swift
/// let key = try SecureBytes.random(count: 32)
/// try key.withUnsafeBytes { bytes in /* use bytes */ }
/// key.wipe()
/// ```
public final class SecureBytes: Sendable {
    /// The number of secret bytes (may be 0, for example an empty passphrase).
    public let count: Int
    /// The allocation, or nil once wiped. The pointer is only dereferenced while the
    /// mutex is held, so a concurrent `wipe()` can never free memory that is in use.
    private let storage: Locked<Allocation?>

    private struct Allocation: ~Copyable {
        // Owned only by this value and freed exactly once: in `free()` or in deinit.
        nonisolated(unsafe) let pointer: UnsafeMutableRawPointer

        consuming func free() {
            sodium_free(pointer)
            discard self
        }

        deinit { sodium_free(pointer) }
    }

    /// Allocates `count` guarded bytes and lets `initialise` fill them.
    public init(count: Int, initialise: (UnsafeMutableRawBufferPointer) throws -> Void) throws {
        try Sodium.ensureInitialised()
        guard count >= 0, let pointer = sodium_malloc(max(count, 1)) else {
            throw CryptoError(.unavailable, "sodium_malloc failed to allocate \(count) guarded bytes")
        }
        do {
            try initialise(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            sodium_free(pointer)
            throw error
        }
        self.count = count
        self.storage = Locked(Allocation(pointer: pointer))
    }

    /// Copies `bytes` into guarded memory, straight from the collection (no intermediate copy
    /// in ordinary memory). The caller remains responsible for its own copy.
    public convenience init(copying bytes: some Collection<UInt8>) throws {
        let count = bytes.count
        try self.init(count: count) { buffer in
            var index = 0
            for byte in bytes.prefix(count) {
                buffer[index] = byte
                index += 1
            }
        }
    }

    /// Zeroes an ordinary array that held secret bytes (a passphrase read from a file, say)
    /// with `sodium_memzero`, which the optimiser cannot drop as a dead store. Its count stays.
    ///
    /// ```swift
    /// var bytes = try readPassphraseFile(path)
    /// defer { SecureBytes.zero(&bytes) }
    /// ```
    public static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
        }
    }

    /// Zeroes memory that held secret bytes (a `Data`'s, say) with `sodium_memzero`.
    public static func zero(_ buffer: UnsafeMutableRawBufferPointer) {
        if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
    }

    /// `count` bytes from libsodium's CSPRNG.
    public static func random(count: Int) throws -> SecureBytes {
        try SecureBytes(count: count) { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
    }

    /// Runs `body` with read access to the bytes. Throws if the bytes were wiped.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let count = self.count
        return try storage.withLock { allocation in
            switch allocation {
            case .none:
                throw CryptoError(.keyWiped, "key material was wiped (vault closed or locked)")
            case .some(let live):
                return try body(UnsafeRawBufferPointer(start: live.pointer, count: count))
            }
        }
    }

    /// Whether ``wipe()`` has been called.
    public var isWiped: Bool {
        storage.withLock { allocation in
            switch allocation {
            case .none: true
            case .some: false
            }
        }
    }

    /// Zeroes and frees the bytes now. Idempotent; later reads throw.
    public func wipe() {
        storage.withLock { allocation in
            allocation.take()?.free()
        }
    }

    /// Whether the bytes equal `other`, compared in constant time (`sodium_memcmp`). `other`
    /// is copied into guarded memory for the comparison, never into an ordinary array.
    public func constantTimeEquals(_ other: some Collection<UInt8>) throws -> Bool {
        let theirs = try SecureBytes(copying: other)
        defer { theirs.wipe() }
        return try withUnsafeBytes { mine in
            guard mine.count == theirs.count else { return false }
            guard let mineBase = mine.baseAddress else { return true }
            return try theirs.withUnsafeBytes { theirs in
                guard let theirBase = theirs.baseAddress else { return false }
                return sodium_memcmp(mineBase, theirBase, mine.count) == 0
            }
        }
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `SecureBytes(32 bytes)` (or `wiped`): never the bytes.
    public var description: String { isWiped ? "SecureBytes(wiped)" : "SecureBytes(\(count) bytes)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror without children, so `dump` shows neither the bytes nor where they live.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
