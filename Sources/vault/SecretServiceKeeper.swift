internal import CSecretService
import Foundation
import VaultCrypto
import VaultStore

/// The vault key held in the desktop keyring over the Secret Service API (gnome-keyring,
/// KeePassXC), through libsecret loaded when first used (``CSecretService``): a desktop login
/// unlocks the keyring, and with it the vault, with no prompt and no key file.
///
/// The item is the vault's 32-byte key, base64url, in the default collection, found by the
/// vault's id (`vault keeper add secret-service` puts it there, `vault init --keeper
/// secret-service` makes it). While the keyring is unlocked **any process of the same user can
/// read the item** over D-Bus, as with every Secret Service item: it protects the key at rest
/// and from other users, not from this user's other programs.
enum SecretServiceKeeper {
    /// What a key from the keyring is called in messages ("wrong key (from the desktop keyring)").
    static let source = "the desktop keyring"
    /// The keeper's name in key slots and on the command line.
    static let name = "secret-service"

    /// How long a call may wait for the keyring, a locked keyring's unlock prompt included:
    /// `$VAULT_KEYRING_TIMEOUT` seconds (1 to 600), else 60.
    static var timeoutMilliseconds: Int32 {
        let given = ProcessInfo.processInfo.environment["VAULT_KEYRING_TIMEOUT"].flatMap { Int32($0) }.flatMap { (1...600).contains($0) ? $0 : nil }
        return (given ?? 60) * 1000
    }

    /// Why the keyring could not answer.
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    /// Stores `key` for `vaultID` (replacing an item already there), then reads it back.
    static func store(_ key: SecureBytes, vaultID: String, label: String) throws {
        // The key's text, made in arrays that are zeroed (no String of it is ever made).
        var raw = try key.withUnsafeBytes { Array($0) }
        defer { SecureBytes.zero(&raw) }
        var text: [UInt8] = []
        text.reserveCapacity(raw.count * 4 / 3 + 4)
        Base64URL.append(raw, to: &text)
        text.append(0)
        defer { SecureBytes.zero(&text) }
        var message: UnsafeMutablePointer<CChar>?
        let status = text.withUnsafeBufferPointer { secret in
            secret.withMemoryRebound(to: CChar.self) {
                cv_secret_store(vaultID, label, $0.baseAddress, timeoutMilliseconds, &message)
            }
        }
        let reason = take(message)
        guard status == Int32(CV_SECRET_OK) else { throw failure(status, reason, doing: "store the key in") }
        guard let stored = try lookup(vaultID: vaultID) else { throw Unavailable(description: "the keyring did not keep the key it was given") }
        defer { stored.wipe() }
        guard try ConstantTime.equals(stored, key) else {
            throw Unavailable(description: "the keyring returned another key than the one stored")
        }
    }

    /// The key stored for `vaultID`, nil when there is none. Throws ``Unavailable`` when the
    /// keyring cannot be asked (no libsecret, no session bus or keyring daemon, a prompt
    /// dismissed or left unanswered).
    static func lookup(vaultID: String) throws -> SecureBytes? {
        var secret: UnsafeMutablePointer<CChar>?
        var message: UnsafeMutablePointer<CChar>?
        let status = cv_secret_lookup(vaultID, timeoutMilliseconds, &secret, &message)
        let reason = take(message)
        defer { cv_secret_free(secret) }
        if status == Int32(CV_SECRET_NOT_FOUND) { return nil }
        guard status == Int32(CV_SECRET_OK), let secret else { throw failure(status, reason, doing: "read the key from") }
        // Decoded from the C string straight into guarded memory.
        let text = UnsafeBufferPointer(start: UnsafeRawPointer(secret).assumingMemoryBound(to: UInt8.self), count: strlen(secret))
        let length = KeyEncryptionKey.keyLength
        let notAKey = Unavailable(description: "the keyring's item for this vault is not a vault key (it was changed by something else)")
        return try SecureBytes(count: length) { buffer in
            guard Base64URL.decode(text, into: buffer) == length else { throw notAKey }
        }
    }

    /// Removes the item of `vaultID`; false when there was none.
    static func remove(vaultID: String) throws -> Bool {
        var message: UnsafeMutablePointer<CChar>?
        let status = cv_secret_clear(vaultID, timeoutMilliseconds, &message)
        let reason = take(message)
        if status == Int32(CV_SECRET_NOT_FOUND) { return false }
        guard status == Int32(CV_SECRET_OK) else { throw failure(status, reason, doing: "remove the key from") }
        return true
    }

    private static func take(_ message: UnsafeMutablePointer<CChar>?) -> String? {
        guard let message else { return nil }
        defer { free(message) }
        return String(cString: message)
    }

    private static func failure(_ status: Int32, _ reason: String?, doing what: String) -> Unavailable {
        switch status {
        case Int32(CV_SECRET_UNAVAILABLE):
            return Unavailable(description: "libsecret is not installed (Debian: apt-get install libsecret-1-0), so the desktop keyring cannot be used")
        case Int32(CV_SECRET_LOCKED):
            return Unavailable(
                description:
                    "the desktop keyring is locked and its unlock prompt could not be shown or was dismissed: unlock it (log in to the desktop) and try again")
        case Int32(CV_SECRET_TIMED_OUT):
            return Unavailable(
                description: "the keyring did not answer within \(timeoutMilliseconds / 1000) s (a locked keyring's prompt nobody answered?)")
        default:
            return Unavailable(description: "cannot \(what) the desktop keyring: \(reason.map(Terminal.printable) ?? "no reason given")")
        }
    }
}
