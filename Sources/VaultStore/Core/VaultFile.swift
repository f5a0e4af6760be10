import Foundation
import GRDB

/// What can be learned about a vault file without SQLite touching it, and the file-system
/// rules a vault lives by: mode 0600, owned by this user, in a directory no other user can
/// write. The rules apply to the real file, every symbolic link resolved (``checkedLocation(_:)``).
enum VaultFile {
    /// 'CVLT', set by migration 1 in the SQLite header's application_id field.
    static let applicationID: UInt32 = 0x4356_4C54

    /// The SQLite header fields the vault relies on.
    struct Header: Sendable {
        var pageSize: Int
        var pageCount: Int
        var applicationID: UInt32
        var userVersion: Int
    }

    // MARK: - Where the vault really is

    /// Resolves every symbolic link in `url` (realpath(3)), then checks the real file: its
    /// header (``inspect(_:)``), its directory (``checkDirectory(_:)``) and its owner and mode
    /// (``checkFileMode(_:)``). Returns the real location, the one SQLite must open: a link in a
    /// private directory to a vault in a directory others can write is refused, and the
    /// `-wal`/`-shm` files are created next to the file that was checked.
    ///
    /// ```swift
    /// let url = try VaultFile.checkedLocation(url)   // then open SQLite at url.path
    /// ```
    static func checkedLocation(_ url: URL) throws -> URL {
        let real = try realLocation(url)
        _ = try inspect(real)
        try checkDirectory(real.deletingLastPathComponent())
        try checkFileMode(real)
        return real
    }

    /// `url` with every symbolic link resolved. Throws `.notFound` for a missing file (or a
    /// link to one).
    static func realLocation(_ url: URL) throws -> URL {
        let path = url.path
        guard let resolved = realpath(path, nil) else {
            if errno == ENOENT || errno == ENOTDIR {
                throw VaultError(.notFound, "no vault at \(path)", path: path)
            }
            throw VaultError(.storage, "cannot resolve \(path): \(String(cString: strerror(errno)))", path: path)
        }
        defer { free(resolved) }
        return URL(fileURLWithPath: String(cString: resolved))
    }

    /// Where a file about to be created at `url` will really be: its directory with every
    /// symbolic link resolved, and its own name. (The name itself is never followed:
    /// ``createEmpty(_:)`` creates with `O_EXCL`, which refuses a link.)
    static func realLocation(forNew url: URL) throws -> URL {
        let directory = try realLocation(url.deletingLastPathComponent())
        return directory.appendingPathComponent(url.lastPathComponent, isDirectory: false)
    }

    // MARK: - Checks

