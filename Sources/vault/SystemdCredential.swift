import ArgumentParser
import Foundation
import VaultCrypto
import VaultProcess
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

/// The vault key as a systemd credential (systemd.exec(5), `LoadCredentialEncrypted=`): a
/// service gets it decrypted in `$CREDENTIALS_DIRECTORY`, on memory that is never swapped and
/// that only the service reads, while at rest it is sealed by `systemd-creds` to this host's
/// credential secret (`/var/lib/systemd/credential.secret`) and, with a TPM, to the TPM.
///
/// `vault init --systemd-creds FILE` makes the key in guarded memory, has `systemd-creds
/// encrypt` seal it into FILE (the key reaches it on a pipe, never a file), checks that FILE
/// decrypts to the same key on this host, and only then creates the vault. Every command, the
/// agent included, then takes the key from `$CREDENTIALS_DIRECTORY/vault.key` when no key file
/// is given (after `--key-file` and `$VAULT_KEY_FILE`).
enum SystemdCredential {
    /// The credential's name: `LoadCredentialEncrypted=vault.key:FILE` in the unit.
    static let name = "vault.key"

    /// Where `systemd-creds` is looked for (absolute: never `$PATH`).
    static let programs = ["/usr/bin/systemd-creds", "/bin/systemd-creds"]

    /// The key file systemd handed this service, if it runs as one and was given it.
    static func keyFile(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else { return nil }
        let file = URL(fileURLWithPath: directory).appending(path: name)
        return FileManager.default.fileExists(atPath: file.path) ? file : nil
    }

    /// How `systemd-creds` seals (its `--with-key`).
    enum Sealing: String, CaseIterable {
        case auto, host, tpm2
        case hostAndTPM2 = "host+tpm2"
    }

    /// Seals `key` into `output` with `systemd-creds encrypt`, then checks it opens on this host
    /// to the same key. Refuses an existing `output`; removes what it wrote when anything fails.
    static func seal(_ key: SecureBytes, to output: URL, sealing: Sealing) throws {
        guard let program = programs.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw CommandFailure(.usage, "systemd-creds is not installed (it comes with systemd 250 or later): nothing was created")
        }
        if FileManager.default.fileExists(atPath: output.path) {
            throw CommandFailure(.alreadyExists, "\(output.path) already exists: nothing was created")
        }
        var plain = try key.withUnsafeBytes { Array($0) }
        defer { SecureBytes.zero(&plain) }
        do {
            _ = try run(program, ["encrypt", "--name=\(name)", "--with-key=\(sealing.rawValue)", "-", output.path], input: plain)
            var opened = try run(program, ["decrypt", "--name=\(name)", output.path, "-"], input: [])
            defer { SecureBytes.zero(&opened) }
            guard opened == plain else {
                throw CommandFailure(.failure, "\(output.path) does not decrypt to the key it was made from on this host: nothing was created")
            }
        } catch {
            unlink(output.path)
            throw error
        }
    }

    /// Runs `program ARGUMENTS` with `input` on standard input and a bare environment; its
    /// standard output. A failure quotes what it said on standard error.
    private static func run(_ program: String, _ arguments: [String], input: [UInt8]) throws -> [UInt8] {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        var errors: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0, pipe(&errors) == 0 else {
            throw CommandFailure(.storage, "cannot start systemd-creds: \(String(cString: strerror(errno)))")
        }
        // Not inherited by anything else this process starts meanwhile (the child gets its three
        // as 0, 1 and 2; Spawn closes every other descriptor in it).
        for fd in toChild + fromChild + errors { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { for fd in [toChild[1], fromChild[0], errors[0]] where fd >= 0 { close(fd) } }
        let pid: pid_t
        do {
            pid = try Spawn.start(
                URL(fileURLWithPath: program), arguments, environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"],
                input: toChild[0], output: fromChild[1], error: errors[1])
        } catch {
            for fd in [toChild[0], fromChild[1], errors[1]] { close(fd) }
            throw CommandFailure(.storage, "cannot start systemd-creds: \(error)")
        }
        for fd in [toChild[0], fromChild[1], errors[1]] { close(fd) }
        // 32 bytes in, a few hundred out: far below a pipe's capacity, so neither side blocks.
        var offset = 0
        while offset < input.count {
            let written = input[offset...].withUnsafeBytes { write(toChild[1], $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
        close(toChild[1])
        toChild[1] = -1
        let output = readAll(fromChild[0])
        let said = String(decoding: readAll(errors[0]), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let ended = Spawn.waitBlocking(pid)
        guard ended == Spawn.Termination(status: 0, signaled: false) else {
            var discarded = output
            SecureBytes.zero(&discarded)
            let reason = said.split(separator: "\n").last.map(String.init) ?? "exit \(ended.shellStatus)"
            throw CommandFailure(.failure, "systemd-creds \(arguments[0]) failed: \(Terminal.printable(reason)); nothing was created")
        }
        return output
    }

    private static func readAll(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4096)  // what a key's answer holds, without a copy left behind by growing
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        SecureBytes.zero(&chunk)
        return bytes
    }
}

extension SystemdCredential.Sealing: ExpressibleByArgument {}
