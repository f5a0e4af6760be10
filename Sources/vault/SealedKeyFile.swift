import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A keeper's sealed key (a systemd credential, a TPM blob) written to a file of its own: the
/// file is made first (mode 0600, never over an existing one), then filled with what the keeper
/// sealed and synced, then opened once by the keeper to prove it gives the key back. When
/// anything fails the file is removed: no half-written or unproven key is left behind.
enum SealedKeyFile {
    static func create(_ output: URL, sealing seal: () throws -> [UInt8], proving check: () throws -> Void) throws {
        let fd = open(output.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CommandFailure(
                errno == EEXIST ? .alreadyExists : .storage, "cannot create \(output.path): \(String(cString: strerror(errno))): nothing was created")
        }
        do {
            do {
                defer { close(fd) }
                let sealed = try seal()
                var offset = 0
                while offset < sealed.count {
                    let written = sealed[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    if written < 0 && errno == EINTR { continue }
                    guard written > 0 else { throw CommandFailure(.storage, "cannot write \(output.path): \(String(cString: strerror(errno)))") }
                    offset += written
                }
                guard fsync(fd) == 0 else { throw CommandFailure(.storage, "cannot write \(output.path): \(String(cString: strerror(errno)))") }
            }
            try check()
        } catch {
            unlink(output.path)
            throw error
        }
    }
}
