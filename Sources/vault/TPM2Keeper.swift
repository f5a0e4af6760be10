internal import CTPM2
import Foundation
import VaultCrypto
import VaultStore

#if canImport(Glibc)
    import Glibc
    import CoreFoundation  // `stat`'s fields in a release build
#endif

/// A key slot's key sealed to this machine's TPM 2.0 (``CTPM2``, tpm2-tss loaded when first
/// used): the sealed file opens on this TPM only, and, when asked, only with a PIN (the TPM's
/// dictionary-attack protection counts wrong ones) and while chosen PCRs keep their values.
///
/// `vault keeper add tpm2 FILE [--tpm2-pin] [--tpm2-pcrs 7]` seals a new key into FILE (0600,
/// never over an existing file) and opens it once before the slot is added. The TPM is reached
/// through `$VAULT_TPM2_TCTI` (`swtpm:path=…`, `device:/dev/tpm0`), else the kernel's devices
/// only: the resource manager `/dev/tpmrm0` (group `tss`), then `/dev/tpm0`. A PIN is given to
/// the TPM as its SHA-256 digest (any length and bytes; the TPM takes at most 32).
enum TPM2Keeper {
    /// The keeper's name in key slots and on the command line.
    static let name = "tpm2"

    /// Why the TPM could not seal or unseal; `code` is one of ctpm2.h's.
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var description: String
    }

    static var tcti: String? {
        ProcessInfo.processInfo.environment["VAULT_TPM2_TCTI"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Seals `key` into the new file `output` (mode 0600), then unseals it once to check it
    /// opens here to the same key; `output` is removed when anything fails.
    static func seal(_ key: SecureBytes, pin: SecureBytes?, pcrs: [Int], to output: URL) throws {
        let mask = pcrs.reduce(UInt32(0)) { $0 | (1 << UInt32($1)) }
        try SealedKeyFile.create(output) {
            var blob: UnsafeMutablePointer<UInt8>?
            var length = 0
            var message: UnsafeMutablePointer<CChar>?
            let status = try key.withUnsafeBytes { secret in
                try withPIN(pin) { pinBytes in
                    cv_tpm2_seal(
                        tcti, secret.baseAddress?.assumingMemoryBound(to: UInt8.self), secret.count,
                        pinBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), pinBytes.count, mask, &blob, &length, &message)
                }
            }
            let reason = take(message)
            guard status == Int32(CV_TPM2_OK), let blob else { throw failure(status, reason) }
            defer { cv_tpm2_free(blob) }
            return Array(UnsafeBufferPointer(start: blob, count: length))
        } proving: {
            let opened = try unseal(output, pin: { pin })
            defer { opened.wipe() }
            guard try ConstantTime.equals(opened, key) else {
                throw CommandFailure(.failure, "\(output.path) does not unseal to the key it was made from: nothing was created")
            }
        }
    }

    /// Whether the sealed file asks for a PIN.
    static func needsPIN(_ file: URL) throws -> Bool {
        let blob = try contents(of: file)
        switch blob.withUnsafeBufferPointer({ cv_tpm2_needs_pin($0.baseAddress, $0.count) }) {
        case 1: return true
        case 0: return false
        default: throw Failure(code: Int32(CV_TPM2_MALFORMED), description: "\(Terminal.printable(file.path)) is not a key sealed to a TPM by vault")
        }
    }

    /// The key sealed in `file`, in guarded memory. `pin` is asked only when the file needs one.
    static func unseal(_ file: URL, pin: () throws -> SecureBytes?) throws -> SecureBytes {
        let blob = try contents(of: file)
        let needs = blob.withUnsafeBufferPointer { cv_tpm2_needs_pin($0.baseAddress, $0.count) }
        guard needs >= 0 else {
            throw Failure(code: Int32(CV_TPM2_MALFORMED), description: "\(Terminal.printable(file.path)) is not a key sealed to a TPM by vault")
        }
        let given = needs == 1 ? try pin() : nil
        defer { given?.wipe() }
        if needs == 1, given == nil {
            throw Failure(code: Int32(CV_TPM2_BAD_PIN), description: "the TPM key needs its PIN: set VAULT_TPM2_PIN, or run at a terminal")
        }
        var message: UnsafeMutablePointer<CChar>?
        var status: Int32 = 0
        let key = try SecureBytes(count: KeyEncryptionKey.keyLength) { output in
            status = try withPIN(given) { pinBytes in
                blob.withUnsafeBufferPointer { sealed in
                    cv_tpm2_unseal(
                        tcti, sealed.baseAddress, sealed.count, pinBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), pinBytes.count,
                        output.baseAddress?.assumingMemoryBound(to: UInt8.self), output.count, &message)
                }
            }
        }
        let reason = take(message)
        guard status == Int32(CV_TPM2_OK) else {
            key.wipe()
            throw failure(status, reason)
        }
        return key
    }

    /// Whether a failure was the PIN's (wrong, missing) or the TPM's lockout: after one, no other
    /// PIN is tried in this run (each wrong one counts towards the TPM-wide lockout).
    static func endsPINAttempts(_ error: any Error) -> Bool {
        guard let failure = error as? Failure else { return false }
        return failure.code == Int32(CV_TPM2_BAD_PIN) || failure.code == Int32(CV_TPM2_LOCKOUT)
    }

    /// The PIN for a sealed file: `$VAULT_TPM2_PIN` (taken out of the environment at start), else
    /// asked on the terminal; nil when neither is there.
    static func pin(prompt: String) throws -> SecureBytes? {
        if let pin = try ProcessHardening.passphrase(from: "VAULT_TPM2_PIN") { return pin }
        guard let reader = PassphraseReader() else { return nil }
        var typed = try reader.read(prompt: prompt)
        defer { SecureBytes.zero(&typed) }
        return typed.isEmpty ? nil : try SecureBytes(copying: typed)
    }

    /// Runs `body` with the TPM's authorization value for `pin`: its SHA-256 digest.
    private static func withPIN<T>(_ pin: SecureBytes?, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        guard let pin else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        var digest = try pin.withUnsafeBytes { Digest.sha256($0) }
        defer { SecureBytes.zero(&digest) }
        return try digest.withUnsafeBytes(body)
    }

    /// The sealed file's bytes. Its path comes from the vault file before the slot is checked, so
    /// it is opened without following a link or waiting (a FIFO, a device), and taken only as a
    /// regular file of this user or root of at most 64 KiB.
    private static func contents(of file: URL) throws -> [UInt8] {
        let shown = Terminal.printable(file.path)
        let unreadable = Failure(code: Int32(CV_TPM2_MALFORMED), description: "cannot read the TPM-sealed key \(shown)")
        let fd = open(file.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw unreadable }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() || info.st_uid == 0,
            info.st_size > 0, info.st_size <= 1 << 16
        else {
            throw Failure(code: Int32(CV_TPM2_MALFORMED), description: "\(shown) is not a TPM-sealed key of this user (a regular file of at most 64 KiB)")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress.map { $0 + filled }, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw unreadable }
            filled += count
        }
        return bytes
    }

    private static func take(_ message: UnsafeMutablePointer<CChar>?) -> String? {
        guard let message else { return nil }
        defer { free(message) }
        return String(cString: message)
    }

    private static func failure(_ status: Int32, _ reason: String?) -> Failure {
        let said = reason ?? "no reason given"
        let text: String
        switch status {
        case Int32(CV_TPM2_UNAVAILABLE):
            text = "tpm2-tss is not installed (Debian: apt-get install libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-tcti-device0 libtss2-mu0)"
        case Int32(CV_TPM2_NO_DEVICE):
            text =
                "no TPM here: \(said) (the kernel's /dev/tpmrm0 is missing, or this user may not use it: it belongs to group tss, `usermod -aG tss $USER` and log in again)"
        case Int32(CV_TPM2_LOCKOUT):
            text = "\(said): wait for the TPM to recover (its lockout interval), or have its owner clear the lockout (`tpm2_dictionarylockout --clear-lockout`)"
        case Int32(CV_TPM2_PCRS_CHANGED):
            text = "\(said): after a firmware, boot loader or kernel update the sealed key no longer opens; unlock with another slot and seal a new one"
        default:
            text = said
        }
        return Failure(code: status, description: text)
    }
}
