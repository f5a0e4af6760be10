import Foundation
import VaultCrypto

/// What unlocks a vault: a passphrase (stretched with Argon2id) or a 32-byte key, read from a key
/// file or handed over in memory by a keeper (a systemd credential, say).
///
/// ```swift
/// let byPassphrase = try VaultCredential.passphrase("correct horse battery staple")
/// let byKeyFile = VaultCredential.keyFile(URL(fileURLWithPath: "/etc/mytool/vault.key"))
/// ```
public enum VaultCredential: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Passphrase bytes, already in guarded memory. Any bytes are accepted (UTF-8 or not).
    case passphraseBytes(SecureBytes)
    /// A file holding exactly 32 random bytes, readable only by its owner.
    case keyFile(URL)
    /// A key file's 32 bytes, already in guarded memory (from a keeper; never written to a file
    /// by the vault). Opens what the key file with those bytes opens. `source` names where it
    /// came from in messages ("the desktop keyring").
    case key(SecureBytes, source: String = "a key in memory")

    /// A passphrase given as text; its UTF-8 bytes are copied into guarded memory.
    public static func passphrase(_ text: String) throws -> VaultCredential {
        .passphraseBytes(try SecureBytes(copying: text.utf8))
    }

    /// A passphrase given as raw bytes (which need not be UTF-8).
    public static func passphrase(bytes: some Collection<UInt8>) throws -> VaultCredential {
        .passphraseBytes(try SecureBytes(copying: bytes))
    }

    /// `passphrase(<redacted>)` or `keyFile(PATH)`: never the passphrase.
    public var description: String {
        switch self {
        case .passphraseBytes: "VaultCredential.passphrase(<redacted>)"
        case .keyFile(let url): "VaultCredential.keyFile(\(url.path))"
        case .key: "VaultCredential.key(<redacted>)"
        }
    }

    public var debugDescription: String { description }

    /// The kind and, for a key file, its path: `dump(credential)` cannot reach the passphrase.
    public var customMirror: Mirror {
        switch self {
        case .passphraseBytes: Mirror(self, children: ["passphrase": "<redacted>"], displayStyle: .enum)
        case .keyFile(let url): Mirror(self, children: ["keyFile": url.path], displayStyle: .enum)
        case .key: Mirror(self, children: ["key": "<redacted>"], displayStyle: .enum)
        }
    }

    var kind: String {
        switch self {
        case .passphraseBytes: "argon2id13"
        case .keyFile, .key: "keyfile"
        }
    }

    /// Reads a key file into guarded memory, refusing one of the wrong size or readable by others.
    static func readKeyFile(_ url: URL) throws -> SecureBytes {
        let path = url.path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw VaultError(.invalidCredential, "cannot read key file \(path): \(String(cString: strerror(errno)))", path: path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw VaultError(.invalidCredential, "key file \(path) is not a regular file", path: path)
        }
        if info.st_mode & 0o077 != 0 {
            throw VaultError(
                .unsafeLocation,
                "key file \(path) is accessible by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(path)`",
                path: path)
        }
        let expected = KeyEncryptionKey.keyLength
        guard Int(info.st_size) == expected else {
            throw VaultError(
                .invalidCredential,
                "key file \(path) holds \(info.st_size) bytes; a key file holds exactly \(expected) random bytes",
                path: path)
        }
        return try SecureBytes(count: expected) { buffer in
            guard let base = buffer.baseAddress, read(fd, base, expected) == expected else {
                throw VaultError(.invalidCredential, "cannot read \(expected) bytes from key file \(path)", path: path)
            }
        }
    }

    /// A new key of 32 random bytes in guarded memory, for ``key(_:)`` (a keeper keeps it).
    public static func newKey() throws -> SecureBytes {
        try SecureBytes.random(count: KeyEncryptionKey.keyLength)
    }

    /// The key's bytes in guarded memory: a key file read (and checked), or the key given.
    /// Nil for a passphrase. The caller wipes what it gets unless it is the credential's own.
    func keyBytes() throws -> (bytes: SecureBytes, owned: Bool)? {
        switch self {
        case .passphraseBytes: return nil
        case .keyFile(let url): return (try Self.readKeyFile(url), true)
        case .key(let bytes, _):
            guard bytes.count == KeyEncryptionKey.keyLength else {
                throw VaultError(.invalidCredential, "a vault key holds exactly \(KeyEncryptionKey.keyLength) bytes, not \(bytes.count)")
            }
            return (bytes, false)
        }
    }

    /// The 32 bytes a key credential opens with (a key file read and checked like an open
    /// reads it), as a copy the caller wipes; nil for a passphrase. What a keeper is given.
    public func keyCopy() throws -> SecureBytes? {
        guard let (bytes, owned) = try keyBytes() else { return nil }
        if owned { return bytes }
        return try SecureBytes(copying: try bytes.withUnsafeBytes { Array($0) })
    }

    /// Writes a new key file of 32 random bytes with mode 0600. Refuses to overwrite.
    public static func createKeyFile(at url: URL) throws {
        let key = try SecureBytes.random(count: KeyEncryptionKey.keyLength)
        defer { key.wipe() }
        let fd = open(url.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw VaultError(
                errno == EEXIST ? .alreadyExists : .storage,
                "cannot create key file \(url.path): \(String(cString: strerror(errno)))", path: url.path)
        }
        defer { close(fd) }
        fchmod(fd, 0o600)
        let written = try key.withUnsafeBytes { bytes in
            bytes.baseAddress.map { write(fd, $0, bytes.count) } ?? -1
        }
        guard written == KeyEncryptionKey.keyLength, fsync(fd) == 0 else {
            unlink(url.path)
            throw VaultError(.storage, "cannot write key file \(url.path)", path: url.path)
        }
    }
}
