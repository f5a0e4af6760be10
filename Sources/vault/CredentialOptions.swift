import ArgumentParser
import Foundation
import VaultCrypto
import VaultOAuth
import VaultStore

#if canImport(Glibc)
    import Glibc
    import CoreFoundation
#endif

/// How the vault is unlocked: --key-file, --passphrase-file, then for a vault unlocked by a key
/// file `VAULT_KEY_FILE`, then the systemd credential `vault.key` (``SystemdCredential``), else
/// `VAULT_PASSPHRASE`, then a prompt on the terminal.
struct CredentialOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Read the passphrase from this file (one trailing newline is ignored).",
            discussion: "Without it: $VAULT_PASSPHRASE, else a prompt on the terminal (no echo).",
            valueName: "file"))
    var passphraseFile: String?

    @Option(
        help: ArgumentHelp(
            "Unlock with this key file (32 random bytes, mode 0600) instead of a passphrase.",
            discussion: "Without it, a vault unlocked by a key file uses $VAULT_KEY_FILE, else the systemd credential vault.key ($CREDENTIALS_DIRECTORY).",
            valueName: "file"))
    var keyFile: String?

    func validate() throws {
        if passphraseFile != nil && keyFile != nil {
            throw ValidationError("give either --passphrase-file or --key-file, not both")
        }
    }

    /// The credential for an existing vault, asked once: --key-file, --passphrase-file; then for a
    /// key-file vault `$VAULT_KEY_FILE`, for a passphrase vault `$VAULT_PASSPHRASE`; then a key a
    /// keeper holds (``keeperCredential(for:slotKeepers:)``); then the passphrase on the terminal.
    /// `slotKeepers: false` leaves out the keepers of slots other than 0 (`passwd` changes slot 0
    /// and is given slot 0's own credential).
    func credential(for facts: VaultOpeningFacts, slotKeepers: Bool = true) throws -> VaultCredential {
        try credential(for: facts.url, unlock: facts.unlockMethod, vaultID: facts.vaultID, slots: facts.keySlots, slotKeepers: slotKeepers)
    }

    /// ``credential(for:slotKeepers:)`` from a vault's inspection.
    func credential(for inspection: VaultInspection) throws -> VaultCredential {
        try credential(for: inspection.url, unlock: inspection.unlockMethod, vaultID: inspection.vaultID, slots: inspection.keySlots, slotKeepers: true)
    }

    private func credential(for url: URL, unlock: VaultUnlockMethod, vaultID: String, slots: [KeySlot], slotKeepers: Bool) throws -> VaultCredential {
        if let keyFile { return .keyFile(URL(fileURLWithPath: keyFile)) }
        guard passphraseFile == nil else { return try passphrase(prompt: "Passphrase for \(url.path): ", confirm: false) }
        let keyFileVault: Bool = if case .keyFile = unlock { true } else { false }
        if keyFileVault, let path = ProcessInfo.processInfo.environment["VAULT_KEY_FILE"], !path.isEmpty {
            return .keyFile(URL(fileURLWithPath: path))
        }
        // Without the slots' keepers, the keyring holds slot 0's key only when no slot is kept there.
        let keyring = slotKeepers || !slots.contains { $0.keeper == SecretServiceKeeper.name }
        let slots = slotKeepers ? slots : Array(slots.prefix(1))
        // Slot 0's passphrase, or a key-file vault's passphrase slot.
        let takesPassphrase = !keyFileVault || slots.contains { $0.kind == .passphrase }
        // A passphrase given in the environment is asked for by name: it goes before any keeper.
        if takesPassphrase, let given = try ProcessHardening.passphrase(from: "VAULT_PASSPHRASE") { return .passphraseBytes(given) }
        let (kept, why) = try Self.keeperCredential(for: keyFileVault, vaultID: vaultID, slots: slots, keyring: keyring)
        if let kept { return kept }
        guard !takesPassphrase else {
            let which = keyFileVault ? "its passphrase slot" : "slot 0, the recovery route"
            if !why.isEmpty { Terminal.printError("vault: no keeper's key for \(url.path)\(why); asking for the passphrase (\(which))") }
            return try passphrase(prompt: "Passphrase for \(url.path): ", confirm: false)
        }
        throw CommandFailure(
            .usage,
            "\(url.path) is unlocked with a key file: pass --key-file PATH, set VAULT_KEY_FILE, run as a systemd service given the credential \(SystemdCredential.name) (LoadCredentialEncrypted=), or keep a key in the desktop keyring (`vault keeper add secret-service`)\(why)"
        )
    }

    /// The one rule for when a keeper is asked, used by every command and by the agent: a
    /// key-file vault's own key may be kept (a systemd credential, the keyring), and a slot may
    /// name a keeper; a passphrase vault without keeper slots asks none. Nil and why when none
    /// gave a key.
    static func keeperCredential(for keyFileVault: Bool, vaultID: String, slots: [KeySlot], keyring: Bool = true) throws -> (
        VaultCredential?, why: String
    ) {
        guard keyFileVault || !KeySlot.keepers(of: slots).isEmpty else { return (nil, "") }
        return try keptKey(vaultID: vaultID, slots: slots, keyring: keyring)
    }

    /// ``keeperCredential(for:vaultID:slots:)`` for a vault about to be opened.
    static func keeperCredential(for facts: VaultOpeningFacts) throws -> VaultCredential? {
        let keyFileVault: Bool = if case .keyFile = facts.unlockMethod { true } else { false }
        return try keeperCredential(for: keyFileVault, vaultID: facts.vaultID, slots: facts.keySlots).0
    }

    /// A vault's key from its keepers, when no key file is named: the systemd credential
    /// `vault.key` (a service), then the desktop keyring's item for `vaultID` (no prompt while the
    /// session is unlocked), then each TPM slot's sealed key (`slots` naming `tpm2`; at most one
    /// PIN is tried per run: each wrong one counts towards the TPM's lockout). Nil and why (for
    /// the message) when none holds it. `keyring: false` leaves the keyring out.
    static func keptKey(vaultID: String?, slots: [KeySlot] = [], keyring: Bool = true) throws -> (VaultCredential?, why: String) {
        if let credential = try SystemdCredential.credential() { return (credential, "") }
        var reasons: [String] = []
        // The keyring is asked for a key-file vault (its own key may be kept there) and a vault
        // with a keyring slot; a passphrase vault with a TPM slot alone does not wait on D-Bus.
        let keyringMayHoldIt = slots.isEmpty || slots.contains { $0.keeper == SecretServiceKeeper.name || ($0.id == 0 && $0.kind == .key) }
        if keyring, keyringMayHoldIt, let vaultID {
            do {
                if let key = try SecretServiceKeeper.lookup(vaultID: vaultID) { return (.key(key, source: SecretServiceKeeper.source), "") }
                reasons.append("the desktop keyring holds no key for it")
            } catch {
                reasons.append("\(error)")
            }
        }
        for slot in slots where slot.keeper == TPM2Keeper.name {
            do {
                let key = try TPM2Keeper.unseal(URL(fileURLWithPath: slot.label)) {
                    try TPM2Keeper.pin(prompt: "TPM PIN for \(slot): ")
                }
                return (.key(key, source: "the TPM, \(slot)"), "")
            } catch {
                reasons.append("\(slot): \(error)")
                if TPM2Keeper.endsPINAttempts(error) { break }
            }
        }
        return (nil, reasons.isEmpty ? "" : " (\(reasons.joined(separator: "; ")))")
    }

    /// A passphrase from --passphrase-file, $VAULT_PASSPHRASE or the terminal (asked twice
    /// when `confirm`, for a new passphrase).
    func passphrase(prompt: String, confirm: Bool) throws -> VaultCredential {
        try Self.passphrase(file: passphraseFile, environmentVariable: "VAULT_PASSPHRASE", prompt: prompt, confirm: confirm)
    }

    static func passphrase(file: String?, environmentVariable: String, prompt: String, confirm: Bool) throws -> VaultCredential {
        if let file {
            var bytes = try readPassphraseFile(file)
            defer { SecureBytes.zero(&bytes) }
            return try .passphrase(bytes: bytes)
        }
        // Taken out of the environment when the process started (ProcessHardening).
        if let value = try ProcessHardening.passphrase(from: environmentVariable) {
            return .passphraseBytes(value)
        }
        guard let reader = PassphraseReader() else {
            throw CommandFailure(
                .usage,
                "no passphrase: there is no terminal to ask on; use --passphrase-file FILE or set \(environmentVariable)")
        }
        var first = try reader.read(prompt: prompt)
        defer { SecureBytes.zero(&first) }
        if confirm {
            var second = try reader.read(prompt: "Repeat to confirm: ")
            defer { SecureBytes.zero(&second) }
            guard first == second else { throw CommandFailure(.usage, "the two passphrases differ; nothing was changed") }
        }
        guard !first.isEmpty else {
            // Creating or changing a passphrase (asked twice) refuses an empty one; opening a
            // vault with one is nothing typed.
            throw CommandFailure(.usage, confirm ? "an empty passphrase cannot protect a vault" : "no passphrase was typed; nothing was opened")
        }
        return try .passphrase(bytes: first)
    }

    /// The file's bytes less one trailing newline ("\n" or "\r\n"), read with read(2) into an
    /// array sized from the file (a pipe, `<(…)`, starts at 4 KiB and grows): every array the
    /// bytes passed through is zeroed, and no Data copy is made. The caller zeroes the result
    /// (``SecureBytes/zero(_:)``).
    /// `what` names the file in messages ("passphrase file", "client secret file"). `check` sees
    /// the opened file's status before a byte is read (the file read is the file checked).
    static func readPassphraseFile(_ path: String, what: String = "passphrase file", check: ((stat) throws -> Void)? = nil) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CommandFailure(.usage, "cannot read \(what) \(path)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw CommandFailure(.usage, "cannot read \(what) \(path)") }
        try check?(info)
        let limit = 1 << 20
        // One byte more than a regular file's size, to see its end without growing.
        var bytes = [UInt8](repeating: 0, count: (info.st_mode & S_IFMT) == S_IFREG ? min(Int(info.st_size), limit) + 1 : 4096)
        var filled = 0
        while true {
            if filled == bytes.count {
                guard bytes.count < limit else {
                    SecureBytes.zero(&bytes)
                    throw CommandFailure(.usage, "\(what) \(path) is larger than \(limit) bytes")
                }
                var larger = [UInt8](repeating: 0, count: min(bytes.count * 2, limit))
                larger.withUnsafeMutableBytes { target in bytes.withUnsafeBytes { target.copyMemory(from: $0) } }
                SecureBytes.zero(&bytes)
                bytes = larger
            }
            let count = bytes.withUnsafeMutableBytes { buffer in
                read(fd, buffer.baseAddress.map { $0 + filled }, buffer.count - filled)
            }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                SecureBytes.zero(&bytes)
                throw CommandFailure(.usage, "cannot read \(what) \(path)")
            }
            if count == 0 { break }
            filled += count
        }
        var length = filled
        if length > 0, bytes[length - 1] == 0x0A {
            length -= 1
            if length > 0, bytes[length - 1] == 0x0D { length -= 1 }
        }
        // Shrinking in place keeps the storage; the cut-off bytes are zeroed first.
        for index in length..<bytes.count { bytes[index] = 0 }
        bytes.removeSubrange(length...)
        return bytes
    }

    /// A private key from `path` (`--client-key-file`): a regular file of this user's that no
    /// one else can read or write (mode 0600 or stricter), else refused before it is read, as
    /// ssh refuses a private key others can read.
    static func readClientKey(_ path: String) throws -> ClientSigningKey {
        var bytes = try readPassphraseFile(path, what: "client key file") { info in
            guard (info.st_mode & S_IFMT) == S_IFREG else { throw CommandFailure(.usage, "client key file \(path) is not a regular file") }
            guard info.st_uid == getuid() else {
                throw CommandFailure(.unsafePermissions, "client key file \(path) belongs to another user (uid \(info.st_uid)): nothing was read")
            }
            guard info.st_mode & 0o077 == 0 else {
                throw CommandFailure(
                    .unsafePermissions,
                    "client key file \(path) can be read or written by others (mode \(String(info.st_mode & 0o777, radix: 8))): nothing was read; `chmod 600 \(path)`"
                )
            }
        }
        defer { SecureBytes.zero(&bytes) }
        do {
            return try ClientSigningKey(pem: String(decoding: bytes, as: UTF8.self))
        } catch {
            throw CommandFailure(.usage, "client key file \(path): \(error)")
        }
    }

    /// A confidential client's secret from `path` (`--client-secret-file`), its trailing newline dropped.
    static func readClientSecret(_ path: String) throws -> String {
        var bytes = try readPassphraseFile(path, what: "client secret file")
        defer { SecureBytes.zero(&bytes) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The named Argon2id costs of `--kdf`.
enum KDFLevel: String, ExpressibleByArgument, CaseIterable {
    case interactive, moderate, sensitive

    var parameters: KDFParameters {
        switch self {
        case .interactive: .interactive
        case .moderate: .moderate
        case .sensitive: .sensitive
        }
    }

    /// The level whose cost this is, if any.
    init?(_ parameters: KDFParameters) {
        guard let level = Self.allCases.first(where: { $0.parameters == parameters }) else { return nil }
        self = level
    }
}

/// `--resource` and `--scope`: a token for other APIs or a narrower scope set than the
/// account's own (`vault token`, `exec`).
struct TargetOptions: ParsableArguments {
    @Option(
        name: .customLong("resource"),
        help: ArgumentHelp(
            "A token for this API (RFC 8707 resource indicator: an absolute URI). Repeatable.",
            discussion: "Obtained with the account's refresh token and kept beside its own; refreshed like it.",
            valueName: "URI"))
    var resources: [String] = []
    @Option(
        name: .customLong("scope"),
        help: ArgumentHelp("A token with these scopes only (a subset of the account's). Repeatable.", valueName: "scope"))
    var scopes: [String] = []

    /// The target asked for; ``TokenTarget/account`` when neither option was given.
    var target: TokenTarget {
        get throws(TokenTargetError) { try TokenTarget(resources: resources, scopes: scopes) }
    }

    func validate() throws {
        do {
            _ = try target
        } catch {
            throw ValidationError(error.description)
        }
    }
}
