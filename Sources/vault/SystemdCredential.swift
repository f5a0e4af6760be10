import ArgumentParser
internal import CProcessControl
import Foundation
import VaultCrypto
import VaultProcess
import VaultStore

#if canImport(Glibc)
    import Glibc
    // `struct stat`'s members, as the release build (static stdlib) resolves them.
    import CoreFoundation
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
    /// The keeper's name in key slots and on the command line.
    static let keeperName = "systemd-creds"

    /// Where `systemd-creds` is looked for (absolute: never `$PATH`).
    static let programs = ["/usr/bin/systemd-creds", "/bin/systemd-creds"]

    /// The key file systemd handed this service, if it runs as one and was given it.
    static func keyFile(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else { return nil }
        let file = URL(fileURLWithPath: directory).appending(path: name)
        return FileManager.default.fileExists(atPath: file.path) ? file : nil
    }

    /// The key systemd handed this service, read and checked; nil when it runs as none.
    static func credential(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> VaultCredential? {
        guard let file = keyFile(environment: environment) else { return nil }
        return .key(try readKey(file), source: "the systemd credential \(name), \(file.path)")
    }

    /// The credential's 32 bytes. systemd writes it mode 0400, owned by the service's user or,
    /// for a service of another user than root, by root with an ACL granting that user read
    /// access (which `stat` shows as group bits): those are taken; a file others can read, one
    /// of another owner, or group bits without an ACL are refused before a byte is read.
    static func readKey(_ file: URL) throws -> SecureBytes {
        let path = file.path
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw CommandFailure(.usage, "cannot read the systemd credential \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw CommandFailure(.usage, "the systemd credential \(path) is not a regular file")
        }
        let mode = String(info.st_mode & 0o777, radix: 8)
        guard info.st_uid == 0 || info.st_uid == geteuid() else {
            throw CommandFailure(.unsafePermissions, "the systemd credential \(path) belongs to uid \(info.st_uid): nothing was read")
        }
        let hasACL = cv_has_access_acl(fd) == 1
        guard info.st_mode & 0o007 == 0, info.st_mode & 0o070 == 0 || hasACL else {
            throw CommandFailure(
                .unsafePermissions, "the systemd credential \(path) is accessible by other users (mode \(mode)): nothing was read")
        }
        let length = KeyEncryptionKey.keyLength
        guard Int(info.st_size) == length else {
            throw CommandFailure(.usage, "the systemd credential \(path) holds \(info.st_size) bytes; a vault key holds \(length)")
        }
        return try SecureBytes(count: length) { buffer in
            guard let base = buffer.baseAddress, read(fd, base, length) == length else {
                throw CommandFailure(.usage, "cannot read \(length) bytes from the systemd credential \(path)")
            }
        }
    }

    /// How `systemd-creds` seals (its `--with-key`).
    enum Sealing: String, CaseIterable {
        case auto, host, tpm2
        case hostAndTPM2 = "host+tpm2"
    }

    /// Seals `key` into `output` with `systemd-creds encrypt`, then checks it opens on this host
    /// to the same key. `output` is created here (mode 0600, never over an existing file) and
    /// removed again when anything fails.
    static func seal(_ key: SecureBytes, to output: URL, sealing: Sealing) throws {
        guard let program = programs.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw CommandFailure(.usage, "systemd-creds is not installed (it comes with systemd 250 or later): nothing was created")
        }
        try SealedKeyFile.create(output) {
            var plain = try key.withUnsafeBytes { Array($0) }
            defer { SecureBytes.zero(&plain) }
            // Sealed to standard output, written into the file made first.
            return try run(program, ["encrypt", "--name=\(name)", "--with-key=\(sealing.rawValue)", "-", "-"], input: plain)
        } proving: {
            let opened = try unseal(output)
            defer { opened.wipe() }
            guard try ConstantTime.equals(opened, key) else {
                throw CommandFailure(.failure, "\(output.path) does not decrypt to the key it was made from on this host: nothing was created")
            }
        }
    }

    /// The key sealed into `file` by ``seal(_:to:sealing:)``, opened with `systemd-creds decrypt`
    /// on this host (as root: the host key and the TPM are root's).
    static func unseal(_ file: URL) throws -> SecureBytes {
        guard let program = programs.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw CommandFailure(.usage, "systemd-creds is not installed: \(file.path) cannot be opened here")
        }
        var opened = try run(program, ["decrypt", "--name=\(name)", file.path, "-"], input: [])
        defer { SecureBytes.zero(&opened) }
        guard opened.count == KeyEncryptionKey.keyLength else {
            throw CommandFailure(.usage, "\(file.path) holds \(opened.count) bytes once decrypted; a vault key holds \(KeyEncryptionKey.keyLength)")
        }
        return try SecureBytes(copying: opened)
    }

    /// Runs `program ARGUMENTS` with `input` on standard input and a bare environment; its
    /// standard output. A failure quotes what it said on standard error.
    private static func run(_ program: String, _ arguments: [String], input: [UInt8]) throws -> [UInt8] {
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        defer { for fd in toChild + fromChild + errors where fd >= 0 { close(fd) } }
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0, pipe(&errors) == 0 else {
            throw CommandFailure(.storage, "cannot start systemd-creds: \(String(cString: strerror(errno)))")
        }
        // Not inherited by anything else this process starts meanwhile (the child gets its three
        // as 0, 1 and 2; Spawn closes every other descriptor in it).
        for fd in toChild + fromChild + errors { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let pid: pid_t
        do {
            pid = try Spawn.start(
                URL(fileURLWithPath: program), arguments, environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"],
                input: toChild[0], output: fromChild[1], error: errors[1])
        } catch {
            throw CommandFailure(.storage, "cannot start systemd-creds: \(error)")
        }
        close(toChild[0])
        toChild[0] = -1
        close(fromChild[1])
        fromChild[1] = -1
        close(errors[1])
        errors[1] = -1
        // 32 bytes in: far below a pipe's capacity, so the write never waits for the child. A
        // child that ended without reading must not end this process: SIGPIPE is ignored (the
        // write then fails with EPIPE, and the child's status says why).
        let previous = signal(SIGPIPE, SIG_IGN)
        var offset = 0
        while offset < input.count {
            let written = input[offset...].withUnsafeBytes { write(toChild[1], $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
        close(toChild[1])
        toChild[1] = -1
        signal(SIGPIPE, previous)
        var output = readAll(fromChild[0])
        let said = String(decoding: readAll(errors[0]), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let ended = Spawn.waitBlocking(pid)
        guard ended == Spawn.Termination(status: 0, signaled: false) else {
            SecureBytes.zero(&output)
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