    /// Reads and checks the first 100 bytes: a SQLite database with the vault's application id,
    /// not shorter than its header says. Throws `.notFound`, `.notAVault` or `.damaged`.
    static func inspect(_ url: URL) throws -> Header {
        let path = url.path
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT {
                throw VaultError(.notFound, "no vault at \(path)", path: path)
            }
            throw VaultError(.storage, "cannot read \(path): \(String(cString: strerror(errno)))", path: path)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw VaultError(.notAVault, "\(path) is not a regular file", path: path)
        }
        let size = Int(info.st_size)
        if size == 0 {
            throw VaultError(.notAVault, "\(path) is empty: it is not a vault", path: path)
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw VaultError(.storage, "cannot open \(path) for reading", path: path)
        }
        defer { try? handle.close() }
        let bytes = [UInt8]((try? handle.read(upToCount: 100)) ?? Data())
        let magic = Array("SQLite format 3\0".utf8)
        guard bytes.count >= 16, Array(bytes[0..<16]) == magic else {
            throw VaultError(.notAVault, "\(path) is not a vault (not a SQLite database)", path: path)
        }
        guard bytes.count == 100 else {
            throw VaultError(.damaged, "\(path) is truncated (\(size) bytes, shorter than a SQLite header)", path: path)
        }
        func uint32(_ offset: Int) -> UInt32 {
            bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
        }
        let rawPageSize = Int(bytes[16]) << 8 | Int(bytes[17])
        let pageSize = rawPageSize == 1 ? 65536 : rawPageSize
        let header = Header(
            pageSize: pageSize,
            pageCount: Int(uint32(28)),
            applicationID: uint32(68),
            userVersion: Int(uint32(60)))
        // Frames in the WAL are commits the file itself does not hold yet: while another process
        // has a new vault open, the file's own header still reads application_id 0. Only an empty
        // or missing WAL (every clean close leaves one) makes the file's header the whole truth;
        // otherwise SQLite, which reads through the WAL, judges (see `checkApplicationID`).
        let walHasFrames = walSize(path) > 0
        guard header.applicationID == applicationID || walHasFrames else {
            throw notAVault(path)
        }
        // The in-header page count is valid when the "version-valid-for" number matches the change counter.
        let countIsValid = uint32(92) == uint32(24)
        if countIsValid, !walHasFrames, pageSize >= 512, size < header.pageCount * pageSize {
            throw VaultError(
                .damaged,
                "\(path) is truncated: \(size) bytes where its header promises \(header.pageCount * pageSize); restore it from a backup",
                path: path)
        }
        if size % max(pageSize, 512) != 0, !walHasFrames {
            throw VaultError(.damaged, "\(path) is truncated: \(size) bytes is not a whole number of \(pageSize)-byte pages", path: path)
        }
        return header
    }

    /// Checks the application id as SQLite sees it (through the WAL). Throws `.notAVault`.
    static func checkApplicationID(_ db: Database, path: String) throws {
        let id = try Int64.fetchOne(db, sql: "PRAGMA application_id") ?? 0
        guard UInt32(truncatingIfNeeded: id) == applicationID else { throw notAVault(path) }
    }

    private static func notAVault(_ path: String) -> VaultError {
        VaultError(.notAVault, "\(path) is a SQLite database but not a CredentialVault vault", path: path)
    }

    /// The size of the vault's -wal file, 0 when there is none.
    private static func walSize(_ path: String) -> Int {
        var info = stat()
        guard stat(path + "-wal", &info) == 0 else { return 0 }
        return Int(info.st_size)
    }

    /// Refuses a directory that another user could write to: they could replace the vault
    /// or plant its -wal/-shm companions.
    static func checkDirectory(_ directory: URL) throws {
        let path = directory.path
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw VaultError(.notFound, "directory \(path) does not exist", path: path)
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw VaultError(.unsafeLocation, "\(path) is not a directory", path: path)
        }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            throw VaultError(
                .unsafeLocation,
                "refusing a vault in \(path): other users can write to that directory (mode \(String(info.st_mode & 0o7777, radix: 8))); use a directory only you can write, e.g. `chmod go-w \(path)`",
                path: path)
        }
        if info.st_uid != geteuid() && info.st_uid != 0 {
            throw VaultError(.unsafeLocation, "refusing a vault in \(path): the directory belongs to another user", path: path)
        }
    }

    /// Creates the parent directory (0700) if missing, then an empty vault file with mode 0600
    /// in its real directory (symbolic links resolved, then checked). Returns the file's real
    /// location. SQLite gives the -wal and -shm files the same mode as the database file.
    @discardableResult
    static func createEmpty(_ url: URL) throws -> URL {
        let directory = url.deletingLastPathComponent()
        if !FileManager.default.fileExists(atPath: directory.path) {
            do {
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw VaultError(.storage, "cannot create directory \(directory.path): \(error.localizedDescription)", path: url.path)
            }
        }
        let url = try realLocation(forNew: url)
        try checkDirectory(url.deletingLastPathComponent())
        let fd = open(url.path, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST {
                throw VaultError(.alreadyExists, "a file already exists at \(url.path); open it, or choose another path", path: url.path)
            }
            throw VaultError(.storage, "cannot create \(url.path): \(String(cString: strerror(errno)))", path: url.path)
        }
        // open(2) applies the umask; make the mode exactly 0600 whatever the umask.
        fchmod(fd, 0o600)
        close(fd)
        return url
    }

    /// Refuses a vault file that other users can read or write, or that belongs to another
    /// user (root's files excepted, as for directories).
    static func checkFileMode(_ url: URL) throws {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return }
        if info.st_uid != geteuid() && info.st_uid != 0 {
            throw VaultError(.unsafeLocation, "refusing \(url.path): the file belongs to another user", path: url.path)
        }
        if info.st_mode & 0o077 != 0 {
            throw VaultError(
                .unsafeLocation,
                "refusing \(url.path): other users can access it (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(url.path)`",
                path: url.path)
        }
    }

    /// Removes a vault file and its companions (used to undo a failed `create`).
    static func remove(_ url: URL) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            unlink(url.path + suffix)
        }
    }
}
