import Foundation
import GRDB
import Testing
import VaultStore
import VaultTestSupport

/// Runs `body`, requires it to throw a ``VaultError`` with `code`, and returns the error.
@discardableResult
func expectVaultError<T>(
    _ code: VaultError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) -> VaultError? {
    do {
        let value = try body()
        Issue.record("expected VaultError \(code), got a value: \(type(of: value))", sourceLocation: sourceLocation)
        return nil
    } catch let error as VaultError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected VaultError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Times with whole milliseconds, as the vault stores them.
enum Times {
    static let base = Date(timeIntervalSince1970: 1_800_000_000)

    static func at(_ secondsFromBase: Int) -> Date { base.addingTimeInterval(TimeInterval(secondsFromBase)) }

    static let fixedClock = WallClock { base }
}

/// Permission bits shown in octal in test names.
struct FileMode: Sendable, CustomTestStringConvertible {
    var bits: mode_t
    init(_ bits: mode_t) { self.bits = bits }
    var testDescription: String { "0" + String(bits, radix: 8) }
}

extension Samples {
    /// ``Samples/tokens(_:expiresAt:)`` with a fixed, whole-millisecond expiry, so the same tag
    /// always gives equal token sets and a stored set compares equal to what was stored.
    static func fixedTokens(_ tag: String) -> TokenSet {
        tokens(tag, expiresAt: Times.at(3600))
    }
}

extension FileProbe {
    /// Whether the file is missing or empty (a WAL after a truncating checkpoint).
    static func isEmpty(_ url: URL) -> Bool { bytes(url).isEmpty }
}

/// Looks for leftovers of byte strings in a file, piece by piece: a value that SQLite spread
/// over overflow pages is not contiguous on disk, but each 16-byte piece of it mostly is.
struct LeftoverScan {
    static let piece = 16
    private var pieces: [UInt64: [(needle: Int, bytes: [UInt8])]] = [:]

    init(_ needles: [[UInt8]]) {
        for (index, needle) in needles.enumerated() where needle.count >= Self.piece {
            for start in stride(from: 0, through: needle.count - Self.piece, by: Self.piece) {
                let bytes = Array(needle[start..<(start + Self.piece)])
                pieces[Self.key(bytes, 0), default: []].append((index, bytes))
            }
        }
    }

    /// The indices of the needles with at least one piece in the file.
    func found(in url: URL) -> Set<Int> {
        let haystack = FileProbe.bytes(url)
        guard haystack.count >= Self.piece else { return [] }
        var found = Set<Int>()
        for offset in 0...(haystack.count - Self.piece) {
            guard let candidates = pieces[Self.key(haystack, offset)] else { continue }
            for candidate in candidates where !found.contains(candidate.needle) {
                if haystack[offset..<(offset + Self.piece)].elementsEqual(candidate.bytes) { found.insert(candidate.needle) }
            }
        }
        return found
    }

    private static func key(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
    }
}
