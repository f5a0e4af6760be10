import ArgumentParser
import Foundation
import VaultCrypto
import VaultStore

/// How the vault is unlocked: --key-file, --passphrase-file, then `VAULT_KEY_FILE` (for a vault
/// unlocked by a key file) or `VAULT_PASSPHRASE`, then a prompt on the terminal.
struct CredentialOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Read the passphrase from this file (one trailing newline is ignored).",
        discussion: "Without it: $VAULT_PASSPHRASE, else a prompt on the terminal (no echo).",
        valueName: "file"))
    var passphraseFile: String?

    @Option(help: ArgumentHelp(
        "Unlock with this key file (32 random bytes, mode 0600) instead of a passphrase.",
        discussion: "Without it, a vault unlocked by a key file uses $VAULT_KEY_FILE.",
        valueName: "file"))
    var keyFile: String?

    func validate() throws {
        if passphraseFile != nil && keyFile != nil {
            throw ValidationError("give either --passphrase-file or --key-file, not both")
        }
    }

    /// The credential for an existing vault, asked once.
    func credential(for url: URL, unlock: VaultUnlockMethod? = nil) throws -> VaultCredential {
        if let keyFile { return .keyFile(URL(fileURLWithPath: keyFile)) }
        if case .keyFile = unlock, passphraseFile == nil {
            guard let path = ProcessInfo.processInfo.environment["VAULT_KEY_FILE"], !path.isEmpty else {
                throw CommandFailure(.usage, "\(url.path) is unlocked with a key file: pass --key-file PATH or set VAULT_KEY_FILE")
            }
            return .keyFile(URL(fileURLWithPath: path))
        }
        return try passphrase(prompt: "Passphrase for \(url.path): ", confirm: false)
    }

    /// A passphrase from --passphrase-file, $VAULT_PASSPHRASE or the terminal (asked twice
    /// when `confirm`, for a new passphrase).
    func passphrase(prompt: String, confirm: Bool) throws -> VaultCredential {
        try Self.passphrase(file: passphraseFile, environmentVariable: "VAULT_PASSPHRASE", prompt: prompt, confirm: confirm)
    }

    static func passphrase(file: String?, environmentVariable: String, prompt: String, confirm: Bool) throws -> VaultCredential {
        if let file {
            var bytes = try readPassphraseFile(file)
            defer { for index in bytes.indices { bytes[index] = 0 } }
            return try .passphrase(bytes: bytes)
        }
        if let value = ProcessInfo.processInfo.environment[environmentVariable], !value.isEmpty {
            return try .passphrase(value)
        }
        guard let reader = PassphraseReader() else {
            throw CommandFailure(
                .usage,
                "no passphrase: there is no terminal to ask on; use --passphrase-file FILE or set \(environmentVariable)")
        }
        var first = try reader.read(prompt: prompt)
        defer { for index in first.indices { first[index] = 0 } }
        if confirm {
            var second = try reader.read(prompt: "Repeat to confirm: ")
            defer { for index in second.indices { second[index] = 0 } }
            guard first == second else { throw CommandFailure(.usage, "the two passphrases differ; nothing was changed") }
        }
        guard !first.isEmpty else { throw CommandFailure(.usage, "an empty passphrase cannot protect a vault") }
        return try .passphrase(bytes: first)
    }

    /// The file's bytes less one trailing newline ("\n" or "\r\n").
    static func readPassphraseFile(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandFailure(.usage, "cannot read passphrase file \(path)")
        }
        var bytes = [UInt8](data)
        if bytes.last == 0x0A {
            bytes.removeLast()
            if bytes.last == 0x0D { bytes.removeLast() }
        }
        return bytes
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
