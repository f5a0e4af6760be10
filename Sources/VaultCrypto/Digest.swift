internal import CSodium

/// Non-secret hashing helpers (checksums, not passwords).
public enum Digest {
    /// SHA-256 of `bytes` (`crypto_hash_sha256`).
    public static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let input = Array(bytes)
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        _ = crypto_hash_sha256(&out, input, UInt64(input.count))
        return out
    }

    /// Lowercase hex of `bytes`.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Non-secret random values (ids, salts).
public enum Random {
    /// `count` bytes from libsodium's CSPRNG.
    public static func bytes(_ count: Int) throws -> [UInt8] {
        try Sodium.ensureInitialised()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { if let base = $0.baseAddress { randombytes_buf(base, $0.count) } }
        return out
    }

    /// A uniformly random integer in `0..<upperBound` (`randombytes_uniform`).
    public static func uniform(_ upperBound: UInt32) throws -> UInt32 {
        try Sodium.ensureInitialised()
        return randombytes_uniform(upperBound)
    }
}

/// Comparison of values an attacker may probe byte by byte (a `state`, a `nonce`).
public enum ConstantTime {
    /// Whether `lhs` and `rhs` are equal, compared with `sodium_memcmp` (time depends only on
    /// the length, which is not secret here).
    public static func equals(_ lhs: String, _ rhs: String) -> Bool {
        let a = Array(lhs.utf8)
        let b = Array(rhs.utf8)
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return sodium_memcmp(a, b, a.count) == 0
    }

    /// The same for bytes (two copies of a key), without making copies of them.
    public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard !lhs.isEmpty else { return true }
        return sodium_memcmp(lhs, rhs, lhs.count) == 0
    }

    /// The same for two keys in guarded memory.
    public static func equals(_ lhs: SecureBytes, _ rhs: SecureBytes) throws -> Bool {
        guard lhs.count == rhs.count else { return false }
        return try lhs.withUnsafeBytes { a in
            try rhs.withUnsafeBytes { b in
                guard let x = a.baseAddress, let y = b.baseAddress else { return a.count == 0 }
                return sodium_memcmp(x, y, a.count) == 0
            }
        }
    }
}
