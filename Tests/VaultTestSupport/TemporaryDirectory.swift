import Foundation

/// A private (0700) directory under the system temp directory, removed when released.
public final class TemporaryDirectory: Sendable {
    public let url: URL

    public init(_ prefix: String = "credentialvault") throws {
        let base = FileManager.default.temporaryDirectory
        url = base.appending(path: "\(prefix)-\(UUID().uuidString.lowercased())", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// A path inside the directory (nothing is created).
    public func file(_ name: String) -> URL { url.appending(path: name) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// File helpers for tests that look at the bytes on disk.
public enum FileProbe {
    /// The file's bytes, or empty when it does not exist.
    ///
    /// Read with read(2) into an array: under LeakSanitizer, the buffer of every
    /// `FileManager.contents(atPath:)` on Linux was reported as leaked (inside Foundation's
    /// `readBytesFromFile`), which buried real reports.
    public static func bytes(_ url: URL) -> [UInt8] {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }

    /// A digest of the file's bytes, to prove a file was not changed.
    public static func fingerprint(_ url: URL) -> String {
        let data = bytes(url)
        var hasher = FNV1a()
        data.forEach { hasher.add($0) }
        return "\(data.count):\(String(hasher.value, radix: 16))"
    }

    /// The permission bits of a file (for example 0o600), or nil when it does not exist.
    public static func mode(_ url: URL) -> Int? {
        // Through FileManager, not `stat`: with NIOExtras in the graph, a fresh build named
        // CoreFoundation the module defining `struct stat`, and the member-import check failed.
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
            let mode = attributes[.posixPermissions] as? NSNumber
        else { return nil }
        return mode.intValue & 0o7777
    }

    /// Whether `needle` occurs anywhere in the file.
    public static func contains(_ url: URL, _ needle: some Collection<UInt8>) -> Bool {
        let haystack = bytes(url)
        let needle = Array(needle)
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0], Array(haystack[index..<(index + needle.count)]) == needle { return true }
            index += 1
        }
        return false
    }

    private struct FNV1a {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        mutating func add(_ byte: UInt8) {
            value ^= UInt64(byte)
            value = value &* 0x100_0000_01b3
        }
    }
}
